package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot/retry"
)

// retrySleep is the retry policy's clock; nil means real timers. Tests set
// it.
var retrySleep func(ctx context.Context, d time.Duration) error

// retryFlags are --max-failures and --state, shared by dispatch, run and
// fanout.
type retryFlags struct {
	maxFailures int
	stateDir    string
}

func addRetryFlags(fs *flagSet, rf *retryFlags) {
	rf.maxFailures = 1
	fs.Func("max-failures", "block a job after `N` consecutive failures, retrying retryable ones until then (default 1: one attempt, no retry)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive number of failures, got %q", s)
		}
		rf.maxFailures = n
		return nil
	})
	fs.StringVar(&rf.stateDir, "state", "", "`directory` of the state file ("+retry.StateFileName+") that keeps failure budgets and blocked jobs across runs (default: .git/pilot of the workdir's repository, when --max-failures is above 1)")
}

// policy returns the retry policy the flags ask for, or nil when they ask
// for none (one attempt and no state: pilot-workers' behaviour), and a
// function that closes the state store. The store holds no lock between
// its changes: pilots running at once share one state directory.
func (rf retryFlags) policy(ctx context.Context, workdir string, stderr io.Writer, cmd string) (*retry.Policy, func(), error) {
	if rf.maxFailures == 1 && rf.stateDir == "" {
		return nil, func() {}, nil
	}
	path := ""
	if rf.stateDir != "" {
		path = filepath.Join(rf.stateDir, retry.StateFileName)
	} else if p, err := retry.DefaultStorePath(ctx, workdir); err == nil {
		path = p
	} else {
		fmt.Fprintf(stderr, "pilot %s: note: %s is not in a git repository; failure budgets last for this run only (give --state DIR to keep them)\n", cmd, workdir)
	}
	p := &retry.Policy{MaxFailures: rf.maxFailures, Sleep: retrySleep}
	if path == "" {
		return p, func() {}, nil
	}
	s, err := retry.OpenStore(path)
	if err != nil {
		return nil, nil, err
	}
	p.State = s
	return p, func() { s.Close() }, nil
}

// cmdState shows the state file, and clears a group's blocked jobs.
func cmdState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("state", "(--state DIR | --workdir D) [--clear-blocked GROUP [--dry-run]]", stdout, stderr)
	var stateDir, workdir, group string
	var dryRun bool
	fs.StringVar(&stateDir, "state", "", "`directory` of the state file")
	fs.StringVar(&workdir, "workdir", "", "a `directory` in the repository whose .git/pilot state to use (when --state is not given)")
	fs.StringVar(&group, "clear-blocked", "", "unblock the jobs of `group` and reset their failure budgets and counters")
	fs.BoolVar(&dryRun, "dry-run", false, "say what --clear-blocked would clear, and change nothing")
	asJSON := fs.Bool("json", false, "print JSON on a terminal too (elsewhere it always is)")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	path := ""
	switch {
	case stateDir != "":
		path = filepath.Join(stateDir, retry.StateFileName)
	case workdir != "":
		p, err := retry.DefaultStorePath(ctx, workdir)
		if err != nil {
			return badInput(stderr, "state", "%v", err)
		}
		path = p
	default:
		return badInput(stderr, "state", "--state or --workdir is required (see pilot state --help)")
	}
	if dryRun && group == "" {
		return badInput(stderr, "state", "--dry-run goes with --clear-blocked")
	}
	open := retry.OpenStore
	if dryRun || group == "" {
		// Reading, or a dry run: never create, lock or change the file.
		open = retry.OpenStoreDryRun
	}
	s, err := open(path)
	if err != nil {
		return badInput(stderr, "state", "%v", err)
	}
	defer s.Close()
	if group != "" {
		groups := map[string]bool{}
		for _, n := range s.Tasks() {
			groups[s.Task(n).Group] = true
		}
		if !groups[group] {
			known := slices.Sorted(maps.Keys(groups))
			if len(known) == 0 {
				return badInput(stderr, "state", "--clear-blocked: no group %q: the state file %s holds no task", group, s.Path())
			}
			return badInput(stderr, "state", "--clear-blocked: no group %q in %s (its groups: %s)", group, s.Path(), strings.Join(known, ", "))
		}
		cleared, err := s.ClearBlocked(group)
		if err != nil {
			return badInput(stderr, "state", "%v", err)
		}
		if cleared == nil {
			cleared = []string{}
		}
		writeJSON(stdout, map[string]any{"state": s.Path(), "group": group, "cleared": cleared, "dry_run": dryRun})
		return exitOK
	}
	tasks := map[string]retry.TaskState{}
	for _, n := range s.Tasks() {
		tasks[n] = s.Task(n)
	}
	if forPerson(stdout, *asJSON) {
		fmt.Fprintf(stdout, "state %s: %d task(s)\n", s.Path(), len(tasks))
		var rows [][]string
		for _, n := range slices.Sorted(maps.Keys(tasks)) {
			t := tasks[n]
			rows = append(rows, []string{n, t.Group, counts(t.RecoveryFailures), string(t.LastFailureClass), t.Blocked, t.UpdatedAt.Local().Format("2006-01-02 15:04")})
		}
		if len(rows) > 0 {
			table(stdout, []string{"TASK", "GROUP", "FAILURES", "LAST CLASS", "BLOCKED", "UPDATED"}, rows)
		}
		return exitOK
	}
	writeJSON(stdout, map[string]any{"state": s.Path(), "tasks": tasks})
	return exitOK
}
