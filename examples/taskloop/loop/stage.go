package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
	"github.com/pilotworkers/pilot/retry"
)

// taskJobs is the scheduler's dispatcher: a job is a task, driven through
// its stages until it is archived or blocked.
type taskJobs struct{ r *loopRun }

// verdicts of a task job, as the scheduler reads them.
func completeVerdict(t pilot.Task) pilot.Verdict {
	return pilot.Verdict{Type: event.Verdict, Provider: t.Provider, Mode: t.Mode, Label: t.Label, Verdict: pilot.Completed}
}

// blockedVerdict is the verdict of task job t, blocked for reason after
// last; the scheduler learns of the block from the retry.EventBlocked event
// it sends t's observer.
func blockedVerdict(t pilot.Task, reason string, last pilot.Verdict) pilot.Verdict {
	if t.Observer != nil {
		t.Observer(pilot.Event{Type: retry.EventBlocked, Time: time.Now().UTC(), Message: reason,
			Retry: &retry.Info{Key: t.Key, Reason: reason}})
	}
	return failedVerdict(t, last)
}

// failedVerdict is last as a failure, or a failure of t's when there is no
// last verdict.
func failedVerdict(t pilot.Task, last pilot.Verdict) pilot.Verdict {
	v := last
	if v.Type == "" {
		v = pilot.Verdict{Type: event.Verdict, Provider: t.Provider, Mode: t.Mode, Label: t.Label}
	}
	if v.Verdict.Success() || v.Verdict == "" {
		v.Verdict = pilot.Failed
	}
	return v
}

// Dispatch claims task t.Key in the State's Owners and runs it, unless
// another live task loop owns it: then the task is not run, and its
// result is external-active (see loopRun.owned).
func (j *taskJobs) Dispatch(ctx context.Context, pt pilot.Task) (pilot.Verdict, error) {
	r := j.r
	owners := r.l.State.Owners
	claimed, holder, err := owners.Claim(pt.Key, r.l.now())
	switch {
	case err != nil:
		why := "the task's owner cannot be recorded: " + err.Error()
		r.emit(Event{Type: EventBlocked, Task: pt.Key, Reason: why})
		return blockedVerdict(pt, why, pilot.Verdict{}), nil
	case !claimed:
		r.owned(pt.Key, holder)
		return failedVerdict(pt, pilot.Verdict{}), nil
	}
	// Released, never recorded complete: the archive is the task's
	// completion, and a task of the same name may come again. A release
	// that fails leaves a record that is stale once this process ends.
	defer owners.Release(pt.Key, false, r.l.now())
	return j.drive(ctx, pt)
}

// drive runs task t.Key's stages, one pass after another: each pass reads
// the task directory again and runs the stage it is at.
func (j *taskJobs) drive(ctx context.Context, pt pilot.Task) (pilot.Verdict, error) {
	r := j.r
	l := r.l
	st := l.State
	task, ok := r.tasks[pt.Key]
	if !ok {
		return pilot.Verdict{}, fmt.Errorf("taskloop: no task %s", pt.Key)
	}
	dir := task.Dir
	var last pilot.Verdict
	for {
		if err := ctx.Err(); err != nil {
			v := last
			v.Verdict, v.FailureClass = pilot.Failed, pilot.FailCancelled
			return v, nil
		}
		t, ok, err := l.seed().Read(l.Workspace, dir)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && !ok:
			// The directory is gone: archived by the review, or lost.
			o := st.Orchestration()
			var base []string
			if o != nil {
				base = o.Baseline
			}
			a, found, aerr := newArchive(l.Workspace, task.Name, base)
			if aerr != nil {
				return last, aerr
			}
			if !found {
				return blockedVerdict(pt, fmt.Sprintf("task directory %s disappeared without a new archive holding a complete.log", dir), last), nil
			}
			return j.complete(pt, task, a)
		case err != nil:
			return last, err
		}
		if b := st.Retry.Task(t.Name).Blocked; b != "" {
			r.emit(Event{Type: EventBlocked, Task: t.Name, Reason: b})
			return blockedVerdict(pt, b, last), nil
		}
		stage, err := l.seed().Stage(t, st.progress(t))
		if err != nil {
			return last, err
		}
		if err := st.record(t.Name, func(ot *OrchestrationTask) { ot.Stage = stage }); err != nil {
			return last, err
		}
		var next passResult
		switch stage {
		case taskfile.StageUserReview, taskfile.StageBlocked:
			// The file is the stop (a review raised it): not a block of
			// the state, it holds as long as the file does.
			why := "user review: " + userReviewReason(t)
			if stage == taskfile.StageBlocked {
				why = badUserReview
			}
			r.emit(Event{Type: EventBlocked, Task: t.Name, Stage: stage, Reason: why})
			return blockedVerdict(pt, why, last), nil
		case taskfile.StageWorker:
			next, err = j.worker(ctx, pt, t)
		case taskfile.StageSelfcheck:
			next, err = j.selfcheck(ctx, pt, t)
		case taskfile.StageReview:
			next, err = j.review(ctx, pt, t)
		}
		if err != nil {
			return next.v, err
		}
		if next.v.Type != "" {
			last = next.v
		}
		switch {
		case next.archive != "":
			return j.complete(pt, task, next.archive)
		case next.blocked != "":
			if b := st.Retry.Task(t.Name).Blocked; b == "" {
				if err := st.Retry.UpdateTask(t.Name, func(ts *retry.TaskState) { ts.Blocked = next.blocked }); err != nil {
					return last, err
				}
			}
			r.emit(Event{Type: EventBlocked, Task: t.Name, Stage: stage, Reason: next.blocked})
			return blockedVerdict(pt, next.blocked, last), nil
		case next.failed:
			return last, nil
		}
	}
}

// passResult is what one pass of a task's stage machine came to: on to the
// next pass (all zero), an archive (complete), a block, or a failure that
// ends this run of the task (failed: v says why).
type passResult struct {
	v       pilot.Verdict
	archive string
	blocked string
	failed  bool
}

// complete records task's archive and removes its attempt records.
func (j *taskJobs) complete(pt pilot.Task, task taskfile.Task, archive string) (pilot.Verdict, error) {
	l := j.r.l
	if err := l.State.record(task.Name, func(ot *OrchestrationTask) {
		ot.Status, ot.Archive, ot.Stage, ot.Reason = "complete", archive, "", ""
	}); err != nil {
		return pilot.Verdict{}, err
	}
	if l.RunDir != "" {
		if _, err := CleanupTaskRecords(l.RunDir, task.Name); err != nil {
			return pilot.Verdict{}, err
		}
	}
	j.r.emit(Event{Type: EventComplete, Task: task.Name, Reason: archive})
	return completeVerdict(pt), nil
}

// stageEnd turns a stage's retried verdict into the pass's result: a
// success goes on; a used-up budget, a work-log failure or a failure that
// is not retried blocks the task; a cancelled run ends it for now.
func stageEnd(r retry.Result) (passResult, bool) {
	v := r.Verdict
	switch {
	case v.Verdict.Success():
		return passResult{v: v}, true
	case r.Interrupted || v.FailureClass == pilot.FailCancelled:
		return passResult{v: v, failed: true}, false
	case r.Blocked:
		return passResult{v: v, blocked: r.BlockedReason}, false
	case v.FailureClass == FailWorkLogWrite:
		return passResult{v: v, blocked: "the work log could not be written: " + v.EvidenceExcerpt}, false
	}
	return passResult{v: v, blocked: fmt.Sprintf("%s attempt failed and is not retried: %s", v.Label, failureText(v))}, false
}

func (j *taskJobs) worker(ctx context.Context, pt pilot.Task, t taskfile.Task) (passResult, error) {
	v, err := j.runStage(ctx, pt, t, taskfile.StageWorker, nil)
	if err != nil {
		return passResult{v: v.Verdict}, err
	}
	res, ok := stageEnd(v)
	if !ok {
		return res, nil
	}
	return res, j.r.l.State.setProgress(t, func(p *taskProgress) {
		p.WorkerDone, p.SelfcheckDone, p.WorkerProvider = true, false, v.Provider
	})
}

func (j *taskJobs) selfcheck(ctx context.Context, pt pilot.Task, t taskfile.Task) (passResult, error) {
	st := j.r.l.State
	if ok, err := st.Retry.CheckLimit(t.Name, counterSelfcheck, SelfcheckIncompleteLimit, "selfcheck"); err != nil || !ok {
		return passResult{blocked: st.Retry.Task(t.Name).Blocked}, err
	}
	v, err := j.runStage(ctx, pt, t, taskfile.StageSelfcheck, nil)
	if err != nil {
		return passResult{v: v.Verdict}, err
	}
	res, ok := stageEnd(v)
	if !ok {
		return res, nil
	}
	errs, err := j.implementationErrors(t)
	if err != nil {
		return res, err
	}
	if len(errs) > 0 {
		_, blocked, err := st.Retry.Bump(t.Name, counterSelfcheck, SelfcheckIncompleteLimit,
			"selfcheck implementation fields remain incomplete ("+strings.Join(errs, ", ")+")")
		if blocked {
			res.blocked = st.Retry.Task(t.Name).Blocked
		}
		return res, err
	}
	if err := st.Retry.ResetCounter(t.Name, counterSelfcheck); err != nil {
		return res, err
	}
	return res, st.setProgress(t, func(p *taskProgress) { p.SelfcheckDone = true })
}

func (j *taskJobs) implementationErrors(t taskfile.Task) ([]string, error) {
	data, err := os.ReadFile(t.Review)
	if err != nil {
		return nil, err
	}
	return j.r.l.seed().ImplementationReviewErrors(string(data)), nil
}

func (j *taskJobs) review(ctx context.Context, pt pilot.Task, t taskfile.Task) (passResult, error) {
	l := j.r.l
	st := l.State
	if ok, err := st.Retry.CheckLimit(t.Name, counterReview, ReviewNoProgressLimit, "review"); err != nil || !ok {
		return passResult{blocked: st.Retry.Task(t.Name).Blocked}, err
	}
	before, err := taskfile.Signature(t)
	if err != nil {
		return passResult{}, err
	}
	v, err := j.runStage(ctx, pt, t, taskfile.StageReview, func(after taskfile.Task, gone bool) string {
		return j.reviewControl(t, after, gone)
	})
	if err != nil {
		return passResult{v: v.Verdict}, err
	}
	res, ok := stageEnd(v)
	if !ok {
		return res, nil
	}
	after, present, err := l.seed().Read(l.Workspace, t.Dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !present {
		return res, nil // archived by the review: the next pass finds it
	}
	if err != nil {
		return res, err
	}
	if verdict := j.verdict(after); verdict == l.seed().PassVerdict {
		note := fmt.Sprintf("complete %s\nreview: %s\nrecord: %s\n", worklog.Format(l.now()), v.Provider, v.Record)
		a, err := archive(l.Workspace, after, l.now(), note)
		if err != nil {
			return res, err
		}
		res.archive = a
		return res, nil
	}
	if after.Header != t.Header {
		// A follow-up plan: the passed-on review goes to its log, a new
		// stub takes its place, and the stages start over.
		if err := j.rotateReview(t, after); err != nil {
			return res, err
		}
		j.r.emit(Event{Type: EventFollowUp, Task: t.Name, Stage: taskfile.StageReview,
			Reason: fmt.Sprintf("plan %d (%s)", after.Header.Plan, after.Plan)})
	}
	sig, err := taskfile.Signature(after)
	if err != nil {
		return res, err
	}
	if sig != before {
		return res, st.Retry.ResetCounter(t.Name, counterReview)
	}
	_, blocked, err := st.Retry.Bump(t.Name, counterReview, ReviewNoProgressLimit, "review made no progress")
	if blocked {
		res.blocked = st.Retry.Task(t.Name).Blocked
	}
	return res, err
}

// verdict is the official verdict of t's review ("PASS", "WARN", "FAIL"),
// or "" when its official section gives none.
func (j *taskJobs) verdict(t taskfile.Task) string {
	if t.Review == "" {
		return ""
	}
	data, err := os.ReadFile(t.Review)
	if err != nil {
		return ""
	}
	return j.r.l.seed().Verdict(string(data))
}

// reviewControl checks what a successful review attempt left: a
// non-passing official verdict with no follow-up plan is a violation
// (the review must pass the task or plan what is left).
func (j *taskJobs) reviewControl(before, after taskfile.Task, gone bool) string {
	if gone || after.UserReview != "" {
		return ""
	}
	switch v := j.verdict(after); v {
	case "", j.r.l.seed().PassVerdict:
		return ""
	default:
		if after.Header == before.Header {
			return fmt.Sprintf("review verdict %s without a follow-up plan (the plan header still says plan=%d)", v, after.Header.Plan)
		}
	}
	return ""
}

// rotateReview moves a review that holds the last plan's verdict to its
// log (code_review_<lane>_G<grade>_<plan>.log) and puts a stub for the new
// plan in its place.
func (j *taskJobs) rotateReview(before, after taskfile.Task) error {
	if after.Review == "" || j.verdict(after) == "" {
		return nil
	}
	log := fmt.Sprintf("%s/code_review_%s_G%02d_%d.log", after.Dir, before.Lane, before.Grade, before.Header.Plan)
	if err := os.Rename(after.Review, log); err != nil {
		return err
	}
	return writeFileAtomic(after.Review, []byte(taskfile.ReviewStub(after.Header)))
}
