// Command taskloop drives a group of agent tasks to completion, as the
// seed's agent-task dispatcher does: each task of agent-task/<group>/
// through worker, selfcheck and review (and again after a follow-up plan)
// until its review passes and it is archived, or it is blocked.
//
//	taskloop [--task-group G] [--retry-blocked] [--dry-run] [flags]
//	taskloop demo [--dir DIR]
//
// It exits 0 when every task is complete (or, with --dry-run, when every
// task is ready), 2 when a task is blocked or waits on one, 3 when the
// group is not over (another live task loop owns a task of it, which is
// reported external-active once the others are done, or the run was
// interrupted), and 1 when it cannot run (bad flags, unreadable state).
// Several task loops may run one group at once: each task runs in one of
// them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

// Exit codes.
const (
	exitComplete    = 0
	exitError       = 1
	exitBlocked     = 2
	exitNonTerminal = 3
)

func main() {
	// The demo's workers: this binary, re-executed as pilottest's fake
	// agent.
	pilottest.ServeFakeAgent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are what one run of the loop needs, from flags or the demo.
type options struct {
	workspace, group              string
	retryBlocked, dryRun          bool
	stateDir, runDir              string
	maxParallel                   int
	timeout, idleTimeout          time.Duration
	contract, asJSON, keepRecords bool
	seed                          taskfile.Seed
	registry                      *pilot.Registry
	grace                         time.Duration
	progress                      io.Writer // nil: none
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "demo" {
		return cmdDemo(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("taskloop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: taskloop [flags]\n       taskloop demo [--dir DIR]\n\n")
		fs.PrintDefaults()
	}
	var o options
	fs.StringVar(&o.workspace, "workspace", ".", "the repository `directory` holding agent-task/")
	fs.StringVar(&o.group, "task-group", "", "drive only the tasks of `group` (agent-task/<group>/); default every group")
	fs.BoolVar(&o.retryBlocked, "retry-blocked", false, "unblock the tasks of --task-group (or every group) and reset their budgets and counters first")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would run, and write nothing")
	fs.StringVar(&o.stateDir, "state", "", "keep the loop's state in `directory` (default .git/pilot/taskloop/<group> of the repository)")
	fs.StringVar(&o.runDir, "run-dir", "", "pilot's run records go in `directory` (default "+pilot.DefaultRunDir()+")")
	fs.IntVar(&o.maxParallel, "max-parallel", 0, "at most `n` tasks at once (0: every ready task)")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound each stage attempt (0: the Dispatcher's default)")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 0, "end a stage attempt silent this long (0: the Dispatcher's default)")
	fs.BoolVar(&o.contract, "work-log-contract", false, "make workers fill the seed's work-log block (checkpoints, unexpected issues, final report) and check it")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON on stdout")
	fs.BoolVar(&o.keepRecords, "keep-records", false, "keep a completed task's run records (by default they are removed; its work log keeps the story)")
	seedFile := fs.String("seed", "", "read the task files' vocabulary, prompts and routes from `file` (seed.json's shape)")
	routes := fs.String("routes", "", "read the routes of grades to providers from `file` ({\"routes\": [...]})")
	providers := fs.String("providers-file", "", "pilot's providers `file` (default $PILOT_PROVIDERS_FILE, or ~/.config/pilot/providers.json)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitComplete
		}
		return exitError
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "taskloop: unexpected argument %q (flags only; see --help)\n", fs.Arg(0))
		return exitError
	}
	o.seed = taskfile.DefaultSeed()
	var err error
	if *seedFile != "" {
		if o.seed, err = taskfile.LoadSeed(*seedFile); err != nil {
			return fail(stderr, "--seed: %v", err)
		}
	}
	if *routes != "" {
		if o.seed, err = o.seed.LoadRoutes(*routes); err != nil {
			return fail(stderr, "--routes: %v", err)
		}
	}
	path := *providers
	if path == "" {
		path = os.Getenv("PILOT_PROVIDERS_FILE")
	}
	if o.registry, err = config.LoadRegistry(path); err != nil {
		return fail(stderr, "providers: %v", err)
	}
	o.progress = stderr
	return execute(ctx, o, stdout, stderr)
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "taskloop: "+format+"\n", args...)
	return exitError
}

// execute runs the loop (or its plan) as o says and prints the report.
func execute(ctx context.Context, o options, stdout, stderr io.Writer) int {
	ws, err := filepath.Abs(o.workspace)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if o.stateDir == "" {
		if o.stateDir, err = loop.DefaultStateDir(ctx, ws, o.group); err != nil {
			return fail(stderr, "state directory: %v (give one with --state)", err)
		}
	}
	st, err := loop.OpenState(o.stateDir, o.dryRun)
	if err != nil {
		return fail(stderr, "%v", err)
	}
	defer st.Close()
	if o.retryBlocked {
		if o.dryRun {
			fmt.Fprintln(stderr, "taskloop: --dry-run: the blocked tasks stay blocked (--retry-blocked would clear them)")
		} else {
			cleared, err := st.ClearBlocked(o.group)
			if err != nil {
				return fail(stderr, "--retry-blocked: %v", err)
			}
			if len(cleared) > 0 {
				fmt.Fprintf(stderr, "taskloop: unblocked %s\n", strings.Join(cleared, ", "))
			}
		}
	}
	runDir := o.runDir
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	d := &pilot.Dispatcher{Providers: o.registry, Runners: agents.Runners(), RunDir: runDir, Grace: o.grace, Credentials: config.DefaultCredentials()}
	l := &loop.Loop{
		Workspace: ws, Seed: &o.seed, Dispatcher: d, State: st, MaxParallel: o.maxParallel,
		RunDir: runDir, Timeout: o.timeout, IdleTimeout: o.idleTimeout, Contract: o.contract,
	}
	if o.keepRecords {
		l.RunDir = ""
	}
	var rep loop.Report
	if o.dryRun {
		rep, err = l.Plan(o.group)
	} else {
		if o.progress != nil {
			l.OnEvent = progress(o.progress, time.Now())
		}
		rep, err = l.Run(ctx, o.group)
	}
	if err != nil {
		return fail(stderr, "%v", err)
	}
	if o.asJSON {
		data, _ := json.MarshalIndent(reportJSON(rep), "", "  ")
		stdout.Write(append(data, '\n'))
	} else {
		printReport(stdout, rep, o.dryRun)
	}
	return rep.ExitCode()
}

// progress prints one line per step of the loop: what a person watching
// a terminal needs to follow the group.
func progress(w io.Writer, start time.Time) func(loop.Event) {
	return func(e loop.Event) {
		at := time.Since(start).Round(100 * time.Millisecond)
		line := ""
		switch e.Type {
		case loop.EventStage:
			line = fmt.Sprintf("%-9s started (%s)", e.Stage, e.Reason)
		case loop.EventStageEnd:
			v := e.Verdict
			what := string(v.Verdict.Verdict)
			if v.FailureClass != "" {
				what += " " + string(v.FailureClass)
			}
			if v.Attempts > 1 {
				what += fmt.Sprintf(" after %d attempts", v.Attempts)
			}
			line = fmt.Sprintf("%-9s %s", e.Stage, what)
		case loop.EventComplete:
			line = "complete, archived in " + e.Reason
		case loop.EventBlocked:
			line = "blocked: " + e.Reason
		case loop.EventWaiting:
			line = fmt.Sprintf("%-9s %s", e.Stage, e.Reason)
		case loop.EventExternal:
			line = "not run here, another task loop owns it: " + e.Reason
		case loop.EventFollowUp:
			line = "review wrote a follow-up: " + e.Reason
		case loop.EventSchedule:
			switch {
			case e.Schedule == nil:
				return
			case e.Schedule.Type == schedule.EventDeferred:
				line = "waits: " + e.Reason
			case e.Schedule.Type == schedule.EventBlocked && e.Reason != "":
				line = "held: " + e.Reason
			default:
				return
			}
		default:
			return
		}
		fmt.Fprintf(w, "%7s  %-28s %s\n", at, e.Task, line)
	}
}

func printReport(w io.Writer, rep loop.Report, plan bool) {
	if len(rep.Tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATUS\tSTAGE\tWHY / WHERE")
	for _, t := range rep.Tasks {
		why := t.Reason
		switch {
		case t.Archive != "":
			why = t.Archive
		case len(t.WaitingOn) > 0:
			why = "waits on " + strings.Join(t.WaitingOn, ", ")
		}
		stage := t.Stage
		if stage == "" {
			stage = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Status, stage, why)
	}
	tw.Flush()
	for name, e := range rep.Errors {
		fmt.Fprintf(w, "error: %s: %s\n", name, e)
	}
	what := "group"
	if plan {
		what = "plan"
	}
	fmt.Fprintf(w, "%s %s (exit %d)\n", what, rep.Status, rep.ExitCode())
}

// reportJSON is the report as the --json output has it.
func reportJSON(rep loop.Report) any {
	type task struct {
		Name      string   `json:"name"`
		Status    string   `json:"status"`
		Stage     string   `json:"stage,omitempty"`
		Reason    string   `json:"reason,omitempty"`
		Archive   string   `json:"archive,omitempty"`
		WaitingOn []string `json:"waiting_on,omitempty"`
	}
	out := struct {
		Group  string            `json:"group,omitempty"`
		Status string            `json:"status"`
		Exit   int               `json:"exit_code"`
		Tasks  []task            `json:"tasks"`
		Errors map[string]string `json:"errors,omitempty"`
	}{Group: rep.Group, Status: rep.Status, Exit: rep.ExitCode(), Tasks: []task{}, Errors: rep.Errors}
	for _, t := range rep.Tasks {
		out.Tasks = append(out.Tasks, task(t))
	}
	return out
}
