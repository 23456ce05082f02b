// Package loop drives a group of agent tasks, laid out as the seed's
// agent-task directories (package taskfile), to completion: each task
// through its stages (worker, selfcheck, review, and again after a
// follow-up plan) until its review passes and it is archived, or it is
// blocked.
//
// The tasks of a group are the jobs of a schedule.Graph: dependencies come
// from the directory names, write sets from the plans, so that tasks that
// write the same file never run at once, and a blocked task (a user review
// stop, a used-up budget) holds back only what depends on it. Each stage
// attempt is a pilot dispatch, retried by the retry package within the
// seed's budget of 10 consecutive failures per task and stage, between a
// START and a FINISH row of the task's work log (package worklog).
//
// Task loops may share a group, in separate processes, when they share its
// State directory: a loop claims a task in the State's Owners (a
// schedule.Store) before it runs it and releases it when the task ends. A
// task another live loop owns is external-active: this loop does not run
// it (what depends on it waits), drains the others, and reports the group
// non-terminal (exit 3), because the group goes on in the other loop.
package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// The task loop's own failure classes of a stage attempt.
const (
	// FailReviewControl: a review ended without doing what a review must
	// (a non-passing verdict needs a follow-up plan). Retried, never a
	// blocker by itself.
	FailReviewControl pilot.FailureClass = "review-control-violation"
	// FailWorkLogWrite: the dispatcher could not write the work log. It
	// blocks the task rather than retry.
	FailWorkLogWrite pilot.FailureClass = "work-log-runtime-write"
	// FailWorkLogIncomplete: under the work-log contract, the worker left
	// its block unfilled. Not retried.
	FailWorkLogIncomplete pilot.FailureClass = "work-log-incomplete"
)

// The seed's repetition limits: passes of a stage that made no progress
// before the task is blocked.
const (
	SelfcheckIncompleteLimit = 10
	ReviewNoProgressLimit    = 10
)

// Counters of the retry state.
const (
	counterSelfcheck = "selfcheck_incomplete"
	counterReview    = "review_no_progress"
)

// A Loop drives the tasks of a workspace. Its fields are configuration;
// Workspace, Dispatcher and State are required.
type Loop struct {
	// Workspace is the repository root holding agent-task/.
	Workspace string
	// Seed is the vocabulary, prompts and routes; zero means
	// taskfile.DefaultSeed().
	Seed *taskfile.Seed
	// Dispatcher runs each stage attempt: a *pilot.Dispatcher, or a fake.
	Dispatcher pilot.TaskDispatcher
	// State keeps budgets, counters, progress and the orchestration.
	State *State
	// Policy is the retry policy of stage attempts; its State, Retry,
	// NonRetryable and ResumePrompt are the loop's own.
	Policy retry.Policy
	// MaxParallel bounds the tasks that run at once; zero means no bound.
	MaxParallel int
	// RunDir is pilot's run directory, where a completed task's attempt
	// records are removed from; empty leaves them.
	RunDir string
	// Timeout and IdleTimeout bound each stage attempt; zero means the
	// Dispatcher's defaults.
	Timeout, IdleTimeout time.Duration
	// Contract adds the seed's work-log contract to worker and selfcheck
	// attempts: a block to fill in WORK_LOG.md, its prompt, and its check
	// (FailWorkLogIncomplete).
	Contract bool
	// OnEvent, when set, receives what the loop does, never concurrently.
	OnEvent func(Event)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// An Event is one step of the loop: Type is one of the Event constants;
// Dispatch is set for a stage attempt's pilot events.
type Event struct {
	Type   string
	Task   string
	Stage  string
	Reason string
	// Verdict is a stage's end: its last attempt's verdict and retries.
	Verdict *retry.Result
	// Dispatch is a pilot event of the running attempt; Schedule a
	// decision of the scheduler.
	Dispatch *pilot.Event
	Schedule *schedule.Event
}

// The kinds of Event.
const (
	EventScan     = "taskloop.scan"      // the group was scanned: Reason says how many tasks
	EventStage    = "taskloop.stage"     // a task's stage starts
	EventStageEnd = "taskloop.stage_end" // a stage ended: Verdict
	EventFollowUp = "taskloop.follow_up" // the review wrote a follow-up plan: Reason names it; the stages start over
	EventComplete = "taskloop.complete"  // the task passed review and is archived: Reason is the archive
	EventBlocked  = "taskloop.blocked"   // the task is blocked: Reason
	EventWaiting  = "taskloop.waiting"   // a stage attempt waits for a slot of its provider (max_parallel): Reason
	EventDispatch = "taskloop.dispatch"  // a pilot event of a stage attempt
	EventSchedule = "taskloop.schedule"  // a scheduler decision
	EventExternal = "taskloop.external"  // another live task loop owns the task, which is not run here: Reason says who
)

func (l *Loop) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Loop) seed() *taskfile.Seed {
	if l.Seed == nil {
		s := taskfile.DefaultSeed()
		l.Seed = &s
	}
	return l.Seed
}

// A Report is what one Run did to the group.
type Report struct {
	Group string
	// Status is "complete" (every task is archived), "blocked" (a task
	// is blocked, or waits on one), "non-terminal" (a task was cut short,
	// or another task loop owns one) or "empty" (no task).
	Status string
	Tasks  []TaskReport
	// Errors are tasks that disappeared without completing, by name.
	Errors map[string]string
}

// A TaskReport is one task's state after a Run. Status is the
// orchestration's ("complete", "blocked", "waiting", "failed", "active"),
// or "external-active" for a task another live task loop owns (Reason
// says which).
type TaskReport struct {
	Name      string
	Status    string
	Stage     string
	Reason    string
	Archive   string
	WaitingOn []string
}

// ExitCode is the seed dispatcher's exit status for the report: 0
// complete, nothing to do, or (a plan) ready; 2 blocked; 3 non-terminal.
func (r Report) ExitCode() int {
	switch r.Status {
	case "complete", "empty", "ready":
		return 0
	case "non-terminal":
		return 3
	}
	return 2
}

// Scan lists the tasks of group (every group when empty) under
// workspace's agent-task/, in name order; the archive is not scanned.
func Scan(s *taskfile.Seed, workspace, group string) ([]taskfile.Task, error) {
	root := filepath.Join(workspace, "agent-task")
	var groups []string
	if group != "" {
		groups = []string{group}
	} else {
		entries, err := os.ReadDir(root)
		if err != nil {
			return nil, fmt.Errorf("taskloop: %w (no agent-task directory in %s)", err, workspace)
		}
		for _, e := range entries {
			if e.IsDir() && e.Name() != "archive" && !strings.HasPrefix(e.Name(), ".") {
				groups = append(groups, e.Name())
			}
		}
	}
	var tasks []taskfile.Task
	for _, g := range groups {
		// A task directly under agent-task/ is a task of its own.
		if t, ok, err := s.Read(workspace, filepath.Join(root, g)); err != nil {
			return nil, fmt.Errorf("taskloop: task %s: %w", g, err)
		} else if ok {
			tasks = append(tasks, t)
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, g))
		if err != nil {
			return nil, fmt.Errorf("taskloop: group %s: %w", g, err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			t, ok, err := s.Read(workspace, filepath.Join(root, g, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("taskloop: task %s/%s: %w", g, e.Name(), err)
			}
			if ok {
				tasks = append(tasks, t)
			}
		}
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Name < tasks[j].Name })
	return tasks, nil
}

// groupOf is the group of a task name ("m-test" of "m-test/01_gate").
func groupOf(name string) string {
	g, _, _ := strings.Cut(name, "/")
	return g
}

// maxRounds bounds the scans of one Run: a round runs the graph of the
// tasks found; a task that appears meanwhile (a follow-up in a directory
// of its own) gets another round.
const maxRounds = 8

// Run drives the tasks of group (every group when empty) until each is
// complete, blocked, or waits on a task that is not complete, or until ctx
// ends. The error is pilot's or the state's own failure; the report says
// what became of the tasks.
func (l *Loop) Run(ctx context.Context, group string) (Report, error) {
	if l.Dispatcher == nil || l.State == nil || l.Workspace == "" {
		return Report{}, errors.New("taskloop: a Loop needs a Workspace, a Dispatcher and a State")
	}
	run := &loopRun{l: l, group: group, seen: map[string]bool{}, results: map[string]schedule.Result{}, external: map[string]string{}, slots: &providerSlots{}}
	return run.run(ctx)
}

type loopRun struct {
	mu      sync.Mutex // emit
	l       *Loop
	group   string
	seen    map[string]bool
	results map[string]schedule.Result
	tasks   map[string]taskfile.Task

	extMu    sync.Mutex
	external map[string]string // the tasks another live loop owns: who

	slots *providerSlots // the providers' max_parallel, per stage attempt
}

// owned records that another live loop owns task, as holder says.
func (r *loopRun) owned(task, holder string) {
	r.extMu.Lock()
	r.external[task] = holder
	r.extMu.Unlock()
	r.emit(Event{Type: EventExternal, Task: task, Reason: holder})
}

// owner says who owns task when another live loop does (ok is false
// when none does).
func (r *loopRun) owner(task string) (holder string, ok bool) {
	r.extMu.Lock()
	defer r.extMu.Unlock()
	holder, ok = r.external[task]
	return holder, ok
}

func (r *loopRun) emit(e Event) {
	if r.l.OnEvent != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.l.OnEvent(e)
	}
}

func (r *loopRun) run(ctx context.Context) (Report, error) {
	l := r.l
	var errs map[string]string
	for round := 0; round < maxRounds; round++ {
		tasks, err := Scan(l.seed(), l.Workspace, r.group)
		if err != nil {
			return Report{}, err
		}
		r.emit(Event{Type: EventScan, Reason: fmt.Sprintf("%d tasks", len(tasks))})
		present := map[string]bool{}
		for _, t := range tasks {
			present[t.Name] = true
		}
		if round == 0 {
			if err := l.State.Prepare(r.group, l.Workspace, tasks, l.now()); err != nil {
				return Report{}, err
			}
		}
		_, e, err := l.State.Reconcile(l.Workspace, present)
		if err != nil {
			return Report{}, err
		}
		errs = e
		var fresh []taskfile.Task
		for _, t := range tasks {
			if !r.seen[t.Name] {
				fresh = append(fresh, t)
			}
		}
		if len(fresh) == 0 || ctx.Err() != nil {
			break
		}
		if round > 0 {
			if err := l.State.Prepare(r.group, l.Workspace, fresh, l.now()); err != nil {
				return Report{}, err
			}
		}
		if err := r.round(ctx, tasks, fresh); err != nil {
			return Report{}, err
		}
	}
	rep := r.report(errs)
	if err := l.State.finish(rep.Status); err != nil {
		return rep, err
	}
	return rep, nil
}

// round runs the graph of fresh tasks (tasks of earlier rounds that are
// still here count as their results say).
func (r *loopRun) round(ctx context.Context, all, fresh []taskfile.Task) error {
	l := r.l
	r.tasks = map[string]taskfile.Task{}
	for _, t := range all {
		r.tasks[t.Name] = t
	}
	g := schedule.Graph{Workdir: l.Workspace}
	ids := map[string]bool{}
	for _, t := range fresh {
		ids[t.Name] = true
	}
	for _, t := range fresh {
		r.seen[t.Name] = true
		g.Jobs = append(g.Jobs, r.job(t, ids))
	}
	s := &schedule.Scheduler{
		Dispatcher:  &taskJobs{r: r},
		MaxParallel: l.MaxParallel,
		OnEvent: func(e schedule.Event) {
			if e.Type == schedule.EventDispatch {
				return // the stage attempts report their own
			}
			if _, ok := r.owner(e.Job); ok && e.Type == schedule.EventDone {
				e.Reason = string(schedule.StatusExternalActive)
			}
			r.emit(Event{Type: EventSchedule, Task: e.Job, Reason: e.Reason, Schedule: &e})
		},
		Now: l.Now,
	}
	results, err := s.Run(ctx, g)
	if err != nil {
		return err
	}
	for _, res := range results {
		if holder, ok := r.owner(res.ID); ok {
			// The owner records the task's status; this loop reports it.
			res.Status, res.BlockedReason = schedule.StatusExternalActive, holder
			r.results[res.ID] = res
			continue
		}
		r.results[res.ID] = res
		err := l.State.record(res.ID, func(ot *OrchestrationTask) {
			if ot.Status != "complete" { // another loop may have completed it meanwhile
				r.fill(ot, res)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// fill sets an orchestration task's status from its job's result.
func (r *loopRun) fill(ot *OrchestrationTask, res schedule.Result) {
	ot.Reason, ot.WaitingOn = res.BlockedReason, res.WaitingOn
	switch res.Status {
	case schedule.StatusComplete:
		ot.Status, ot.Stage = "complete", "" // the job recorded the archive
	case schedule.StatusBlocked:
		ot.Status = "blocked"
	case schedule.StatusWaiting:
		ot.Status, ot.Reason = "waiting", "waits on "+strings.Join(res.WaitingOn, ", ")
	default:
		ot.Status = "failed"
		if res.Interrupted || res.Verdict.FailureClass == pilot.FailCancelled {
			ot.Status = "active"
			ot.Reason = "interrupted"
		} else if ot.Reason == "" {
			ot.Reason = failureText(res.Verdict)
		}
	}
}

func failureText(v pilot.Verdict) string {
	s := string(v.FailureClass)
	if s == "" {
		s = string(v.Verdict)
	}
	if v.EvidenceExcerpt != "" {
		s += ": " + v.EvidenceExcerpt
	} else if v.StderrTail != "" {
		s += ": " + lastLine(v.StderrTail)
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// job is task t's node of the graph: ids are the tasks of this round.
func (r *loopRun) job(t taskfile.Task, ids map[string]bool) schedule.Job {
	l := r.l
	j := schedule.Job{ID: t.Name, Task: pilot.Task{Key: t.Name, Label: t.Name, Mode: pilot.ModeCode}}
	if route, ok := l.seed().Route(t.Grade); ok {
		j.Task.Provider = route.Provider
	}
	if t.WriteSetKnown {
		j.WriteSet = t.WriteSet
	} else {
		j.WriteSet = []string{"."} // unknown: never beside a task that writes
	}
	for _, d := range t.Deps {
		dep, ok := r.dependency(t, d)
		switch {
		case !ok:
			j.Hold = fmt.Sprintf("depends on task %02d of %s, which is neither in agent-task/ nor archived", d, groupOf(t.Name))
		case dep == "":
			// complete already
		case ids[dep]:
			j.Deps = append(j.Deps, dep)
		default:
			if res, ok := r.results[dep]; !ok || res.Status != schedule.StatusComplete {
				j.Hold = fmt.Sprintf("depends on %s, which did not complete", dep)
			}
		}
	}
	if ts := l.State.Retry.Task(t.Name); ts.Blocked != "" {
		j.Hold = ts.Blocked
	}
	stage, err := l.seed().Stage(t, l.State.progress(t))
	switch {
	case err != nil:
		j.Hold = err.Error()
	case stage == taskfile.StageUserReview:
		j.Hold = "user review: " + userReviewReason(t)
	case stage == taskfile.StageBlocked:
		j.Hold = badUserReview
	}
	return j
}

// dependency finds the task of index d in t's group: its name when it is a
// task now (dep == ""  when it is complete: archived, or recorded so).
func (r *loopRun) dependency(t taskfile.Task, d int) (dep string, ok bool) {
	g := groupOf(t.Name)
	for name, o := range r.tasks {
		if groupOf(name) == g && o.Index == d && name != t.Name {
			return name, true
		}
	}
	if o := r.l.State.Orchestration(); o != nil {
		for name, ot := range o.Tasks {
			if groupOf(name) == g && ot.Status == "complete" && taskIndex(name) == d {
				return "", true
			}
		}
	}
	dirs, _ := archiveDirs(r.l.Workspace)
	for _, a := range dirs {
		parts := strings.Split(a, "/")
		if len(parts) >= 2 && parts[len(parts)-2] == g && taskIndex(parts[len(parts)-1]) == d {
			if _, err := os.Stat(filepath.Join(r.l.Workspace, "agent-task", filepath.FromSlash(a), CompleteLog)); err == nil {
				return "", true
			}
		}
	}
	return "", false
}

// taskIndex is the index of a task's directory name ("03+01,02_join": 3),
// or -1.
func taskIndex(name string) int {
	base := filepath.Base(filepath.FromSlash(name))
	n, i := 0, 0
	for ; i < len(base) && base[i] >= '0' && base[i] <= '9'; i++ {
		n = n*10 + int(base[i]-'0')
	}
	if i == 0 {
		return -1
	}
	return n
}

func userReviewReason(t taskfile.Task) string {
	data, err := os.ReadFile(t.UserReview)
	if err != nil {
		return "USER_REVIEW.md"
	}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "- ") && strings.Contains(l, ":") {
			return strings.TrimPrefix(l, "- ") + " (" + t.UserReview + ")"
		}
	}
	return t.UserReview
}

func (r *loopRun) report(errs map[string]string) Report {
	rep := Report{Group: r.group, Errors: errs}
	o := r.l.State.Orchestration()
	if o == nil || len(o.Tasks) == 0 {
		rep.Status = "empty"
		return rep
	}
	names := make([]string, 0, len(o.Tasks))
	for n := range o.Tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	complete, nonTerminal := true, false
	for _, n := range names {
		ot := o.Tasks[n]
		tr := TaskReport{Name: n, Status: ot.Status, Stage: ot.Stage, Reason: ot.Reason, Archive: ot.Archive, WaitingOn: ot.WaitingOn}
		if holder, ok := r.owner(n); ok && ot.Status != "complete" {
			tr.Status, tr.Reason = string(schedule.StatusExternalActive), holder
		}
		rep.Tasks = append(rep.Tasks, tr)
		if tr.Status != "complete" {
			complete = false
		}
		if tr.Status == "active" || tr.Status == string(schedule.StatusExternalActive) {
			nonTerminal = true
		}
	}
	switch {
	case complete:
		rep.Status = "complete"
	case nonTerminal:
		rep.Status = "non-terminal"
	default:
		rep.Status = "blocked"
	}
	return rep
}

const badUserReview = "USER_REVIEW.md does not hold the blocking contract (type, target, evidence, resume condition), or the task also has an active plan and review: fix it or remove it"

// attemptName is how a stage attempt is labelled: "group/01_task worker".
func attemptName(task, stage string) string { return task + " " + stage }

// workLogPath is task t's work log.
func workLogPath(t taskfile.Task) string { return filepath.Join(t.Dir, worklog.FileName) }

// Plan is what Run would do now, without dispatching or writing anything:
// each task is "ready" (Stage says where it starts), "blocked" (Reason
// says why) or "waiting" on tasks that are not ready. The report's status
// is "ready", "blocked" when any task is blocked or waits, or "empty".
func (l *Loop) Plan(group string) (Report, error) {
	tasks, err := Scan(l.seed(), l.Workspace, group)
	if err != nil {
		return Report{}, err
	}
	r := &loopRun{l: l, group: group, tasks: map[string]taskfile.Task{}, results: map[string]schedule.Result{}}
	ids := map[string]bool{}
	for _, t := range tasks {
		r.tasks[t.Name], ids[t.Name] = t, true
	}
	jobs := map[string]schedule.Job{}
	for _, t := range tasks {
		jobs[t.Name] = r.job(t, ids)
	}
	status := map[string]string{}
	var visit func(name string) string
	visit = func(name string) string {
		if s, ok := status[name]; ok {
			return s
		}
		status[name] = "waiting" // a cycle waits
		j := jobs[name]
		s := "ready"
		if j.Hold != "" {
			s = "blocked"
		}
		for _, d := range j.Deps {
			if s == "ready" && visit(d) != "ready" {
				s = "waiting"
			}
		}
		status[name] = s
		return s
	}
	rep := Report{Group: group, Status: "empty"}
	for _, t := range tasks {
		s := visit(t.Name)
		tr := TaskReport{Name: t.Name, Status: s}
		switch s {
		case "blocked":
			tr.Reason = jobs[t.Name].Hold
		case "waiting":
			tr.WaitingOn = jobs[t.Name].Deps
		default:
			tr.Stage, _ = l.seed().Stage(t, l.State.progress(t))
		}
		rep.Tasks = append(rep.Tasks, tr)
		switch {
		case s != "ready":
			rep.Status = "blocked"
		case rep.Status == "empty":
			rep.Status = "ready"
		}
	}
	return rep, nil
}
