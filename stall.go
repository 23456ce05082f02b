package pilot

import (
	"time"
	"unicode/utf8"
)

// This file is the stall policy: how long a worker may stay silent, given
// the phase its native session shows, before pilot looks at it (an
// inspection: recorded, reported, the worker keeps running) or ends it
// (failure class session-stall). It is pure: the caller measures silence
// and reads the session; stallClock helps with the first.
//
// Silence is the time since the worker's last activity. Activity is new
// bytes on the worker's stdout or stderr, or a change in the size of its
// native session file. Nothing pilot writes itself counts: not events.log,
// not heartbeats, not record.json (they would keep a hung worker looking
// alive), and neither does a file's modification time (touching a file is
// not progress).

// The default silence thresholds of a StallPolicy. The seed dispatcher
// names three (PI_SESSION_START_STALL_SECONDS, PI_MODEL_RESPONSE_STALL_SECONDS,
// PI_TOOL_STALL_SECONDS) and gives a number only for the model response:
// "when the stream stops for 3 minutes outside a tool run, the dispatcher
// records the last part of the stream". The others are pilot's choice: the
// start threshold equals the model one, because pi writes no session file
// until the first model response exists, so "starting" covers that first
// model call; the tool threshold is 30 minutes, twice the 15 minute idle
// timeout (defaultIdleTimeout, from pilot-workers), because long test
// suites and builds are silent and ending one is costly.
const (
	defaultStallStart         = 3 * time.Minute
	defaultStallModelResponse = 3 * time.Minute
	defaultStallTool          = 30 * time.Minute
)

// defaultRetryLoop is how long a worker may go on retrying a failing model
// call on its own before pilot ends it (StallPolicy.RetryLoop). Ten
// minutes outlasts the CLIs' own default retry schedules (Claude Code's ten
// retries, gemini-cli's ten attempts, codex's five stream and four request
// retries, pi's three), so a CLI that gives up by itself still does, and
// one that never gives up (codex on a refused connection) is ended long
// before the Task's timeout.
const defaultRetryLoop = 10 * time.Minute

// stallTailBytes is how much of the end of the worker's stream a
// StallInspection keeps.
const stallTailBytes = 2048

// stallAction is what a StallPolicy says to do about a silence.
type stallAction int

const (
	// stallNone: keep waiting.
	stallNone stallAction = iota
	// stallInspect: record a StallInspection and emit an event once per
	// silence; the worker keeps running.
	stallInspect
	// stallTerminate: end the worker's process tree; its verdict is an
	// error with failure class FailSessionStall ("session-stall") and the
	// phase at the kill.
	stallTerminate
)

func (a stallAction) String() string {
	switch a {
	case stallNone:
		return "none"
	case stallInspect:
		return "inspect"
	case stallTerminate:
		return "terminate"
	}
	return "stallAction(?)"
}

// StallPolicy holds the silence thresholds that apply to each session
// phase. Zero fields mean the defaults; a negative field turns that
// threshold off. Per phase:
//
//	starting                   inspect after Start; never terminated
//	awaiting-model             inspect after ModelResponse; terminated after
//	                           ModelStall only when it is set
//	finished, errored          inspect after ModelResponse; never terminated
//	tool-running               terminate after Tool; no inspection
//	unknown (and any other)    inspect after ModelResponse; terminate after Tool
//
// Awaiting a model is never a stall on its own: a slow model is not a hung
// worker, and the Task's IdleTimeout still bounds it. Finished and errored
// wait on a model too: after its last message pi may compact the context
// (a model call) or retry an error after a back-off, and the retry's
// message is written only when it ends; or it is exiting. Ending such a
// worker would turn finished work into a failure, so they are inspected
// only. A tool run is expected to be silent, so it is not inspected, and it
// is ended only after the long Tool threshold; unknown gets the same
// conservative end, since pilot cannot tell what the worker is doing.
type StallPolicy struct {
	// Start is the silence after which a starting worker is inspected;
	// 3 min when zero.
	Start time.Duration
	// ModelResponse is the silence after which a worker awaiting the model
	// (or finished, errored, unknown) is inspected;
	// 3 min when zero.
	ModelResponse time.Duration
	// Tool is the silence after which a worker running a tool, or in an
	// unknown phase, is terminated; 30 min when zero.
	Tool time.Duration
	// ModelStall, when above zero, is the silence after which a worker
	// awaiting the model is terminated as a session-stall too: for a
	// caller that knows its model answers quickly and would rather retry
	// than wait out the IdleTimeout. Zero (the default) never ends a
	// worker for awaiting the model.
	ModelStall time.Duration
	// RetryLoop is how long a worker may spend retrying a failing model
	// call on its own (a retryWatcher's RetryLoop: codex's
	// "Reconnecting...", Claude Code's api_retry, pi's auto_retry_start)
	// with no answer from the model since its first retry, before pilot
	// ends it. Its verdict then has the class of the failure being
	// retried, with the last retry notice as evidence, and its
	// termination reason is that class. 10 min when zero;
	// negative never ends a worker for retrying.
	RetryLoop time.Duration
}

// RetryLoopLimit returns how long a worker may retry a failing model call
// on its own before pilot ends it, and false if it never does.
func (p StallPolicy) retryLoopLimit() (time.Duration, bool) {
	return stallDefault(p.RetryLoop, defaultRetryLoop)
}

func stallDefault(d, def time.Duration) (time.Duration, bool) {
	switch {
	case d < 0:
		return 0, false
	case d == 0:
		return def, true
	}
	return d, true
}

// InspectAfter returns the silence after which phase is inspected, and
// false if it never is.
func (p StallPolicy) inspectAfter(phase SessionPhase) (time.Duration, bool) {
	switch phase {
	case PhaseStarting:
		return stallDefault(p.Start, defaultStallStart)
	case PhaseToolRunning:
		return 0, false
	}
	return stallDefault(p.ModelResponse, defaultStallModelResponse)
}

// stallTimeout returns the silence after which a worker in phase is
// terminated, and false if silence alone never ends it in that phase.
func (p StallPolicy) stallTimeout(phase SessionPhase) (time.Duration, bool) {
	switch phase {
	case PhaseAwaitingModel:
		return p.ModelStall, p.ModelStall > 0
	case PhaseStarting, PhaseFinished, PhaseErrored:
		return 0, false
	}
	return stallDefault(p.Tool, defaultStallTool)
}

// Check says what to do about a worker that has been silent for silence in
// phase; alreadyInspected says whether this silence was inspected already
// (an inspection is made once per silence).
func (p StallPolicy) check(phase SessionPhase, silence time.Duration, alreadyInspected bool) stallAction {
	if d, ok := p.stallTimeout(phase); ok && silence >= d {
		return stallTerminate
	}
	if d, ok := p.inspectAfter(phase); ok && silence >= d && !alreadyInspected {
		return stallInspect
	}
	return stallNone
}

// SuppressIdleTimeout reports whether the Task's IdleTimeout must not end
// the worker now: its session shows a tool running and the silence is
// still inside the tool threshold (or that threshold is off). A long tool
// run is the tool threshold's to judge, not the idle timeout's.
func (p StallPolicy) suppressIdleTimeout(phase SessionPhase, silence time.Duration) bool {
	if phase != PhaseToolRunning {
		return false
	}
	d, ok := p.stallTimeout(phase)
	return !ok || silence < d
}

// StallInspection is the record of a stall check that acted: what pilot
// saw when it inspected a silent worker or terminated it. Its JSON form
// goes into the run's record and events.
type StallInspection struct {
	// Action is what the check did: "inspect" or "terminate".
	Action             string       `json:"action"`
	SilenceSeconds     float64      `json:"silence_seconds"`
	Phase              SessionPhase `json:"phase"`
	Reason             string       `json:"reason"`
	PendingToolCallIDs []string     `json:"pending_tool_call_ids"`
	// StreamTail is the last 2048 bytes (at most) of the worker's
	// output, cut at a character boundary. The caller redacts secrets
	// before passing it in.
	StreamTail string `json:"stream_tail"`
}

// newStallInspection builds the record of action taken after silence, in
// the session state st, with the end of the worker's stream.
func newStallInspection(action stallAction, st SessionState, silence time.Duration, stream []byte) StallInspection {
	if len(stream) > stallTailBytes {
		stream = stream[len(stream)-stallTailBytes:]
		for i := 0; i < utf8.UTFMax && len(stream) > 0 && !utf8.RuneStart(stream[0]); i++ {
			stream = stream[1:]
		}
	}
	return StallInspection{
		Action:             action.String(),
		SilenceSeconds:     silence.Seconds(),
		Phase:              st.Phase,
		Reason:             st.Reason,
		PendingToolCallIDs: append([]string{}, st.PendingToolCallIDs...),
		StreamTail:         string(stream),
	}
}

// stallClock measures a worker's silence for a StallPolicy and remembers
// whether the current silence was inspected. Feed it the worker's
// activity only (see the top of this file); time is passed in, so tests
// need no clock. It is for one goroutine at a time.
type stallClock struct {
	last      time.Time
	size      int64
	inspected bool
}

// newStallClock starts a clock at start, the worker's start, with no
// session file seen yet.
func newStallClock(start time.Time) *stallClock {
	return &stallClock{last: start, size: -1}
}

// Output records that the worker wrote to stdout or stderr at now.
func (c *stallClock) Output(now time.Time) { c.active(now) }

// SessionSize records the size of the worker's native session file seen at
// now, or -1 when there is none. A size other than the last one seen is
// activity: the file grew, appeared, or was rewritten.
func (c *stallClock) SessionSize(size int64, now time.Time) {
	if size < 0 {
		size = -1
	}
	if size != c.size {
		c.size = size
		c.active(now)
	}
}

func (c *stallClock) active(now time.Time) {
	if now.After(c.last) {
		c.last = now
	}
	c.inspected = false
}

// Silence returns the time from the last activity to now.
func (c *stallClock) Silence(now time.Time) time.Duration {
	if d := now.Sub(c.last); d > 0 {
		return d
	}
	return 0
}

// Check applies p to the silence at now in phase. An inspection is
// returned once per silence: the clock remembers it until the next
// activity.
func (c *stallClock) Check(p StallPolicy, phase SessionPhase, now time.Time) stallAction {
	a := p.check(phase, c.Silence(now), c.inspected)
	if a == stallInspect {
		c.inspected = true
	}
	return a
}
