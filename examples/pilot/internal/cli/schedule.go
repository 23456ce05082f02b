package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/pilotslog"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/schedule"
	"github.com/pilotworkers/pilot/size"
	"github.com/pilotworkers/pilot/worktrees"
)

// exitNonTerminal is schedule's exit status when another live pilot owns a
// job of the graph: the group is not over.
const exitNonTerminal = 3

// graphJob is one entry of a graph file.
type graphJob struct {
	ID       string   `json:"id"`
	Provider string   `json:"provider"`
	Mode     string   `json:"mode"`
	TaskFile string   `json:"task_file"`
	Deps     []string `json:"deps"`
	WriteSet []string `json:"write_set"`
	Worktree bool     `json:"worktree"`
	// Sandbox is the job's own sandbox mode, which wins over --sandbox.
	Sandbox string `json:"sandbox"`
	// Timeout and IdleTimeout are the job's own limits, which win over
	// --timeout and --idle-timeout; timeout and idleTimeout are them
	// parsed (0 when not given).
	Timeout              limit `json:"timeout"`
	IdleTimeout          limit `json:"idle_timeout"`
	timeout, idleTimeout time.Duration
	// MaxTokens and MaxCostUSD are the job's own caps (see Task).
	MaxTokens  int64   `json:"max_tokens"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	// Estimate is how long the job is expected to run (schedule.Job's
	// Estimate); estimate is it parsed, 0 when not given, when the run
	// history's is used.
	Estimate limit `json:"estimate"`
	estimate time.Duration
}

const graphFields = "id, provider, mode, task_file, deps, write_set, worktree, sandbox, timeout, idle_timeout, max_tokens, max_cost_usd, estimate"

// loadGraph reads a graph file: {"jobs": [{"id", "provider", "mode",
// "task_file", "deps", "write_set", "worktree", "sandbox", "timeout",
// "idle_timeout", "max_tokens", "max_cost_usd", "estimate"}]}. Unknown fields are an error that names them and the
// known ones; so are a sandbox mode that is not one and a limit that is no
// positive duration.
func loadGraph(path string) ([]graphJob, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read graph file: %v", err)
	}
	var doc struct {
		Jobs []graphJob `json:"jobs"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return nil, fmt.Errorf("graph file %s: %s (a graph is {\"jobs\": [...]}, a job has %s)", path, strings.TrimPrefix(err.Error(), "json: "), graphFields)
		}
		if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
			return nil, fmt.Errorf("graph file %s is a JSON array: a graph is an object, {\"jobs\": [...]} (put the array under \"jobs\")", path)
		}
		return nil, fmt.Errorf("graph file %s: %v", path, syntaxAt(data, err))
	}
	if len(doc.Jobs) == 0 {
		return nil, fmt.Errorf("graph file %s has no jobs: it must look like {\"jobs\": [{\"id\": ..., \"provider\": ..., \"mode\": ..., \"task_file\": ...}]}", path)
	}
	for i, j := range doc.Jobs {
		var missing []string
		for _, f := range []struct{ name, v string }{{"id", j.ID}, {"provider", j.Provider}, {"mode", j.Mode}, {"task_file", j.TaskFile}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		if missing != nil {
			return nil, fmt.Errorf("graph file %s: job %d lacks %s", path, i+1, strings.Join(missing, ", "))
		}
		if _, err := parseSandbox(j.Sandbox); err != nil {
			return nil, fmt.Errorf("graph file %s: job %s: sandbox: %v", path, j.ID, err)
		}
		var err error
		if doc.Jobs[i].timeout, err = j.Timeout.duration(); err != nil {
			return nil, fmt.Errorf("graph file %s: job %s: timeout: %v", path, j.ID, err)
		}
		if doc.Jobs[i].idleTimeout, err = j.IdleTimeout.duration(); err != nil {
			return nil, fmt.Errorf("graph file %s: job %s: idle_timeout: %v", path, j.ID, err)
		}
		if doc.Jobs[i].estimate, err = j.Estimate.duration(); err != nil {
			return nil, fmt.Errorf("graph file %s: job %s: estimate: %v", path, j.ID, err)
		}
		if j.MaxTokens < 0 || j.MaxCostUSD < 0 {
			return nil, fmt.Errorf("graph file %s: job %s: max_tokens and max_cost_usd must be positive (or left out for no cap)", path, j.ID)
		}
	}
	return doc.Jobs, nil
}

// scheduledVerdict is one job's entry in schedule's output: its verdict (the
// last dispatch's, or one made up for a job that never ran) with its id and
// status, and for a waiting job why ("waiting on c because c failed").
type scheduledVerdict struct {
	ID            string          `json:"id"`
	Status        schedule.Status `json:"status"`
	BlockedReason string          `json:"blocked_reason,omitempty"`
	WaitingOn     []string        `json:"waiting_on,omitempty"`
	WaitingReason string          `json:"waiting_reason,omitempty"`
	outVerdict
	// Integrated says, under --integrate, whether the job's branch was
	// merged into the integration branch; IntegrationConflict lists the
	// paths that kept it out, IntegrationError why otherwise.
	Integrated          *bool    `json:"integrated,omitempty"`
	IntegrationConflict []string `json:"integration_conflict,omitempty"`
	IntegrationError    string   `json:"integration_error,omitempty"`
}

func cmdSchedule(ctx context.Context, h Hooks, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "reset" {
		return cmdScheduleReset(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("schedule", "--graph FILE --workdir D [flags] | reset --graph FILE --workdir D [--dry-run]", stdout, stderr)
	var graphFile, workdir, runDir, stateDir, integrate, rerun string
	var maxParallel int
	var dryRun bool
	var sandboxMode sandbox.Mode
	var timeout, idleTimeout time.Duration
	var memoryBudget size.Bytes
	fs.StringVar(&graphFile, "graph", "", "the graph `file`: {\"jobs\": [{"+graphFields+"}]} (required; a job's \"sandbox\", \"timeout\" and \"idle_timeout\" win over the flags)")
	fs.StringVar(&workdir, "workdir", "", "existing project `directory` the jobs run and write in (required)")
	fs.Func("max-parallel", "run at most `N` jobs at once (0, the default: every ready job)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number of jobs, 0 for every ready job, got %q", s)
		}
		maxParallel = n
		return nil
	})
	fs.StringVar(&stateDir, "state", "", "`directory` of the state file ("+schedule.StoreFileName+") shared with other pilots running the graph (default: .git/pilot of the workdir's repository)")
	fs.BoolVar(&dryRun, "dry-run", false, "check the graph, providers and credentials and print the plan; run and write nothing")
	planJSON := fs.Bool("json", false, "with --dry-run: print the plan as JSON on a terminal too (elsewhere it always is)")
	fs.StringVar(&integrate, "integrate", "", "merge each complete worktree job's branch into `BRANCH` (created at the graph's base commit; never one that is checked out), in graph order, as the graph finishes")
	var maxCost float64
	totalBudgetFlag(fs, "graph", &maxCost)
	fs.StringVar(&rerun, "rerun", "", "run these jobs again even if the state says they are complete: `ID,...` or all")
	fs.Var(seconds{&timeout}, "timeout", "wall-clock limit of each job in `seconds` (default 3600)")
	fs.Var(seconds{&idleTimeout}, "idle-timeout", "limit of each job in `seconds` without any output (default 900)")
	memoryBudgetFlag(fs, &memoryBudget)
	sandboxFlag(fs, &sandboxMode)
	providersFile := providersFlag(fs)
	fs.StringVar(&runDir, "run-dir", "", "`directory` for run records (default "+pilot.DefaultRunDir()+")")
	logger := logFlag(fs, stderr)
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if graphFile == "" || workdir == "" {
		return badInput(stderr, "schedule", "--graph and --workdir are required (see pilot schedule --help)")
	}
	if st, err := os.Stat(workdir); err != nil || !st.IsDir() {
		return badInput(stderr, "schedule", "--workdir: not an existing directory: %s", workdir)
	}
	specs, err := loadGraph(graphFile)
	if err != nil {
		return badInput(stderr, "schedule", "%v", err)
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return badInput(stderr, "schedule", "%v", err)
	}
	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners(), RunDir: runDir, Credentials: config.DefaultCredentials()}
	g := schedule.Graph{Workdir: workdir}
	group := grouplog.NewID(grouplog.KindGraph, time.Now())
	worktree := map[string]bool{}
	for _, s := range specs {
		taskFile := s.TaskFile
		if !filepath.IsAbs(taskFile) {
			taskFile = filepath.Join(filepath.Dir(graphFile), taskFile)
		}
		mode := sandboxMode
		if s.Sandbox != "" {
			mode = sandbox.Mode(s.Sandbox) // loadGraph checked it
		}
		j := schedule.Job{ID: s.ID, Deps: s.Deps, WriteSet: s.WriteSet, Task: pilot.Task{
			Provider: s.Provider, Mode: pilot.Mode(s.Mode), TaskFile: taskFile, Workdir: workdir, Label: s.ID, Key: s.ID,
			Sandbox: mode, Timeout: cmp.Or(s.timeout, timeout), IdleTimeout: cmp.Or(s.idleTimeout, idleTimeout),
			MaxTokens: s.MaxTokens, MaxCostUSD: s.MaxCostUSD, Group: group, GroupJob: s.ID,
		}, Estimate: s.estimate}
		if s.Worktree {
			// Its own tree, built on its dependencies' work.
			worktree[s.ID], j.Worktree = true, true
		}
		if err := d.Check(ctx, j.Task); err != nil {
			return badInput(stderr, "schedule", "job %s: %v", s.ID, err)
		}
		g.Jobs = append(g.Jobs, j)
	}
	if err := g.Check(); err != nil {
		return badInput(stderr, "schedule", "%v", err)
	}
	if err := markRerun(g.Jobs, rerun); err != nil {
		return badInput(stderr, "schedule", "--rerun: %v", err)
	}
	if integrate != "" && len(worktree) == 0 {
		return badInput(stderr, "schedule", "--integrate %s: no job of the graph is a worktree job (\"worktree\": true): only they leave branches to merge", integrate)
	}
	statePath := scheduleStatePath(ctx, stateDir, workdir, stderr)
	if dryRun {
		return schedulePlan(stdout, g, worktree, *planJSON)
	}
	rows := make([]progressJob, len(g.Jobs))
	index := map[string]int{}
	for i, j := range g.Jobs {
		rows[i], index[j.ID] = progressJob{Label: j.ID, Worker: j.Task.Provider + ":" + string(j.Task.Mode)}, i
	}
	prog := newProgress(stderr, "schedule", rows)
	if prog.term != nil {
		d.OnLine = prog.line
	}
	d = h.dispatcher(d)
	sched := &schedule.Scheduler{Dispatcher: d, MaxParallel: maxParallel, Now: scheduleNow, After: scheduleAfter, Integrate: integrate,
		MaxCostUSD: maxCost, MemoryBudget: memoryBudget, Estimate: historyEstimates(d.RunDir)}
	if len(worktree) > 0 {
		sched.Worktrees = worktrees.New(d.RunDir, "")
	}
	logSchedule := func(schedule.Event) {}
	if l := logger(); l != nil {
		// The dispatches' events through the Dispatcher (with pilot's
		// own failures), the scheduler's decisions here.
		sched.Dispatcher = logged(l, sched.Dispatcher)
		logDecision := pilotslog.ScheduleObserver(l)
		logSchedule = func(e schedule.Event) {
			if e.Dispatch == nil {
				logDecision(e)
			}
		}
	}
	if statePath != "" {
		if sched.Store, err = schedule.OpenStore(statePath, false); err != nil {
			return badInput(stderr, "schedule", "%v", err)
		}
	}
	att := &jobAttempts{next: sched.Dispatcher}
	sched.Dispatcher = h.task(att)
	dependents := map[string][]int{}
	for i, j := range g.Jobs {
		for _, dep := range j.Deps {
			dependents[dep] = append(dependents[dep], i)
		}
	}
	sched.OnEvent = func(e schedule.Event) {
		if e.Dispatch != nil {
			prog.event(index[e.Job], *e.Dispatch)
		} else {
			scheduleProgress(ctx, prog, index, dependents, maxParallel, e)
		}
		logSchedule(e)
	}
	deps := make([][]string, len(g.Jobs))
	for i, j := range g.Jobs {
		deps[i] = j.Deps
	}
	prog.glog = openGroupLog(d.RunDir, group, grouplog.KindGraph, rows, deps)
	prog.start()
	rs, err := h.schedule(ctx, sched, g)
	if err != nil {
		prog.finish(nil)
		return badInput(stderr, "schedule", "%v", err)
	}
	out := make([]scheduledVerdict, len(rs))
	summary := make([]outVerdict, len(rs))
	for i, r := range rs {
		v := outVerdict{Verdict: r.Verdict, Worktree: r.Worktree, Synthesized: r.Interrupted || r.Verdict.RunID == "", Interrupted: r.Interrupted}
		if v.Type == "" { // it never ran here
			t := g.Jobs[i].Task
			// StderrTail is the scheduler's "pilot: ..." when its
			// Dispatch failed (a sandbox refusal, say).
			v = outVerdict{Verdict: pilot.Verdict{Type: event.Verdict, Provider: t.Provider, Mode: t.Mode, Label: t.Label, Verdict: pilot.Failed,
				StderrTail: r.Verdict.StderrTail}, Synthesized: true}
			if r.Status == schedule.StatusComplete {
				v.Verdict.Verdict = pilot.Completed
			}
		}
		v.Attempts = att.attempts(r.ID)
		st := r.Status
		if interrupted(ctx, r) {
			st, v.Interrupted = statusInterrupted, true
		}
		out[i] = scheduledVerdict{ID: r.ID, Status: st, BlockedReason: r.BlockedReason, WaitingOn: r.WaitingOn, outVerdict: v}
		if in := r.Integration; in != nil {
			out[i].Integrated, out[i].IntegrationConflict, out[i].IntegrationError = &in.Merged, in.Conflict, in.Error
		}
		summary[i] = v
	}
	waitingReasons(out)
	for i, v := range out {
		switch v.Status {
		case schedule.StatusWaiting:
			prog.settle(i, string(v.Status), v.WaitingReason)
		case schedule.StatusBlocked, schedule.StatusExternalActive, schedule.StatusSkipped:
			prog.settle(i, string(v.Status), v.BlockedReason)
		}
	}
	prog.finish(summary)
	pilotErrors(stderr, out)
	integrationSummary(stderr, integrate, out)
	writeResult(stdout, out)
	for _, v := range out {
		if v.Integrated != nil && !*v.Integrated {
			return exitFailed // its work is not where --integrate was to put it
		}
	}
	switch schedule.GroupStatus(rs) {
	case "complete":
		return exitOK
	case "non-terminal":
		return exitNonTerminal
	}
	return exitFailed
}

// schedulePlan prints what a run would start, in graph order, and writes
// nothing.
func schedulePlan(stdout io.Writer, g schedule.Graph, worktree map[string]bool, asJSON bool) int {
	type planned struct {
		ID            string       `json:"id"`
		Provider      string       `json:"provider"`
		Mode          string       `json:"mode"`
		Deps          []string     `json:"deps"`
		WriteSet      []string     `json:"write_set"`
		WriteSetKnown bool         `json:"write_set_known"`
		Why           string       `json:"write_set_unknown_because,omitempty"`
		Worktree      bool         `json:"worktree,omitempty"`
		Sandbox       sandbox.Mode `json:"sandbox,omitempty"`
		Timeout       float64      `json:"timeout_s,omitempty"`
		IdleTimeout   float64      `json:"idle_timeout_s,omitempty"`
	}
	plan := make([]planned, len(g.Jobs))
	for i, j := range g.Jobs {
		set, known, why := schedule.WriteSet(g.Workdir, j.WriteSet)
		if set == nil {
			set = []string{}
		}
		deps := j.Deps
		if deps == nil {
			deps = []string{}
		}
		plan[i] = planned{j.ID, j.Task.Provider, string(j.Task.Mode), deps, set, known, why, worktree[j.ID], j.Task.Sandbox,
			j.Task.Timeout.Seconds(), j.Task.IdleTimeout.Seconds()}
	}
	if forPerson(stdout, asJSON) {
		var rows [][]string
		for _, p := range plan {
			ws := strings.Join(p.WriteSet, " ")
			if !p.WriteSetKnown {
				ws = "unknown: " + p.Why
			}
			rows = append(rows, []string{p.ID, p.Provider + ":" + p.Mode, strings.Join(p.Deps, ","), ws, yesNo(p.Worktree), string(p.Sandbox)})
		}
		fmt.Fprintf(stdout, "pilot schedule --dry-run: %d job(s); nothing was run or written\n", len(plan))
		table(stdout, []string{"JOB", "WORKER", "DEPS", "WRITE SET", "WORKTREE", "SANDBOX"}, rows)
		return exitOK
	}
	writeResult(stdout, plan)
	return exitOK
}
