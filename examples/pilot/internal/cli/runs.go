package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/runs"
	"github.com/pilotworkers/pilot/size"
	"github.com/pilotworkers/pilot/worktrees"
)

// runsNow is the clock of 'runs' (prune's ages, list's running durations);
// tests move it.
var runsNow = time.Now

// cmdRuns lists the run directories' runs, or shows, follows or prunes
// them.
func cmdRuns(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "show":
			return runsShow(args[1:], stdout, stderr)
		case "logs":
			return runsLogs(ctx, args[1:], stdout, stderr)
		case "prune":
			return runsPrune(ctx, args[1:], stdout, stderr)
		}
		if code, ok := unknownSubcommand(stderr, "runs", args[0], "show", "logs", "prune"); ok {
			return code
		}
	}
	fs := newFlagSet("runs", "[show ID|last | logs ID|last [-f] | prune --older-than D | --max-size SIZE] [--provider P] [--failed] [--since AGE] [--run-dir DIR] [--json] [--reconcile]", stdout, stderr)
	runDir := runDirFlag(fs)
	asJSON := fs.Bool("json", false, "print the runs as a JSON array")
	reconcile := fs.Bool("reconcile", false, "first close out the runs whose pilot died (marked \"abandoned\"; what is done goes to stderr)")
	provider := fs.String("provider", "", "only the runs of this `provider`")
	failed := fs.Bool("failed", false, "only the runs that did not succeed (running ones aside)")
	since := fs.String("since", "", "only the runs started within this `age`: a Go duration (2h) or days (7d)")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	var within time.Duration
	if *since != "" {
		var err error
		if within, err = parseAge(*since); err != nil {
			return badInput(stderr, "runs", "--since: %v", err)
		}
	}
	dir := resolveRunDir(*runDir)
	if *reconcile {
		closed, err := runs.Reconcile(dir)
		printReconcile(stderr, closed)
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs: reconcile: %v\n", err)
		}
	}
	list, err := listRuns("runs", dir, stderr)
	if err != nil {
		return badInput(stderr, "runs", "%v", err)
	}
	now := runsNow()
	list = slices.DeleteFunc(list, func(r runs.Run) bool {
		rec := r.Record
		return *provider != "" && rec.Provider != *provider ||
			*failed && (rec.Status == runs.StatusRunning || rec.Verdict.Success()) ||
			*since != "" && now.Sub(rec.StartedAt) > within
	})
	if *asJSON {
		out := make([]runSummary, 0, len(list))
		for _, r := range list {
			out = append(out, summarize(r))
		}
		writeJSON(stdout, out)
		return exitOK
	}
	if len(list) == 0 {
		if *provider != "" || *failed || *since != "" {
			fmt.Fprintf(stdout, "no runs in %s match\n", dir)
		} else {
			fmt.Fprintf(stdout, "no runs in %s\n", dir)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tLABEL\tPROVIDER\tMODE\tSTATUS\tCLASS\tWORKDIR\tDURATION\tAGE")
	for _, r := range list {
		rec := r.Record
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s ago\n", r.ID, dash(rec.Label), rec.Provider, rec.Mode, statusText(r),
			dash(string(rec.FailureClass)), dash(homeShort(rec.Workdir)), durationText(rec), runs.Duration(now.Sub(rec.StartedAt)))
	}
	tw.Flush()
	return exitOK
}

func runDirFlag(fs *flagSet) *string {
	return fs.String("run-dir", "", "`directory` of the run records (default "+pilot.DefaultRunDir()+")")
}

func resolveRunDir(flagValue string) string {
	if flagValue == "" {
		flagValue = pilot.DefaultRunDir()
	}
	if abs, err := filepath.Abs(flagValue); err == nil {
		return abs
	}
	return flagValue
}

// parseArgs parses fs's flags wherever they are among args ("logs ID -f"
// as well as "logs -f ID") and returns the other arguments; code is -1 to
// go on, or the exit status.
func parseArgs(fs *flagSet, args []string) (rest []string, code int) {
	if code := fs.parseAny(args); code >= 0 {
		return nil, code
	}
	for left := fs.Args(); len(left) > 0; left = fs.Args() {
		if left[0] == "--" {
			return append(rest, left[1:]...), -1
		}
		rest = append(rest, left[0])
		if code := fs.parseAny(left[1:]); code >= 0 {
			return nil, code
		}
	}
	return rest, -1
}

// listRuns is runs.List with a note on stderr for each run whose record
// cannot be read (it is left out); err is what else went wrong.
func listRuns(cmd, dir string, stderr io.Writer) ([]runs.Run, error) {
	list, err := runs.List(dir)
	return list, skipped(cmd, err, stderr)
}

// skipped prints a note for each *runs.RecordError joined in err, and
// returns the other errors.
func skipped(cmd string, err error, stderr io.Writer) error {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var rest []error
	for _, e := range errs {
		var re *runs.RecordError
		if errors.As(e, &re) {
			fmt.Fprintf(stderr, "pilot %s: skipped %s: %v\n", cmd, re.Dir, re.Err)
			continue
		}
		rest = append(rest, e)
	}
	return errors.Join(rest...)
}

// runSummary is one run in 'runs --json'.
type runSummary struct {
	RunID        string             `json:"run_id"`
	Provider     string             `json:"provider"`
	Mode         pilot.Mode         `json:"mode"`
	Label        string             `json:"label,omitempty"`
	Workdir      string             `json:"workdir,omitempty"`
	Status       string             `json:"status"`
	Verdict      pilot.Outcome      `json:"verdict,omitempty"`
	FailureClass pilot.FailureClass `json:"failure_class,omitempty"`
	// DurationMS is null while the run goes on.
	DurationMS *int64     `json:"duration_ms"`
	StartedAt  time.Time  `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	// DispatcherAlive is set for a running run: whether its pilot still
	// runs (false: the run is abandoned, and --reconcile marks it).
	DispatcherAlive *bool  `json:"dispatcher_alive,omitempty"`
	Record          string `json:"record"`
}

func summarize(r runs.Run) runSummary {
	rec := r.Record
	s := runSummary{RunID: r.ID, Provider: rec.Provider, Mode: rec.Mode, Label: rec.Label, Workdir: rec.Workdir, Status: rec.Status,
		Verdict: rec.Verdict, FailureClass: rec.FailureClass, StartedAt: rec.StartedAt, EndedAt: rec.EndedAt}
	if rec.EndedAt != nil {
		ms := rec.EndedAt.Sub(rec.StartedAt).Milliseconds()
		s.DurationMS = &ms
	}
	if rec.Status == runs.StatusRunning {
		alive, _ := r.Owner()
		s.DispatcherAlive = &alive
	}
	s.Record = r.RecordPath()
	return s
}

// statusText is a record's status, with its verdict when that says more,
// and for a running record whose pilot is gone, that.
func statusText(r runs.Run) string {
	rec := r.Record
	s := rec.Status
	if rec.Verdict != "" && string(rec.Verdict) != s {
		s += "/" + string(rec.Verdict)
	}
	if rec.Status == runs.StatusRunning {
		if alive, _ := r.Owner(); !alive {
			s += " (pilot gone)"
		}
	}
	return s
}

// durationText is how long the run took, or has been running ("+").
func durationText(rec pilot.Record) string {
	if rec.EndedAt != nil {
		return runs.Duration(rec.EndedAt.Sub(rec.StartedAt))
	}
	if rec.Status == runs.StatusRunning {
		return runs.Duration(runsNow().Sub(rec.StartedAt)) + "+"
	}
	return "-"
}

// homeShort is path with the user's home directory written ~.
func homeShort(path string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return path
	}
	if rest, ok := strings.CutPrefix(path, home); ok && (rest == "" || rest[0] == filepath.Separator) {
		return "~" + rest
	}
	return path
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printReconcile says what runs.Reconcile did.
func printReconcile(w io.Writer, closed []runs.Closed) {
	if len(closed) == 0 {
		fmt.Fprintln(w, "pilot runs: reconcile: no run to close out")
		return
	}
	for _, r := range closed {
		fmt.Fprintf(w, "pilot runs: reconcile: %s marked %s: %s", r.RunID, runs.StatusAbandoned, r.Evidence)
		if len(r.Killed) > 0 {
			fmt.Fprintf(w, "; killed %d process(es) of the run %v", len(r.Killed), r.Killed)
		}
		if len(r.Survivors) > 0 {
			fmt.Fprintf(w, "; still alive after SIGKILL: %v", r.Survivors)
		}
		if len(r.Removed) > 0 {
			names := make([]string, len(r.Removed))
			for i, p := range r.Removed {
				names[i] = filepath.Base(p)
			}
			fmt.Fprintf(w, "; removed %d temporary file(s) %v", len(r.Removed), names)
		}
		if r.Note != "" {
			fmt.Fprintf(w, "; %s", r.Note)
		}
		fmt.Fprintln(w)
	}
}

// runsShow prints a readable summary of one run.
func runsShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs show", "ID [--run-dir DIR] [--json]", stdout, stderr)
	runDir := runDirFlag(fs)
	asJSON := fs.Bool("json", false, "print the run's record.json as it is")
	rest, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return badInput(stderr, "runs show", "want one run ID, got %d arguments", len(rest))
	}
	dir := resolveRunDir(*runDir)
	r, err := runs.Find(dir, rest[0])
	if err != nil {
		return badInput(stderr, "runs show", "%v", err)
	}
	if *asJSON {
		data, err := os.ReadFile(r.RecordPath())
		if err != nil {
			return badInput(stderr, "runs show", "%v", err)
		}
		stdout.Write(data)
		return exitOK
	}
	rec := r.Record
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	line("run", r.ID)
	line("label", rec.Label)
	line("provider", rec.Provider)
	line("runner", rec.Runner)
	line("model", rec.Model)
	line("mode", string(rec.Mode))
	line("workdir", rec.Workdir)
	line("task file", rec.TaskFile)
	status := rec.Status
	if rec.Status == runs.StatusRunning {
		_, ev := r.Owner()
		status += " (" + ev + ")"
	}
	line("status", status)
	line("verdict", string(rec.Verdict))
	class := string(rec.FailureClass)
	if class != "" && rec.FailureSource != "" {
		class += " (from " + rec.FailureSource + ")"
	}
	line("failure class", class)
	if rec.EvidenceSource != "" || rec.EvidenceExcerpt != "" {
		line("evidence", strings.TrimPrefix(rec.EvidenceSource+": "+rec.EvidenceExcerpt, ": "))
	}
	line("evidence note", rec.EvidenceNote)
	if rec.TerminationSignal != "" {
		t := rec.TerminationSignal
		if rec.TerminationInitiator != "" {
			t += ", sent by " + rec.TerminationInitiator
		}
		if rec.TerminationReason != "" {
			t += " (" + string(rec.TerminationReason) + ")"
		}
		line("termination", t)
	}
	switch {
	case rec.Signal != "":
		line("exit", "killed by "+rec.Signal)
	case rec.ExitCode != nil:
		line("exit", "status "+strconv.Itoa(*rec.ExitCode))
	}
	line("pilot error", rec.PilotError)
	line("started", rec.StartedAt.Local().Format(time.RFC3339))
	if rec.EndedAt != nil {
		line("ended", rec.EndedAt.Local().Format(time.RFC3339))
	}
	line("duration", durationText(rec))
	if s := rec.SessionRecord; s != nil && s.SessionPhase != "" {
		p := string(s.SessionPhase)
		if s.SessionPhaseReason != "" {
			p += " (" + s.SessionPhaseReason + ")"
		}
		line("session phase", p)
	}
	line("session id", rec.SessionID)
	line("resume", rec.Resume)
	if rec.Provenance.Pid > 0 {
		line("pilot", fmt.Sprintf("pid %d, %s", rec.Provenance.Pid, rec.Provenance.SourcePath))
	}
	if rec.Pid > 0 {
		line("worker", fmt.Sprintf("pid %d, process group %d", rec.Pid, rec.Pgid))
	}
	line("record", r.RecordPath())
	line("stream log", r.StreamLog())
	line("events log", r.EventsLog())
	if rec.RetryKey != "" || rec.Attempt > 0 {
		line("retry", fmt.Sprintf("key %s, attempt %d", dash(rec.RetryKey), rec.Attempt))
	}
	line("previous record", rec.PreviousRecord)
	line("resumed from", rec.ResumedFrom)
	line("resume fallback", rec.ResumeFallback)
	if entries, err := worktrees.List(filepath.Dir(r.Dir)); err == nil {
		for _, e := range entries {
			if r.OwnsWorktree(e) {
				line("worktree", fmt.Sprintf("%s (branch %s, %s)", e.Path, e.Branch, e.State))
			}
		}
	}
	tw.Flush()
	return exitOK
}

// runsLogs prints a run's stream.log, and with -f follows it until the run
// ends.
func runsLogs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs logs", "ID [-f] [--run-dir DIR]", stdout, stderr)
	runDir := runDirFlag(fs)
	follow := fs.Bool("f", false, "follow the log until the run ends")
	rest, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return badInput(stderr, "runs logs", "want one run ID, got %d arguments", len(rest))
	}
	r, err := runs.Find(resolveRunDir(*runDir), rest[0])
	if err != nil {
		return badInput(stderr, "runs logs", "%v", err)
	}
	err = runs.Logs(ctx, stdout, r, *follow)
	var open *iofs.PathError
	var gone *runs.GoneError
	switch {
	case err == nil:
		return exitOK
	case !*follow && errors.Is(err, iofs.ErrNotExist):
		fmt.Fprintf(stderr, "pilot runs logs: %s has no stream.log (yet)\n", r.ID)
		return exitOK
	case !*follow && errors.As(err, &open) && open.Op == "open":
		return badInput(stderr, "runs logs", "%v", err)
	case errors.As(err, &gone):
		fmt.Fprintf(stderr, "pilot runs logs: %s will not end: its pilot is gone (%s); pilot runs --reconcile marks it %s\n",
			r.ID, gone.Evidence, runs.StatusAbandoned)
		return exitFailed
	}
	fmt.Fprintf(stderr, "pilot runs logs: %v\n", err)
	return exitFailed
}

// runsPrune removes the run directories of runs that ended long enough
// ago, or the oldest until the rest fit in --max-size, keeping live runs
// and runs whose worktree holds work.
func runsPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs prune", "--older-than D | --max-size SIZE [--keep-failed] [--dry-run] [--run-dir DIR]", stdout, stderr)
	runDir := runDirFlag(fs)
	olderThan := fs.String("older-than", "", "remove runs that ended longer ago than this `age`: a Go duration (72h) or days (7d)")
	maxSize := fs.String("max-size", "", "remove the oldest runs until the run directories take at most this `size` (5GiB, 500MB, bytes); with --older-than, only runs older than that")
	keepFailed := fs.Bool("keep-failed", false, "keep runs whose verdict is not completed")
	dryRun := fs.Bool("dry-run", false, "say what would be removed, and change nothing")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if *olderThan == "" && *maxSize == "" {
		return badInput(stderr, "runs prune", "give --older-than (e.g. --older-than 7d), --max-size (e.g. --max-size 5GiB), or both")
	}
	var opt runs.PruneOptions
	if *olderThan != "" {
		age, err := parseAge(*olderThan)
		if err != nil {
			return badInput(stderr, "runs prune", "--older-than: %v", err)
		}
		opt.OlderThan = age
	}
	if *maxSize != "" {
		b, err := size.Parse(*maxSize)
		n := int64(b)
		if err == nil && n <= 0 {
			err = fmt.Errorf("%q: want a size above 0 (to remove every old run, use --older-than alone)", *maxSize)
		}
		if err != nil {
			return badInput(stderr, "runs prune", "--max-size: %v", err)
		}
		opt.MaxSize = n
	}
	dir := resolveRunDir(*runDir)
	if !*dryRun {
		// A running record whose pilot is gone becomes abandoned, and
		// prunable once it is old enough.
		closed, err := runs.Reconcile(dir)
		if len(closed) > 0 {
			printReconcile(stderr, closed)
		}
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs prune: reconcile: %v\n", err)
		}
	}
	opt.KeepFailed, opt.DryRun, opt.Now = *keepFailed, *dryRun, runsNow()
	pruned, err := runs.Prune(ctx, dir, opt)
	if err := skipped("runs prune", err, stderr); err != nil {
		fmt.Fprintf(stderr, "pilot runs prune: %v\n", err)
		return exitFailed
	}
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	removed, kept, code := 0, 0, exitOK
	var removedBytes, keptBytes int64
	gone := map[string]bool{}
	for _, p := range pruned {
		switch {
		case p.Kept != "":
			fmt.Fprintf(stdout, "kept %s: %s\n", p.Run.ID, p.Kept)
			kept++
			keptBytes += p.Bytes
		case p.Err != nil:
			fmt.Fprintf(stderr, "pilot runs prune: %v\n", p.Err)
			code = exitFailed
		default:
			rec := p.Run.Record
			fmt.Fprintf(stdout, "%s %s (%s, ended %s ago, %s)\n", verb, p.Run.ID, rec.Status, runs.Duration(opt.Now.Sub(*rec.EndedAt)), size.Bytes(p.Bytes).Approx())
			gone[p.Run.ID] = true
			removed++
			removedBytes += p.Bytes
		}
	}
	// A group's log (pilot serve's timeline) goes with the last of its runs.
	groups, err := grouplog.Prune(dir, gone, *dryRun)
	for _, id := range groups {
		fmt.Fprintf(stdout, "%s group log %s: its runs are gone\n", verb, id)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pilot runs prune: group logs: %v\n", err)
	}
	fmt.Fprintf(stdout, "%s %d run(s) (%s), kept %d (%s)\n", verb, removed, size.Bytes(removedBytes).Approx(), kept, size.Bytes(keptBytes).Approx())
	if opt.MaxSize > 0 && keptBytes > opt.MaxSize {
		fmt.Fprintf(stderr, "pilot runs prune: the runs kept take %s, more than --max-size %s: each is kept for the reason given\n",
			size.Bytes(keptBytes).Approx(), size.Bytes(opt.MaxSize).Approx())
	}
	return code
}

// parseAge reads a Go duration ("72h") or a number of days, with an
// optional Go duration after it ("7d", "1.5d", "1d12h").
func parseAge(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return d, nil
	}
	days, rest, ok := strings.Cut(s, "d")
	n, err := strconv.ParseFloat(days, 64)
	if !ok || err != nil || n < 0 || days == "" || strings.ContainsAny(days, "+-eEinfINFxX_") {
		return 0, fmt.Errorf("want a duration like 72h or 7d, got %q", s)
	}
	d := time.Duration(n * float64(24*time.Hour))
	if rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil || r < 0 {
			return 0, fmt.Errorf("want a duration like 72h or 7d, got %q", s)
		}
		d += r
	}
	return d, nil
}
