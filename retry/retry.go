// Package retry runs a task again after the failures its Policy retries,
// within a budget of consecutive failures kept in a durable state store
// (Store) that pilots share, locked per operation, as a
// pilot.TaskDispatcher over any other (Dispatcher).
package retry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/text"
)

// The events of retries (Event.Type), with Event.Retry an *Info.
const (
	// EventRetry: an attempt failed and another follows (Retry says when
	// and how).
	EventRetry = "worker_runner.retry"
	// EventResumeFallback: the session an attempt was to resume is gone;
	// the next attempt starts a fresh session.
	EventResumeFallback = "worker_runner.resume_fallback"
	// EventBlocked: the task's failure budget ran out, or it was blocked
	// already; nothing more runs until the block is cleared.
	EventBlocked = "worker_runner.blocked"
)

// Info describes a retry, a resume fallback or a block: the Retry of the
// events above.
type Info struct {
	Key   string `json:"key"`
	Stage string `json:"stage"`
	// Attempt is the number of the attempt that failed, Record its record
	// and FailureClass its class.
	Attempt      int                `json:"attempt"`
	Record       string             `json:"record,omitempty"`
	FailureClass pilot.FailureClass `json:"failure_class,omitempty"`
	// Failures is the count of consecutive failures after this one, of
	// MaxFailures; Counted is false for a failure that did not count.
	Failures    int  `json:"failures"`
	MaxFailures int  `json:"max_failures"`
	Counted     bool `json:"counted"`
	// DelayMS is the wait before the next attempt; Resume is set when it
	// continues the failed attempt's session.
	DelayMS int64 `json:"delay_ms"`
	Resume  bool  `json:"resume,omitempty"`
	// Reason says why the task is blocked or the resume fell back.
	Reason string `json:"reason,omitempty"`
}

// A Result is what Dispatch came to: the last attempt's verdict, and what
// the retries add to it. Its JSON form is the verdict's, with these fields
// after it.
type Result struct {
	pilot.Verdict
	// Synthesized marks a verdict made up for a task not dispatched
	// (blocked already); Interrupted one whose wait for a retry ctx cut
	// short.
	Synthesized bool `json:"synthesized,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	// Attempts is how many attempts ran (0 when the task was blocked
	// before any); ResumedFrom is the record whose session the last one
	// continued. Blocked is set when the task's failure budget ran out (or
	// it was blocked already), with BlockedReason ("recovery failure
	// limit exhausted: 10/10").
	Attempts      int    `json:"attempts,omitempty"`
	ResumedFrom   string `json:"resumed_from,omitempty"`
	Blocked       bool   `json:"blocked,omitempty"`
	BlockedReason string `json:"blocked_reason,omitempty"`
}

// Defaults of Policy's zero-valued fields.
const (
	// DefaultMaxFailures is the budget of consecutive failures of one
	// task and stage (the seed dispatcher's RECOVERY_FAILURE_LIMIT).
	DefaultMaxFailures = 10
	// DefaultRateLimitCap bounds the wait a provider's retry-after asks
	// for.
	DefaultRateLimitCap = 60 * time.Second
	// DefaultRateLimitRetries is how many rate-limited attempts that did
	// no work in a row are re-dispatched without counting as failures.
	DefaultRateLimitRetries = 5
	// DefaultResumePrompt is the prompt of an attempt that continues the
	// session of a failed one.
	DefaultResumePrompt = "Continue this session and complete the current task."

	backoffBase = 10 * time.Second
	backoffMax  = 5 * time.Minute
)

// A Policy says when Dispatch runs a task again, how long it
// waits first, and when it gives up. The zero value is the default policy;
// fields are configuration and are never changed.
//
// After a failed attempt:
//
//   - provider-auth, provider-quota, spawn-failed and cancelled, the
//     classes in NonRetryable, and classes neither Retryable nor in Retry
//     or Resume are not retried.
//   - session-stall and context-limit (Resume) are retried in the same
//     session when the attempt gave a Verdict.Resume: the task's prompt
//     becomes ResumePrompt and the next record's resumed_from names the
//     failed attempt's record. Without a session to resume they start
//     afresh.
//   - the other retryable classes (network and stream failures, server
//     errors, generic-error, timeouts; see FailureClass.Retryable) and
//     the classes in Retry run the task again afresh.
//
// Every failed attempt counts against the budget of MaxFailures
// consecutive failures of the task's key and stage, which a success
// resets; the failure that reaches it blocks the task (no wait, no further
// attempt), and a blocked or exhausted task invokes nothing. Two failures
// do not count: a provider-rate-limit of an attempt that did no work (no
// output tokens, no tool call), re-dispatched after the provider's
// retry-after (at most RateLimitCap), and a resume whose session is gone,
// which falls back once to a fresh session at once.
//
// Before each retry Dispatch waits Backoff(failures); a
// rate-limited attempt waits at least the provider's retry-after (capped).
// The wait never holds a Fanout slot.
type Policy struct {
	// MaxFailures is the budget of consecutive failures before the task
	// is blocked; DefaultMaxFailures when zero. 1 means a single attempt.
	MaxFailures int
	// Backoff is the wait before the retry that follows the n-th
	// consecutive failure; DefaultBackoff when nil.
	Backoff func(n int) time.Duration
	// Sleep waits d or until ctx is done (then it returns ctx's error);
	// nil means a timer. Tests inject their own clock here. Either way
	// the wait holds no Fanout slot (pilot.WithoutSlot).
	Sleep func(ctx context.Context, d time.Duration) error
	// ResumePrompt is the prompt of an attempt that continues a failed
	// attempt's session; DefaultResumePrompt when empty.
	ResumePrompt string
	// Retry adds classes (the caller's own) that are retried afresh;
	// Resume replaces the classes retried in the same session (nil means
	// session-stall and context-limit); NonRetryable names classes never
	// retried, whatever the other lists say.
	Retry        []pilot.FailureClass
	Resume       []pilot.FailureClass
	NonRetryable []pilot.FailureClass
	// RateLimitCap bounds a provider's retry-after; DefaultRateLimitCap
	// when zero. RateLimitRetries bounds the uncounted re-dispatches of
	// rate-limited attempts that did no work, in a row;
	// DefaultRateLimitRetries when zero, none when negative.
	RateLimitCap     time.Duration
	RateLimitRetries int
	// State keeps the budgets, blocks and last attempts across restarts;
	// nil keeps them in memory for this call only.
	State *Store
}

// DefaultResumeClasses are the failure classes retried in the same session
// when Policy.Resume is nil.
var DefaultResumeClasses = []pilot.FailureClass{pilot.FailSessionStall, pilot.FailContextLimit}

// neverRetried are the classes no policy retries.
var neverRetried = []pilot.FailureClass{pilot.FailProviderAuth, pilot.FailProviderQuota, pilot.FailSpawn, pilot.FailCancelled}

func (p Policy) withDefaults() Policy {
	if p.MaxFailures <= 0 {
		p.MaxFailures = DefaultMaxFailures
	}
	if p.Backoff == nil {
		p.Backoff = DefaultBackoff
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.ResumePrompt == "" {
		p.ResumePrompt = DefaultResumePrompt
	}
	if p.Resume == nil {
		p.Resume = DefaultResumeClasses
	}
	if p.RateLimitCap <= 0 {
		p.RateLimitCap = DefaultRateLimitCap
	}
	switch {
	case p.RateLimitRetries == 0:
		p.RateLimitRetries = DefaultRateLimitRetries
	case p.RateLimitRetries < 0:
		p.RateLimitRetries = 0
	}
	return p
}

// Retries reports whether p runs a task again after a failure of class c,
// and whether in the same session (when the failed attempt gave a
// Verdict.Resume), by the rules in Policy's doc. Layers that retry by
// other means (a durable engine's retry policy) ask it so that pilot's
// policy, not theirs, decides.
func (p Policy) Retries(c pilot.FailureClass) (retry, resume bool) {
	return p.withDefaults().retries(c)
}

// retries reports whether a failure of class c is retried, and whether in
// the same session.
func (p Policy) retries(c pilot.FailureClass) (retry, resume bool) {
	if slices.Contains(neverRetried, c) || slices.Contains(p.NonRetryable, c) {
		return false, false
	}
	if slices.Contains(p.Resume, c) {
		return true, true
	}
	return c.Retryable() || slices.Contains(p.Retry, c), false
}

// blocked reports whether the task of key (its defaults filled) would run
// nothing: it is blocked, or its budget is used up.
func (p Policy) blocked(key Key) bool {
	if p.State == nil {
		return false
	}
	ts := p.State.Task(key.Task)
	return ts.Blocked != "" || ts.RecoveryFailures[key.Stage] >= p.withDefaults().MaxFailures
}

// DefaultBackoff is min(10 s · 2^(n-1), 5 min), less a random jitter of up
// to a fifth, so that siblings that failed together do not retry together.
func DefaultBackoff(n int) time.Duration {
	d := BackoffCeiling(n)
	return d - time.Duration(rand.Int64N(int64(d/5)+1))
}

// BackoffCeiling is DefaultBackoff without the jitter: min(10 s · 2^(n-1),
// 5 min).
func BackoffCeiling(n int) time.Duration {
	d := backoffBase
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// A Key names a task in the retry state. Its budget is per Task and
// Stage.
type Key struct {
	// Task is the task's name; empty means Task.Key, or when that is
	// empty TaskKey(task).
	Task string
	// Stage is the step of the task the budget counts ("worker",
	// "review"); empty means the task's mode.
	Stage string
	// Group is what Store.ClearBlocked selects by; empty means
	// DefaultGroup(Task).
	Group string
}

func (k Key) withDefaults(t pilot.Task) Key {
	if k.Task == "" {
		k.Task = t.Key
	}
	if k.Task == "" {
		k.Task = TaskKey(t)
	}
	if k.Stage == "" {
		k.Stage = string(t.Mode)
	}
	if k.Group == "" {
		k.Group = DefaultGroup(k.Task)
	}
	return k
}

// TaskKey is the default name of a task in the retry state: its Label when
// it has one, else "provider:mode:" and the task file's base name (or
// "prompt") with a short hash of its absolute path (or of the prompt), so
// that the same task gets the same key in every run.
func TaskKey(t pilot.Task) string {
	if t.Label != "" {
		return t.Label
	}
	name, src := "prompt", t.Prompt
	if t.TaskFile != "" {
		abs, err := filepath.Abs(t.TaskFile)
		if err != nil {
			abs = t.TaskFile
		}
		name, src = filepath.Base(abs), abs
	}
	sum := sha256.Sum256([]byte(src))
	return t.Provider + ":" + string(t.Mode) + ":" + text.SafeName(name, '_') + "@" + hex.EncodeToString(sum[:4])
}

// Dispatch dispatches t through d, and again after each failure the policy
// retries, until an attempt succeeds, a failure is not retried, the budget
// of consecutive failures runs out, or ctx is done. Every attempt is a
// Dispatch of its own, with its own run directory and record; each record
// after the first names the one before (previous_record, and resumed_from
// when it continues that attempt's session), through t.Lineage.
//
// The result is the last attempt's verdict, with Attempts set, and
// Blocked and BlockedReason when the budget ran out. A task that is blocked
// already, or whose budget is used up, is not dispatched: its verdict is
// synthesized, with Attempts 0 and Blocked set. When ctx ends during a wait
// the last verdict is returned with Interrupted set. Retry,
// resume-fallback and blocked events go to t.Observer and to the
// events.log of the attempt they follow.
//
// After a restart, a task whose last attempt (per p.State) failed in a class
// retried in the same session resumes that session (see ResumeFromRecord),
// unless t.Resume is set.
//
// A non-nil error means pilot failed, as for Dispatch; when the state store
// could not be written, the error comes with the result of the attempt
// that ran.
func Dispatch(ctx context.Context, d pilot.TaskDispatcher, t pilot.Task, key Key, p Policy) (Result, error) {
	r := newRetrying(t, key, p)
	ts, err := r.claim()
	if err != nil {
		return Result{}, err
	}
	if ts.Blocked != "" {
		r.emit(EventBlocked, pilot.Verdict{}, "not dispatched: "+ts.Blocked,
			Info{Key: r.key.Task, Stage: r.key.Stage, Record: ts.LastRecord, FailureClass: ts.LastFailureClass,
				Failures: r.fails, MaxFailures: r.p.MaxFailures, Reason: ts.Blocked})
		return blockedResult(t, ts), nil
	}
	cur, link := r.first(ts)
	for {
		cur.Lineage = link
		v, err := d.Dispatch(ctx, cur)
		if err != nil {
			// Pilot's own failure, not the task's: its claim is taken
			// back.
			err = errors.Join(err, r.unclaim())
			if r.out.Attempts > 0 {
				err = fmt.Errorf("pilot: attempt %d of %s: %w", r.out.Attempts+1, r.key.Task, err)
			}
			return Result{}, err
		}
		r.out.Attempts++
		r.out.Verdict, r.out.ResumedFrom = v, link.ResumedFrom
		var again bool
		if cur, link, again, err = r.next(ctx, cur, link); !again || err != nil {
			return r.out, errors.Join(err, r.unclaim())
		}
		// Each attempt claims its place on the budget: another pilot
		// may have used the rest of it meanwhile.
		ts, err := r.claim()
		if err != nil {
			return r.out, err
		}
		if ts.Blocked != "" {
			r.out.Blocked, r.out.BlockedReason = true, ts.Blocked
			i := r.info(r.out.Verdict, false)
			i.Reason = ts.Blocked
			r.emit(EventBlocked, r.out.Verdict, "not dispatched again: "+ts.Blocked, i)
			return r.out, nil
		}
	}
}

// retrying is one Dispatch of the retry layer: the task, its key and
// policy, and what its attempts came to so far.
type retrying struct {
	t        pilot.Task
	key      Key
	p        Policy
	store    *Store
	fails    int  // consecutive failures counted on the budget
	free     int  // rate-limit retries in a row, not counted
	fellBack bool // a resume fell back to a fresh session once
	out      Result
	// claimed is set while an attempt's claim on the budget stands (see
	// claim), made when the stage's count had been reset epoch times.
	claimed bool
	epoch   int
}

func newRetrying(t pilot.Task, key Key, p Policy) *retrying {
	r := &retrying{t: t, key: key.withDefaults(t), p: p.withDefaults(), store: p.State}
	if r.store == nil {
		r.store = &Store{dryRun: true, now: time.Now}
	}
	return r
}

// claim claims the next attempt's place on the task's budget of failures,
// under the state's lock, and returns the task's state: blocked when the
// budget is used up (then nothing is claimed), decided on the state as the
// file holds it now, for another pilot may have changed it. The attempt
// counts as a failure from now until it ends otherwise (a success resets
// the count, an attempt that was not the task's failure takes its claim
// back): pilots sharing the state never start more attempts together than
// the budget has left, and of N pilots at the last allowed attempt one
// starts it. An attempt whose pilot dies stays counted.
func (r *retrying) claim() (ts TaskState, err error) {
	err = r.store.change(func(doc *stateDoc) bool {
		s := doc.Tasks[r.key.Task].clone()
		n := s.RecoveryFailures[r.key.Stage]
		r.fails = n
		ts = s
		if s.Blocked != "" {
			return false // a blocked task's state is left as it is
		}
		if n >= r.p.MaxFailures {
			s.Blocked = fmt.Sprintf("recovery failure limit exhausted: %d/%d", n, r.p.MaxFailures)
		} else {
			if s.RecoveryFailures == nil {
				s.RecoveryFailures = map[string]int{}
			}
			s.RecoveryFailures[r.key.Stage] = n + 1
			r.claimed, r.epoch = true, s.Resets[r.key.Stage]
		}
		s.Group = r.key.Group
		r.store.setTask(doc, r.key.Task, s)
		ts = s.clone()
		return true
	})
	return ts, err
}

// unclaim takes back the claim of an attempt that was not the task's
// failure (the caller stopped it, pilot failed, a rate limit's free retry,
// a resume that fell back), unless a success reset the count since.
func (r *retrying) unclaim() error {
	if !r.claimed {
		return nil
	}
	r.claimed = false
	return r.update(func(s *TaskState) {
		if n := s.RecoveryFailures[r.key.Stage]; n > 0 && s.Resets[r.key.Stage] == r.epoch {
			if n == 1 {
				delete(s.RecoveryFailures, r.key.Stage)
			} else {
				s.RecoveryFailures[r.key.Stage] = n - 1
			}
		}
	})
}

// first is the first attempt's task: after a restart, one that continues
// the failed attempt's session if it can be.
func (r *retrying) first(ts TaskState) (pilot.Task, pilot.Lineage) {
	link := pilot.Lineage{Key: r.key.Task, Attempt: 1}
	if r.t.Resume != "" || r.fails == 0 || ts.LastStage != r.key.Stage || ts.LastRecord == "" {
		return r.t, link
	}
	rec, err := pilot.ReadRecord(ts.LastRecord)
	if err != nil || rec.Provider != r.t.Provider {
		return r.t, link
	}
	res, err := resumeFromRecord(rec, r.p.Resume)
	if err != nil {
		return r.t, link
	}
	link.PreviousRecord, link.ResumedFrom = ts.LastRecord, ts.LastRecord
	return resumeTask(r.t, res, r.p.ResumePrompt), link
}

// next decides what follows the attempt of cur (r.out.Verdict): again is
// set, with the next attempt's task and lineage, when there is one.
func (r *retrying) next(ctx context.Context, cur pilot.Task, link pilot.Lineage) (_ pilot.Task, _ pilot.Lineage, again bool, err error) {
	v := r.out.Verdict
	class := v.FailureClass
	switch {
	case v.Verdict.Success():
		r.claimed = false
		return cur, link, false, r.update(func(s *TaskState) {
			delete(s.RecoveryFailures, r.key.Stage)
			if s.Resets == nil {
				s.Resets = map[string]int{}
			}
			s.Resets[r.key.Stage]++
			s.LastRecord, s.LastFailureClass, s.LastStage = v.Record, "", r.key.Stage
		})
	case class == pilot.FailCancelled || ctx.Err() != nil:
		// The caller stopped it: not the task's failure.
		r.out.Interrupted = ctx.Err() != nil
		return cur, link, false, r.unclaim()
	case link.ResumedFrom != "" && !r.fellBack && v.SessionGone != "":
		if err := r.unclaim(); err != nil {
			return cur, link, false, err
		}
		r.fellBack = true
		reason := "the session to resume is gone (" + v.SessionGone + "); starting a fresh session"
		i := r.info(v, false)
		i.Reason = reason
		r.emit(EventResumeFallback, v, reason, i)
		return r.t, r.link(v, reason, ""), true, nil
	case class == pilot.FailProviderRateLimit && r.free < r.p.RateLimitRetries && noWork(v):
		if err := r.unclaim(); err != nil {
			return cur, link, false, err
		}
		r.free++
		delay := min(r.p.Backoff(r.free), r.p.RateLimitCap)
		if v.RetryAfterMS > 0 {
			delay = min(time.Duration(v.RetryAfterMS)*time.Millisecond, r.p.RateLimitCap)
		}
		i := r.info(v, false)
		i.DelayMS, i.Resume = delay.Milliseconds(), cur.Resume != r.t.Resume
		r.emit(EventRetry, v, fmt.Sprintf("rate limited before doing any work: retrying in %s (not counted)", delay), i)
		return cur, r.link(v, "", link.ResumedFrom), r.wait(ctx, delay), nil
	}
	r.free = 0
	blocked, err := r.count(v)
	if err != nil || blocked {
		return cur, link, false, err
	}
	retry, resume := r.p.retries(class)
	if !retry {
		return cur, link, false, nil
	}
	next, resumedFrom := r.t, ""
	if resume && v.Resume != "" {
		next, resumedFrom = resumeTask(r.t, v.Resume, r.p.ResumePrompt), v.Record
	}
	delay := r.p.Backoff(r.fails)
	if class == pilot.FailProviderRateLimit && v.RetryAfterMS > 0 {
		delay = max(delay, min(time.Duration(v.RetryAfterMS)*time.Millisecond, r.p.RateLimitCap))
	}
	i := r.info(v, true)
	i.DelayMS, i.Resume = delay.Milliseconds(), resumedFrom != ""
	how := "afresh"
	if resumedFrom != "" {
		how = "in the same session"
	}
	r.emit(EventRetry, v, fmt.Sprintf("attempt %d failed (%s, %d/%d): retrying %s in %s",
		r.out.Attempts, class, r.fails, r.p.MaxFailures, how, delay.Round(time.Millisecond)), i)
	return next, r.link(v, "", resumedFrom), r.wait(ctx, delay), nil
}

// count counts v's failure on the budget as the file holds it now, so
// that another pilot's count of the same task is not lost, and reports
// whether the task is blocked now (by this failure, or by another pilot
// meanwhile): then it stops.
func (r *retrying) count(v pilot.Verdict) (blocked bool, err error) {
	reason := ""
	if err := r.update(func(s *TaskState) {
		if s.RecoveryFailures == nil {
			s.RecoveryFailures = map[string]int{}
		}
		if !r.claimed || s.Resets[r.key.Stage] != r.epoch {
			// Not claimed (ever: it is), or a success of another
			// pilot reset the count the claim was on.
			s.RecoveryFailures[r.key.Stage]++
		}
		r.claimed = false
		r.fails = s.RecoveryFailures[r.key.Stage]
		s.LastRecord, s.LastFailureClass, s.LastStage = v.Record, v.FailureClass, r.key.Stage
		if s.Blocked == "" && r.fails >= r.p.MaxFailures {
			s.Blocked = fmt.Sprintf("recovery failure limit exhausted: %d/%d", r.fails, r.p.MaxFailures)
		}
		reason = s.Blocked
	}); err != nil {
		return false, err
	}
	if reason == "" {
		return false, nil
	}
	r.out.Blocked, r.out.BlockedReason = true, reason
	i := r.info(v, true)
	i.Reason = reason
	r.emit(EventBlocked, v, reason, i)
	return true, nil
}

// link is the lineage of the attempt after v's.
func (r *retrying) link(v pilot.Verdict, fallback, resumedFrom string) pilot.Lineage {
	return pilot.Lineage{Key: r.key.Task, Attempt: r.out.Attempts + 1, PreviousRecord: v.Record,
		ResumedFrom: resumedFrom, ResumeFallback: fallback}
}

// wait sleeps delay outside the caller's slot, and reports whether ctx
// let it: when not, the result is marked interrupted.
func (r *retrying) wait(ctx context.Context, delay time.Duration) bool {
	if err := pilot.WithoutSlot(ctx, func() error { return r.p.Sleep(ctx, delay) }); err != nil {
		r.out.Interrupted = true
		return false
	}
	return true
}

func (r *retrying) info(v pilot.Verdict, counted bool) Info {
	return Info{Key: r.key.Task, Stage: r.key.Stage, Attempt: r.out.Attempts, Record: v.Record,
		FailureClass: v.FailureClass, Failures: r.fails, MaxFailures: r.p.MaxFailures, Counted: counted}
}

func (r *retrying) update(f func(*TaskState)) error {
	return r.store.UpdateTask(r.key.Task, func(s *TaskState) {
		s.Group = r.key.Group
		f(s)
	})
}

// emit sends a retry-layer event to the task's observer and to the
// events.log of the attempt v it follows (none before the first).
func (r *retrying) emit(typ string, v pilot.Verdict, msg string, info Info) {
	e := pilot.Event{Type: typ, RunID: v.RunID, Time: time.Now().UTC(), Message: msg, Retry: &info}
	if v.Record != "" {
		appendEvent(filepath.Join(filepath.Dir(v.Record), "events.log"), e)
	}
	if r.t.Observer != nil {
		r.t.Observer(e)
	}
}

// resumeTask is t continuing the session resume with prompt.
func resumeTask(t pilot.Task, resume, prompt string) pilot.Task {
	t.Resume = resume
	t.Prompt = prompt
	t.TaskFile = ""
	return t
}

// blockedResult is the synthesized result of a task not dispatched
// because it is blocked.
func blockedResult(t pilot.Task, ts TaskState) Result {
	v := pilot.Verdict{
		Type:       event.Verdict,
		Provider:   t.Provider,
		Mode:       t.Mode,
		Label:      t.Label,
		Verdict:    pilot.Failed,
		Record:     ts.LastRecord,
		StderrTail: text.LastRunes("pilot: not dispatched: "+ts.Blocked, 500),
	}
	v.FailureClass = ts.LastFailureClass
	if v.FailureClass == "" {
		v.FailureClass = pilot.FailGeneric
	}
	v.FailureSource = "pilot-retry-budget"
	return Result{Verdict: v, Synthesized: true, Blocked: true, BlockedReason: ts.Blocked}
}

// noWork reports whether a failed attempt did no work: no output tokens
// reported and no tool call in its session.
func noWork(v pilot.Verdict) bool {
	return (v.Usage == nil || v.Usage.OutputTokens == 0) && v.ToolCalls == 0
}

// appendEvent adds e to an events.log, best effort: the log is evidence,
// not the outcome.
func appendEvent(path string, e pilot.Event) {
	data, err := json.Marshal(e)
	if err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return
	}
	f.Write(append(data, '\n'))
	f.Close()
}

// ErrNotResumable is returned by ResumeFromRecord for a record that cannot
// be resumed; the error's text says why.
var ErrNotResumable = errors.New("pilot: record cannot be resumed")

// ResumeFromRecord returns the Task.Resume value that continues the session
// of the attempt whose record.json is at path: a failed attempt (status
// "error") of a class retried in the same session (DefaultResumeClasses)
// that gave a session to resume, whose native session file, when it had
// one, still exists. It is how a restarted orchestrator picks up a failed
// attempt (the seed's laguna_resume_locator); the record's runner and model
// say which provider may resume it.
func ResumeFromRecord(path string) (string, error) {
	rec, err := pilot.ReadRecord(path)
	if err != nil {
		return "", fmt.Errorf("pilot: reading record %s: %w", path, err)
	}
	return resumeFromRecord(rec, DefaultResumeClasses)
}

func resumeFromRecord(rec pilot.Record, classes []pilot.FailureClass) (string, error) {
	notResumable := func(why string) error { return fmt.Errorf("%w: %s (run %s)", ErrNotResumable, why, rec.RunID) }
	switch {
	case rec.Status != string(pilot.Failed):
		return "", notResumable("its status is " + rec.Status + ", not error")
	case !slices.Contains(classes, rec.FailureClass):
		return "", notResumable("its failure class " + string(rec.FailureClass) + " is not resumed")
	case rec.Resume == "":
		return "", notResumable("it gave no session to resume")
	}
	if rec.SessionRecord != nil && rec.NativeSessionPath != "" {
		if _, err := os.Stat(rec.NativeSessionPath); err != nil {
			return "", notResumable("its native session " + rec.NativeSessionPath + " is gone")
		}
	}
	if filepath.IsAbs(rec.Resume) {
		if _, err := os.Stat(rec.Resume); err != nil {
			return "", notResumable("its session " + rec.Resume + " is gone")
		}
	}
	return rec.Resume, nil
}

// Dispatcher is a TaskDispatcher that runs every task under Policy
// ([Dispatch]), with the key Task.Key names (or its default). Give it to a
// Fanout to retry every job: a job holds its slot of MaxParallel only while
// an attempt runs, never while it waits, and jobs share Policy.State.
type Dispatcher struct {
	Dispatcher pilot.TaskDispatcher
	Policy     Policy
	// OnResult, when set, receives each task's Result as Dispatch
	// returns its verdict, so that a caller under a Fanout keeps the
	// retries' facts. It may be called from several goroutines at once.
	OnResult func(pilot.Task, Result)
}

// Dispatch implements pilot.TaskDispatcher: the Result's verdict.
func (d *Dispatcher) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	r, err := Dispatch(ctx, d.Dispatcher, t, Key{}, d.Policy)
	if d.OnResult != nil {
		d.OnResult(t, r)
	}
	return r.Verdict, err
}

// Unwrap returns the Dispatcher it retries, whose Check a Fanout uses.
func (d *Dispatcher) Unwrap() pilot.TaskDispatcher { return d.Dispatcher }

// Runs reports whether Dispatch would start anything for t: false when
// the task is blocked or its budget is used up.
func (d *Dispatcher) Runs(t pilot.Task) bool {
	return !d.Policy.blocked(Key{}.withDefaults(t))
}

// UniqueKeys gives every job's task its key (Task.Key, else its default,
// see Key), adding "#2", "#3"... to a key another job of the list already
// has for the same stage, so that identical jobs of one Fanout keep budgets
// of their own. It changes jobs in place.
func UniqueKeys(jobs []pilot.Job) {
	seen := map[[2]string]int{}
	for i := range jobs {
		k := Key{}.withDefaults(jobs[i].Task)
		id := [2]string{k.Task, k.Stage}
		seen[id]++
		if n := seen[id]; n > 1 {
			k.Task = fmt.Sprintf("%s#%d", k.Task, n)
		}
		jobs[i].Task.Key = k.Task
	}
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
