package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// scheduleStatePath is the state file of a graph run in workdir: in
// stateDir, else beside the retry state in the repository's git directory;
// "" (with a note on stderr) outside a repository.
func scheduleStatePath(ctx context.Context, stateDir, workdir string, stderr io.Writer) string {
	if stateDir != "" {
		return filepath.Join(stateDir, schedule.StoreFileName)
	}
	if p, err := retry.DefaultStorePath(ctx, workdir); err == nil {
		return filepath.Join(filepath.Dir(p), schedule.StoreFileName)
	}
	fmt.Fprintf(stderr, "pilot schedule: note: %s is not in a git repository; job ownership lasts for this run only (give --state DIR to share it)\n", workdir)
	return ""
}

// markRerun sets Rerun on the jobs --rerun names: "all", or ids of the
// graph separated by commas.
func markRerun(jobs []schedule.Job, rerun string) error {
	if rerun == "" {
		return nil
	}
	var ids []string
	for i := range jobs {
		ids = append(ids, jobs[i].ID)
	}
	names := strings.Split(rerun, ",")
	if rerun == "all" {
		names = ids
	}
	for _, n := range names {
		i := slices.Index(ids, strings.TrimSpace(n))
		if i < 0 {
			return fmt.Errorf("no job %q in the graph (its jobs: %s; or all)", n, strings.Join(ids, ", "))
		}
		jobs[i].Rerun = true
	}
	return nil
}

// pilotErrors says on stderr why each job pilot itself could not run
// failed: its verdict holds it too, but a person reads the terminal.
func pilotErrors(stderr io.Writer, out []scheduledVerdict) {
	for _, v := range out {
		if v.FailureClass == pilot.FailPilot {
			fmt.Fprintf(stderr, "pilot schedule: job %s: %s\n", v.ID, v.EvidenceExcerpt)
		}
	}
}

// integrationSummary says which jobs' work --integrate merged into its
// branch, and which it did not, and why.
func integrationSummary(stderr io.Writer, into string, out []scheduledVerdict) {
	if into == "" {
		return
	}
	var merged, not []string
	for _, v := range out {
		switch {
		case v.Integrated == nil:
		case *v.Integrated:
			merged = append(merged, v.ID)
		case v.IntegrationConflict != nil:
			not = append(not, v.ID+" (conflict in "+strings.Join(v.IntegrationConflict, ", ")+"; its branch "+v.Worktree.Branch+" is kept)")
		default:
			not = append(not, v.ID+" ("+v.IntegrationError+")")
		}
	}
	if merged == nil {
		merged = []string{"nothing"}
	}
	fmt.Fprintf(stderr, "pilot schedule: integrated into %s: %s\n", into, strings.Join(merged, ", "))
	if not != nil {
		fmt.Fprintf(stderr, "pilot schedule: not integrated: %s\n", strings.Join(not, "; "))
	}
}

// cmdScheduleReset is "pilot schedule reset": it clears the graph's jobs'
// records from the state file, so that the next run starts them afresh;
// --dry-run says which it would clear.
func cmdScheduleReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule reset", "--graph FILE --workdir D [--state DIR] [--dry-run] [--job ID,...]", stdout, stderr)
	var graphFile, workdir, stateDir, only string
	var dryRun bool
	fs.StringVar(&graphFile, "graph", "", "the graph `file` whose jobs' state is cleared (required)")
	fs.StringVar(&workdir, "workdir", "", "the project `directory` the graph runs in (required: its repository holds the state)")
	fs.StringVar(&stateDir, "state", "", "`directory` of the state file, as given to pilot schedule")
	fs.StringVar(&only, "job", "", "clear only these jobs: `ID,...` (default: every job of the graph)")
	fs.BoolVar(&dryRun, "dry-run", false, "print what would be cleared; change nothing")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if graphFile == "" || workdir == "" {
		return badInput(stderr, "schedule reset", "--graph and --workdir are required (see pilot schedule reset --help)")
	}
	specs, err := loadGraph(graphFile)
	if err != nil {
		return badInput(stderr, "schedule reset", "%v", err)
	}
	jobs := make([]schedule.Job, len(specs))
	for i, s := range specs {
		jobs[i].ID = s.ID
	}
	ids := []string{}
	if only != "" {
		if err := markRerun(jobs, only); err != nil {
			return badInput(stderr, "schedule reset", "--job: %v", err)
		}
	}
	for _, j := range jobs {
		if only == "" || j.Rerun {
			ids = append(ids, j.ID)
		}
	}
	path := scheduleStatePath(ctx, stateDir, workdir, stderr)
	if path == "" {
		return badInput(stderr, "schedule reset", "%s is not in a git repository and no --state was given: there is no state to reset", workdir)
	}
	st, err := schedule.OpenStore(path, dryRun)
	if err != nil {
		return badInput(stderr, "schedule reset", "%v", err)
	}
	cleared, err := st.Reset(ids)
	if err != nil {
		fmt.Fprintf(stderr, "pilot schedule reset: %v\n", strings.TrimPrefix(err.Error(), "schedule: "))
		return exitFailed
	}
	if cleared == nil {
		cleared = []string{}
	}
	writeJSON(stdout, struct {
		State   string   `json:"state"`
		DryRun  bool     `json:"dry_run"`
		Cleared []string `json:"cleared"`
	}{path, dryRun, cleared})
	return exitOK
}
