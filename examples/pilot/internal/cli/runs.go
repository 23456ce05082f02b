package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/worktrees"
)

// runsNow is the clock of 'runs' (prune's ages, list's running durations);
// tests move it.
var runsNow = time.Now

// followInterval is how often 'runs logs -f' looks for more of the log and
// for the run's end.
const followInterval = 50 * time.Millisecond

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
	}
	fs := newFlagSet("runs", "[show ID | logs ID [-f] | prune --older-than D] [--run-dir DIR] [--json] [--reconcile]", stdout, stderr)
	runDir := runDirFlag(fs)
	asJSON := fs.Bool("json", false, "print the runs as a JSON array")
	reconcile := fs.Bool("reconcile", false, "first close out the runs whose pilot died (marked \"abandoned\"; what is done goes to stderr)")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	dir := resolveRunDir(*runDir)
	if *reconcile {
		rep, err := rundir.Reconcile(dir)
		printReconcile(stderr, rep)
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs: reconcile: %v\n", err)
		}
	}
	runs, err := loadRuns(dir, stderr)
	if err != nil {
		return badInput(stderr, "runs", "%v", err)
	}
	if *asJSON {
		out := make([]runSummary, 0, len(runs))
		for _, r := range runs {
			out = append(out, summarize(r))
		}
		writeJSON(stdout, out)
		return exitOK
	}
	if len(runs) == 0 {
		fmt.Fprintf(stdout, "no runs in %s\n", dir)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tPROVIDER\tMODE\tSTATUS\tCLASS\tDURATION\tSTARTED")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.rec.Provider, r.rec.Mode, statusText(r.rec),
			dash(string(r.rec.FailureClass)), durationText(r.rec), r.rec.StartedAt.Local().Format("2006-01-02 15:04:05"))
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

// runEntry is one run directory and its record.
type runEntry struct {
	id, dir string
	rec     pilot.Record
}

func (r runEntry) recordPath() string { return filepath.Join(r.dir, "record.json") }

// loadRuns reads the runs of the run directory dir, newest first. A
// directory whose record cannot be read is left out, with a note on
// stderr; one with no record.json (its pilot has not written it yet, or
// died first) is left out silently.
func loadRuns(dir string, stderr io.Writer) ([]runEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []runEntry
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		r := runEntry{id: e.Name(), dir: filepath.Join(dir, e.Name())}
		r.rec, err = pilot.ReadRecord(r.recordPath())
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs: skipped %s: %v\n", r.dir, err)
			continue
		}
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b runEntry) int {
		if c := b.rec.StartedAt.Compare(a.rec.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.id, a.id)
	})
	return runs, nil
}

// findRun finds the run named by arg: a run id in dir, a unique prefix of
// one, or the path of a run directory or its record.json.
func findRun(dir, arg string) (runEntry, error) {
	if strings.ContainsRune(arg, os.PathSeparator) || strings.ContainsRune(arg, '/') {
		d := arg
		if filepath.Base(d) == "record.json" {
			d = filepath.Dir(d)
		}
		r := runEntry{id: filepath.Base(d), dir: d}
		var err error
		r.rec, err = pilot.ReadRecord(r.recordPath())
		return r, err
	}
	var match []string
	if _, err := os.Stat(filepath.Join(dir, arg, "record.json")); err == nil {
		match = []string{arg}
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return runEntry{}, err
		}
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && strings.HasPrefix(e.Name(), arg) {
				match = append(match, e.Name())
			}
		}
	}
	switch {
	case len(match) == 0:
		return runEntry{}, fmt.Errorf("no run %q in %s (see pilot runs --run-dir %s)", arg, dir, dir)
	case len(match) > 1:
		return runEntry{}, fmt.Errorf("%q names %d runs in %s: give more of the run id", arg, len(match), dir)
	}
	r := runEntry{id: match[0], dir: filepath.Join(dir, match[0])}
	var err error
	r.rec, err = pilot.ReadRecord(r.recordPath())
	return r, err
}

// runSummary is one run in 'runs --json'.
type runSummary struct {
	RunID        string             `json:"run_id"`
	Provider     string             `json:"provider"`
	Mode         pilot.Mode         `json:"mode"`
	Label        string             `json:"label,omitempty"`
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

func summarize(r runEntry) runSummary {
	rec := r.rec
	s := runSummary{RunID: r.id, Provider: rec.Provider, Mode: rec.Mode, Label: rec.Label, Status: rec.Status,
		Verdict: rec.Verdict, FailureClass: rec.FailureClass, StartedAt: rec.StartedAt, EndedAt: rec.EndedAt}
	if rec.EndedAt != nil {
		ms := rec.EndedAt.Sub(rec.StartedAt).Milliseconds()
		s.DurationMS = &ms
	}
	if rec.Status == rundir.Running {
		alive, _ := rundir.Owner(ownerOf(rec))
		s.DispatcherAlive = &alive
	}
	s.Record = r.recordPath()
	return s
}

// statusText is a record's status, with its verdict when that says more,
// and for a running record whose pilot is gone, that.
func statusText(rec pilot.Record) string {
	s := rec.Status
	if rec.Verdict != "" && string(rec.Verdict) != s {
		s += "/" + string(rec.Verdict)
	}
	if rec.Status == rundir.Running {
		if alive, _ := rundir.Owner(ownerOf(rec)); !alive {
			s += " (pilot gone)"
		}
	}
	return s
}

// durationText is how long the run took, or has been running ("+").
func durationText(rec pilot.Record) string {
	if rec.EndedAt != nil {
		return fmtDuration(rec.EndedAt.Sub(rec.StartedAt))
	}
	if rec.Status == rundir.Running {
		return fmtDuration(runsNow().Sub(rec.StartedAt)) + "+"
	}
	return "-"
}

func fmtDuration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printReconcile says what rundir.Reconcile did.
func printReconcile(w io.Writer, rep rundir.Report) {
	if len(rep.Runs) == 0 {
		fmt.Fprintln(w, "pilot runs: reconcile: no run to close out")
		return
	}
	for _, r := range rep.Runs {
		fmt.Fprintf(w, "pilot runs: reconcile: %s marked %s: %s", r.RunID, rundir.Abandoned, r.Evidence)
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
	r, err := findRun(dir, rest[0])
	if err != nil {
		return badInput(stderr, "runs show", "%v", err)
	}
	if *asJSON {
		data, err := os.ReadFile(r.recordPath())
		if err != nil {
			return badInput(stderr, "runs show", "%v", err)
		}
		stdout.Write(data)
		return exitOK
	}
	rec := r.rec
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	line("run", r.id)
	line("label", rec.Label)
	line("provider", rec.Provider)
	line("runner", rec.Runner)
	line("model", rec.Model)
	line("mode", string(rec.Mode))
	line("workdir", rec.Workdir)
	line("task file", rec.TaskFile)
	status := rec.Status
	if rec.Status == rundir.Running {
		_, ev := rundir.Owner(ownerOf(rec))
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
	line("record", r.recordPath())
	line("stream log", filepath.Join(r.dir, "stream.log"))
	line("events log", filepath.Join(r.dir, "events.log"))
	if rec.RetryKey != "" || rec.Attempt > 0 {
		line("retry", fmt.Sprintf("key %s, attempt %d", dash(rec.RetryKey), rec.Attempt))
	}
	line("previous record", rec.PreviousRecord)
	line("resumed from", rec.ResumedFrom)
	line("resume fallback", rec.ResumeFallback)
	if entries, err := worktrees.List(filepath.Dir(r.dir)); err == nil {
		for _, e := range entries {
			if runWorktree(rec, r.id, e) {
				line("worktree", fmt.Sprintf("%s (branch %s, %s)", e.Path, e.Branch, e.State))
			}
		}
	}
	tw.Flush()
	return exitOK
}

// runWorktree reports whether e is the worktree of the run id with record
// rec: the inventory names the run, or the run's workdir is the worktree
// (the inventory learns the run id only when the run is over).
func runWorktree(rec pilot.Record, id string, e worktrees.Entry) bool {
	return e.RunID == id || (rec.Workdir != "" && filepath.Clean(e.Path) == filepath.Clean(rec.Workdir))
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
	r, err := findRun(resolveRunDir(*runDir), rest[0])
	if err != nil {
		return badInput(stderr, "runs logs", "%v", err)
	}
	log := filepath.Join(r.dir, "stream.log")
	if !*follow {
		f, err := os.Open(log)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "pilot runs logs: %s has no stream.log (yet)\n", r.id)
			return exitOK
		}
		if err != nil {
			return badInput(stderr, "runs logs", "%v", err)
		}
		defer f.Close()
		if _, err := io.Copy(stdout, f); err != nil {
			fmt.Fprintf(stderr, "pilot runs logs: %v\n", err)
			return exitFailed
		}
		return exitOK
	}
	return followLog(ctx, r, log, stdout, stderr)
}

// followLog copies the log to stdout as it grows, until the run's record
// says it is over (then all of the log is out: pilot closes the log before
// its final record), its pilot is gone, or ctx is done.
func followLog(ctx context.Context, r runEntry, log string, stdout, stderr io.Writer) int {
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		rec, err := pilot.ReadRecord(r.recordPath())
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs logs: %v\n", err)
			return exitFailed
		}
		over := rec.Status != rundir.Running
		alive, evidence := true, ""
		if !over {
			alive, evidence = rundir.Owner(ownerOf(rec))
		}
		if f == nil {
			f, _ = os.Open(log) // not there until the worker has started
		}
		if f != nil {
			if _, err := io.Copy(stdout, f); err != nil {
				fmt.Fprintf(stderr, "pilot runs logs: %v\n", err)
				return exitFailed
			}
		}
		switch {
		case over:
			return exitOK
		case !alive:
			fmt.Fprintf(stderr, "pilot runs logs: %s will not end: its pilot is gone (%s); pilot runs --reconcile marks it %s\n",
				r.id, evidence, rundir.Abandoned)
			return exitFailed
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
	}
}

// runsPrune removes the run directories of runs that ended long enough
// ago, keeping live runs and runs whose worktree holds work.
func runsPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs prune", "--older-than D [--keep-failed] [--dry-run] [--run-dir DIR]", stdout, stderr)
	runDir := runDirFlag(fs)
	olderThan := fs.String("older-than", "", "remove runs that ended longer ago than this `age`: a Go duration (72h) or days (7d) (required)")
	keepFailed := fs.Bool("keep-failed", false, "keep runs whose verdict is not completed")
	dryRun := fs.Bool("dry-run", false, "say what would be removed, and change nothing")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if *olderThan == "" {
		return badInput(stderr, "runs prune", "--older-than is required (e.g. --older-than 7d)")
	}
	age, err := parseAge(*olderThan)
	if err != nil {
		return badInput(stderr, "runs prune", "--older-than: %v", err)
	}
	dir := resolveRunDir(*runDir)
	if !*dryRun {
		// A running record whose pilot is gone becomes abandoned, and
		// prunable once it is old enough.
		rep, err := rundir.Reconcile(dir)
		if len(rep.Runs) > 0 {
			printReconcile(stderr, rep)
		}
		if err != nil {
			fmt.Fprintf(stderr, "pilot runs prune: reconcile: %v\n", err)
		}
	}
	runs, err := loadRuns(dir, stderr)
	if err != nil {
		return badInput(stderr, "runs prune", "%v", err)
	}
	wts, err := worktrees.List(dir)
	if err != nil {
		// Without the inventory no run can be cleared of holding work.
		fmt.Fprintf(stderr, "pilot runs prune: %v: nothing removed\n", err)
		return exitFailed
	}
	now := runsNow()
	verb := "removed"
	if *dryRun {
		verb = "would remove"
	}
	removed, kept, code := 0, 0, exitOK
	slices.Reverse(runs) // oldest first
	for _, r := range runs {
		reason := keepReason(ctx, r, wts, now, age, *keepFailed)
		if reason != "" {
			fmt.Fprintf(stdout, "kept %s: %s\n", r.id, reason)
			kept++
			continue
		}
		if !*dryRun {
			if err := os.RemoveAll(r.dir); err != nil {
				fmt.Fprintf(stderr, "pilot runs prune: %v\n", err)
				code = exitFailed
				continue
			}
		}
		fmt.Fprintf(stdout, "%s %s (%s, ended %s ago)\n", verb, r.id, r.rec.Status, fmtDuration(now.Sub(*r.rec.EndedAt)))
		removed++
	}
	fmt.Fprintf(stdout, "%s %d run(s), kept %d\n", verb, removed, kept)
	return code
}

// keepReason says why prune keeps run r, or "" to remove it.
func keepReason(ctx context.Context, r runEntry, wts []worktrees.Entry, now time.Time, age time.Duration, keepFailed bool) string {
	rec := r.rec
	if rec.Status == rundir.Running {
		if alive, ev := rundir.Owner(ownerOf(rec)); !alive {
			return "its record still says running, but " + ev + "; pilot runs --reconcile marks it " + rundir.Abandoned
		}
		return "still running"
	}
	if rec.EndedAt == nil {
		return "its record has no ended_at"
	}
	if ago := now.Sub(*rec.EndedAt); ago <= age {
		return fmt.Sprintf("ended %s ago, not longer than %s", fmtDuration(ago), fmtDuration(age))
	}
	if keepFailed && rec.Verdict != pilot.Completed {
		v := string(rec.Verdict)
		if v == "" {
			v = rec.Status
		}
		return "--keep-failed, and its verdict is " + v
	}
	var matched bool
	for _, e := range wts {
		if !runWorktree(rec, r.id, e) {
			continue
		}
		matched = true
		if e.State == "removed" {
			continue
		}
		if why := unmerged(ctx, e.Repo, e.Path, e.Branch); why != "" {
			return why
		}
	}
	// A worktree of pilot's that the inventory does not list: in this run
	// dir's .worktrees (where pilot made them before), or in a
	// <repo>.pilot-worktrees directory beside a repository.
	if !matched && rec.Workdir != "" {
		parent := filepath.Dir(filepath.Clean(rec.Workdir))
		if parent == filepath.Join(filepath.Dir(r.dir), ".worktrees") || strings.HasSuffix(parent, ".pilot-worktrees") {
			if _, err := os.Stat(rec.Workdir); err == nil {
				return unmerged(ctx, "", rec.Workdir, "")
			}
		}
	}
	return ""
}

// unmerged says how the worktree at path (of repository repo, on branch;
// either may be "" to be found from path) holds work that is nowhere else:
// uncommitted changes, or commits of its branch that no other branch,
// remote-tracking branch or tag holds. "" means it holds none.
func unmerged(ctx context.Context, repo, path, branch string) string {
	if _, err := os.Stat(path); err == nil {
		out, err := git(ctx, path, "status", "--porcelain", "--untracked-files=all")
		if err != nil {
			return fmt.Sprintf("its worktree %s cannot be checked: %v", path, err)
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Sprintf("its worktree %s has uncommitted changes", path)
		}
		if branch == "" {
			out, _ := git(ctx, path, "symbolic-ref", "-q", "--short", "HEAD")
			branch = strings.TrimSpace(out)
		}
		if repo == "" {
			repo = path // a worktree sees its repository's refs
		}
	}
	if branch == "" || repo == "" {
		return ""
	}
	if _, err := os.Stat(repo); err != nil {
		return "" // the repository, and its branch, are gone
	}
	ref := "refs/heads/" + branch
	if _, err := git(ctx, repo, "rev-parse", "-q", "--verify", ref+"^{commit}"); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "" // no such branch
		}
		return fmt.Sprintf("its branch %s cannot be checked: %v", branch, err)
	}
	out, err := git(ctx, repo, "rev-list", "--count", ref, "--not", "--exclude="+branch, "--branches", "--remotes", "--tags")
	if err != nil {
		return fmt.Sprintf("its branch %s cannot be checked: %v", branch, err)
	}
	if n := strings.TrimSpace(out); n != "0" {
		return fmt.Sprintf("its branch %s (worktree %s) has %s commit(s) on no other branch", branch, path, n)
	}
	return ""
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return string(out), fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return string(out), fmt.Errorf("git %s: %w", args[0], err)
	}
	return string(out), nil
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

// ownerOf is what rundir reads of a pilot.Record to tell whether its pilot
// is alive.
func ownerOf(r pilot.Record) rundir.Record {
	return rundir.Record{RunID: r.RunID, Status: r.Status, Pid: r.Pid, Pgid: r.Pgid, StartedAt: r.StartedAt, DispatcherPid: r.Provenance.Pid}
}
