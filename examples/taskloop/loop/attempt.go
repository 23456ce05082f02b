package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
	"github.com/pilotworkers/pilot/retry"
)

// runStage runs stage of task t: its attempts under the retry policy, each
// a pilot dispatch between a START and a FINISH row of the work log.
// control, for a review, judges what a successful attempt left.
func (j *taskJobs) runStage(ctx context.Context, pt pilot.Task, t taskfile.Task, stage string, control func(after taskfile.Task, gone bool) string) (retry.Result, error) {
	r := j.r
	l := r.l
	route, ok := l.seed().Route(t.Grade)
	if !ok || route.ProviderFor(stage) == "" {
		reason := fmt.Sprintf("no route for grade %d (lane %s) names a provider for the %s stage: add one to the routes file", t.Grade, t.Lane, stage)
		v := failedVerdict(pilot.Task{Label: attemptName(t.Name, stage)}, pilot.Verdict{})
		return retry.Result{Verdict: v, Blocked: true, BlockedReason: reason}, nil
	}
	task := pilot.Task{
		Provider:    route.ProviderFor(stage),
		Mode:        pilot.ModeCode,
		Prompt:      l.seed().Prompt(stage, t),
		Workdir:     l.Workspace,
		Timeout:     l.Timeout,
		IdleTimeout: l.IdleTimeout,
		Key:         t.Name,
		Label:       attemptName(t.Name, stage),
		Observer: func(e pilot.Event) {
			if e.Started != nil {
				// Best effort: the claim holds the task already; this
				// lets other loops see its worker live.
				_ = l.State.Owners.Started(t.Name, e.Started.Pid, filepath.Join(e.Started.RunDir, "stream.log"), l.now())
			}
			r.emit(Event{Type: EventDispatch, Task: t.Name, Stage: stage, Dispatch: &e})
			if pt.Observer != nil {
				pt.Observer(e)
			}
		},
	}
	p := l.Policy
	p.State = l.State.Retry
	p.Retry = append(slices.Clone(p.Retry), FailReviewControl)
	p.NonRetryable = append(slices.Clone(p.NonRetryable), FailWorkLogWrite, FailWorkLogIncomplete)
	if p.ResumePrompt == "" {
		p.ResumePrompt = l.seed().Prompts["resume"]
	}
	a := &attempt{j: j, task: t, stage: stage, control: control}
	r.emit(Event{Type: EventStage, Task: t.Name, Stage: stage, Reason: task.Provider})
	v, err := retry.Dispatch(ctx, a, task, retry.Key{Task: t.Name, Stage: stage, Group: groupOf(t.Name)}, p)
	r.emit(Event{Type: EventStageEnd, Task: t.Name, Stage: stage, Verdict: &v})
	return v, err
}

// attempt is one stage's attempts as a pilot.TaskDispatcher, for the retry
// layer: each Dispatch is one attempt.
type attempt struct {
	j       *taskJobs
	task    taskfile.Task
	stage   string
	control func(after taskfile.Task, gone bool) string
}

// fail makes v a failure of class, with the evidence the task loop found.
func fail(v pilot.Verdict, class pilot.FailureClass, evidence string) pilot.Verdict {
	v.Verdict = pilot.Failed
	v.Failure = pilot.Failure{FailureClass: class, FailureSource: "taskloop", EvidenceSource: "taskloop", EvidenceExcerpt: evidence}
	return v
}

func (a *attempt) executionID(n int) string {
	name := a.task.Header.Task
	if name == "" {
		name = filepath.Base(a.task.Dir)
	}
	return worklog.ExecutionID(name, a.task.Header.Plan, a.stage, n)
}

// Dispatch runs one attempt: the work log's START row, the dispatch, the
// checks of what the attempt left, and the FINISH row. A work log that
// cannot be written fails the attempt as FailWorkLogWrite (before the
// dispatch when the START row cannot be).
func (a *attempt) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	r := a.j.r
	l := r.l
	path := workLogPath(a.task)
	base := pilot.Verdict{Type: event.Verdict, Provider: t.Provider, Mode: t.Mode, Label: t.Label}
	// The provider's slot comes before the START row: an attempt that
	// waits for one has not started.
	release, err := r.slots.take(ctx, t.Provider, func() int { return pilot.LimitsOf(l.Dispatcher, t).MaxParallel }, func(why string) {
		r.emit(Event{Type: EventWaiting, Task: a.task.Name, Stage: a.stage, Reason: why})
	})
	if err != nil {
		return fail(base, pilot.FailCancelled, "cancelled while waiting for a slot of provider "+t.Provider), nil
	}
	defer release()
	n, id, err := worklog.NextExecution(path, func() (int, error) { return l.State.nextAttempt(a.task.Name, a.stage) }, a.executionID)
	if err != nil {
		return fail(base, FailWorkLogWrite, err.Error()), nil
	}
	contract := l.Contract && a.stage != taskfile.StageReview
	var c worklog.Contract
	if contract {
		c = worklog.DefaultContract()
		if _, err := c.AppendAttempt(path, worklog.Attempt{ExecutionID: id, Stage: a.stage, CLI: t.Provider, StartedAt: l.now()}); err != nil {
			return fail(base, FailWorkLogWrite, err.Error()), nil
		}
		t.Prompt += "\n\n" + c.Prompt(path, id)
	}
	entry := worklog.Entry{Time: l.now(), Event: worklog.Start, Task: a.task.Name, Stage: a.stage, Attempt: n,
		ExecutionID: id, CLI: t.Provider, Status: "running"}
	if err := worklog.Append(path, entry); err != nil {
		return fail(base, FailWorkLogWrite, err.Error()), nil
	}
	v, derr := l.Dispatcher.Dispatch(ctx, t)
	if v.Type == "" {
		v = base
	}
	if derr == nil && v.Verdict.Success() {
		if a.control != nil {
			after, ok, rerr := l.seed().Read(l.Workspace, a.task.Dir)
			gone := errors.Is(rerr, fs.ErrNotExist) || rerr == nil && !ok
			if why := a.control(after, gone); why != "" {
				v = fail(v, FailReviewControl, why)
			}
		}
		if contract {
			if _, errs, err := c.AttemptResult(path, id); err != nil || len(errs) > 0 {
				if err != nil {
					errs = append(errs, err.Error())
				}
				v = fail(v, FailWorkLogIncomplete, strings.Join(errs, "; "))
			}
		}
	}
	outcome := "failed"
	if v.Verdict.Success() {
		outcome = "succeeded"
	}
	exit := worklog.Exit(v.ExitCode, v.FailureClass == pilot.FailCancelled, v.Signal)
	if derr != nil {
		exit = "pilot-error"
	}
	entry.Time, entry.Event, entry.Status, entry.Record = l.now(), worklog.Finish, outcome+":"+exit, v.Record
	finishPath, ok := a.finishPath(path)
	if ok {
		err := worklog.Append(finishPath, entry)
		if err == nil && contract {
			err = c.AppendRuntimeResult(finishPath, id, exit, string(v.FailureClass), v.Record)
		}
		if err != nil {
			v = fail(v, FailWorkLogWrite, err.Error())
		}
	}
	return v, derr
}

// finishPath is where the FINISH row goes: the task's work log, or, when
// the attempt archived the task, the work log in its archive; ok is false
// when the task's directory is gone and no archive of it is found.
func (a *attempt) finishPath(path string) (string, bool) {
	if _, err := os.Stat(a.task.Dir); err == nil {
		return path, true
	}
	l := a.j.r.l
	var base []string
	if o := l.State.Orchestration(); o != nil {
		base = o.Baseline
	}
	if dir, found, _ := newArchive(l.Workspace, a.task.Name, base); found {
		return filepath.Join(dir, worklog.FileName), true
	}
	return "", false
}
