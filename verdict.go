package pilot

import (
	"encoding/json"
	"time"

	"github.com/pilotworkers/pilot/internal/jsonw"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
)

// Outcome says whether a worker's run did its job. It is the "verdict" field
// of the JSON contract.
type Outcome string

// The outcomes. Completed and StepCappedPartial count as success.
const (
	// Completed: the worker finished and produced a result.
	Completed Outcome = "completed"
	// StepCappedPartial: the worker stopped at its own step or turn limit
	// with partial work done.
	StepCappedPartial Outcome = "step_capped_partial"
	// Empty: the worker exited cleanly but produced nothing.
	Empty Outcome = "empty"
	// Failed: the run failed; FailureClass says why. Its JSON form is "error".
	Failed Outcome = "error"
)

// Success reports whether o counts as success (completed or
// step_capped_partial), the rule behind the CLI's exit code 0.
func (o Outcome) Success() bool { return o == Completed || o == StepCappedPartial }

// FailureClass says why a run failed. The names are part of the JSON contract.
type FailureClass string

// The failure classes pilot reports.
const (
	// FailTimeout: the wall-clock limit (Task.Timeout) ran out and pilot
	// terminated the worker.
	FailTimeout FailureClass = "timeout"
	// FailIdleTimeout: the worker wrote nothing for Task.IdleTimeout and
	// pilot terminated it.
	FailIdleTimeout FailureClass = "idle-timeout"
	// FailCancelled: the caller's context was cancelled and pilot
	// terminated the worker.
	FailCancelled FailureClass = "cancelled"
	// FailSpawn: the worker could not be started (no such program, not
	// executable, bad workdir).
	FailSpawn FailureClass = "spawn-failed"
	// FailProcessTerminated: the worker died from a signal pilot did not
	// send.
	FailProcessTerminated FailureClass = "process-terminated"
	// FailGeneric: the worker failed and nothing more specific is known.
	FailGeneric FailureClass = "generic-error"
	// FailIncomplete: the worker exited 0 but its own stream never said
	// the task finished (codex without turn.completed or turn.failed, pi
	// without a final assistant message, Claude without a result).
	FailIncomplete FailureClass = "incomplete"
	// FailPilot: pilot itself could not run the job (its worktree, git,
	// the state store, the run directory): a verdict a layer over
	// Dispatch makes up, with pilot's error as the evidence.
	FailPilot FailureClass = "pilot-error"
	// FailBudget: the worker spent past Task.MaxTokens or Task.MaxCostUSD
	// and pilot terminated it; the evidence is the usage.
	FailBudget FailureClass = "budget-exceeded"
	// FailMemoryLimit: the resident memory of the worker's process tree
	// went past its memory limit (Task.MemoryLimit, else the provider's)
	// and pilot terminated it. The evidence names the tree's memory and
	// the process that held the most.
	FailMemoryLimit FailureClass = "memory-limit"
)

// Verdict is what one dispatch of one worker, one attempt, came to. Read it
// in this order:
//
//  1. Verdict: did it work (Completed, StepCappedPartial) or not (Empty,
//     Failed)?
//  2. FailureClass, FailureSource and the evidence: why not.
//  3. ExitCode and Signal: how the worker process ended. Both are unset when
//     it never started. A worker pilot had to kill has Signal set.
//  4. Record: the run directory's record.json, with stream.log and
//     events.log beside it, for everything else.
//
// The JSON form is the pilot-workers verdict contract
// ({"type":"worker_runner.verdict", ...}). The layers above an attempt keep
// their own facts in types that embed a Verdict: Fanout's JobResult, the
// retry package's Result.
type Verdict struct {
	Type string `json:"type"` // always event.Verdict
	// Job names a Fanout's job: Job.Name, else "provider:mode".
	Job      string `json:"job,omitempty"`
	Provider string `json:"provider"`
	Mode     Mode   `json:"mode"`
	RunID    string `json:"run_id,omitempty"`
	Label    string `json:"label,omitempty"`
	// TaskFile is the task file of a Fanout's job (Task.TaskFile).
	TaskFile string  `json:"task_file,omitempty"`
	Verdict  Outcome `json:"verdict"`

	// ExitCode is the worker's exit status; nil when it was killed by a
	// signal or never started.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the worker ("SIGKILL"), if any.
	Signal string `json:"signal,omitempty"`

	// Failure says why the run failed, with the proof; it is empty for a
	// successful run (except TransportConfirmed, always false then).
	Failure

	// StderrTail is the last 500 characters (at most) of the worker's
	// stderr, secrets redacted.
	StderrTail string `json:"stderr_tail"`
	DurationMS int64  `json:"duration_ms"`
	// RunDirBytes is the record's run_dir_bytes: the run directory's size.
	RunDirBytes int64 `json:"run_dir_bytes"`

	// PeakRSSBytes is the most resident memory the worker's process tree
	// was seen to hold (see [Dispatcher].Heartbeat), and PeakRSSProcess
	// the process of the tree that held the most then; zero and nil where
	// pilot does not measure it (all but Linux, but for the worker's own
	// peak on darwin).
	PeakRSSBytes   int64         `json:"peak_rss_bytes,omitempty"`
	PeakRSSProcess *size.Process `json:"peak_rss_process,omitempty"`

	// Record is the path of the run's record.json.
	Record string `json:"record,omitempty"`

	// SessionPhase is the phase of the worker's native session when it
	// ended (for a session-stall, the phase at the kill).
	SessionPhase SessionPhase `json:"session_phase,omitempty"`

	// Leftovers counts processes of the worker's tree that were still
	// alive after the worker exited and that pilot killed (on darwin, 1
	// for any number: see the package doc's Process trees).
	Leftovers int `json:"leftovers,omitempty"`
	// OutputIncomplete is set when the worker's output pipes stayed open
	// after its tree was gone, quiet for the wait delay or giving output
	// past 15 × it, and pilot stopped reading them.
	OutputIncomplete bool `json:"output_incomplete,omitempty"`

	// SessionID is the worker's own session id, when its stream gave one;
	// Resume is what Task.Resume takes to continue the session: the
	// session id, or a path (pi's session file; an isolated worker's
	// session file or store, see Task.Resume).
	SessionID string `json:"session_id,omitempty"`
	Resume    string `json:"resume,omitempty"`
	// Usage is the token usage and cost the worker reported, if any.
	Usage *Usage `json:"usage,omitempty"`
	// ToolCalls counts the tool calls of the worker's last turn that its
	// session or stream showed (asked for, answered or pending); zero
	// with no output tokens means the attempt did no work. SessionGone is
	// Result.SessionGone. Neither is part of the JSON contract.
	ToolCalls   int    `json:"-"`
	SessionGone string `json:"-"`

	// Sandbox is what confined the worker, as its record says.
	Sandbox *sandbox.Report `json:"sandbox,omitempty"`
}

// Usage is the tokens a worker reported using, and the cost where its CLI
// reports one. Cumulative counts (codex's turn.completed) are the last
// report, not a sum.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	// CostUSD is nil when the CLI reports no cost.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Failure is why a run failed and the proof of it. Verdict and Record both
// carry it, with the same JSON fields.
type Failure struct {
	FailureClass FailureClass `json:"failure_class,omitempty"`
	// FailureSource says what decided FailureClass ("pilot-policy",
	// "process-termination", "provider-terminal-diagnostic", ...).
	FailureSource string `json:"failure_source,omitempty"`
	// TransportConfirmed is set when the evidence shows the provider's
	// transport itself failed (connection, stream, 5xx, 429).
	TransportConfirmed bool `json:"provider_transport_failure_confirmed"`
	// EvidenceSource ("pi:stderr") and EvidenceExcerpt (the exact line,
	// secrets redacted) are the proof of FailureClass, when there is one.
	EvidenceSource  string `json:"failure_evidence_source,omitempty"`
	EvidenceExcerpt string `json:"failure_evidence_excerpt,omitempty"`
	// EvidenceNote is pilot's own gloss of the excerpt, when the runner
	// added one to classify it ("provider stream closed"): never part of
	// the excerpt, which is the CLI's words.
	EvidenceNote string `json:"failure_evidence_note,omitempty"`
	// RetryAfterMS is the delay the provider asked for before a retry.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`

	// TerminationSignal names the signal that ended the worker, seen in
	// its wait status or (TerminationSignalInferred) read from a 128+N
	// exit code; TerminationInitiator is "pilot" when pilot sent it (then
	// TerminationReason says why) and "unknown" otherwise.
	TerminationSignal         string       `json:"termination_signal,omitempty"`
	TerminationSignalInferred bool         `json:"termination_signal_inferred,omitempty"`
	TerminationInitiator      string       `json:"termination_initiator,omitempty"`
	TerminationReason         FailureClass `json:"termination_reason,omitempty"`
}

// Started is the event that announces a running worker. Its JSON form is the
// pilot-workers started contract.
type Started struct {
	Type      string    `json:"type"` // always event.Started
	Job       string    `json:"job,omitempty"`
	Provider  string    `json:"provider"`
	Mode      Mode      `json:"mode"`
	RunID     string    `json:"run_id"`
	Label     string    `json:"label,omitempty"`
	Pid       int       `json:"pid"`
	Runner    string    `json:"runner"`
	Model     string    `json:"model,omitempty"`
	Workdir   string    `json:"workdir"`
	RunDir    string    `json:"run_dir"`
	Record    string    `json:"record"`
	StartedAt time.Time `json:"started_at"`
}

// An Event is one thing that happened during a dispatch. Events reach
// Dispatcher.Observer, Task.Observer and the run's events.log. Its Type is
// one of:
//
//	event.Started            Started is set (the started contract)
//	event.Verdict            Verdict is set (the verdict contract)
//	event.Phase              Session holds the worker's new phase
//	event.StallInspection    Inspection holds the stall check that acted
//	event.IdleDeferred       the idle timeout came while a tool runs inside
//	                        the tool threshold (once per silence)
//	event.Terminate          pilot is ending the worker (Message says why
//	                        and with which signal)
//	event.Memory             Memory holds the resident memory of the
//	                        worker's tree, when it moved since the last
//	                        such event (Linux)
//	event.Leftovers          the worker exited with descendants still
//	                        running, which pilot killed
//	event.Dropped            a slow observer missed events (Message says
//	                        how many; events.log has them all)
//	event.FanoutWarning      a Fanout's warning (test jobs sharing a
//	                        workdir), to Fanout.OnEvent only
//	event.FanoutJobStarting  a Fanout's job has its slot and is starting
//	                        (its worktree being made, its worker spawned),
//	                        to Fanout.OnEvent only
//	event.FanoutJobWaiting   a Fanout's job waits before it starts (Message
//	                        says for what: "waiting for a slot: ...",
//	                        "waiting for memory: ...", a provider's slot or
//	                        reset), once per wait, to Fanout.OnEvent only
//
// and the retry package's EventRetry, EventResumeFallback and EventBlocked,
// with Retry set. Other kinds carry Message.
type Event struct {
	Type    string
	RunID   string
	Time    time.Time
	Started *Started
	Verdict *Verdict
	Message string
	// Session is the new session state of a phase event; Inspection the
	// stall check of a stall_inspection event.
	Session    *SessionState
	Inspection *StallInspection
	// Memory is the tree's memory of a memory event.
	Memory *size.Tree
	// Retry is a retry layer's account of its event (the retry
	// package's *retry.Info), written as "retry".
	Retry any
}

// appendJSON appends e as MarshalJSON writes it. The frequent events, a
// phase change or a message, are written without Marshal's reflection
// (a dispatch's phase events cost a streaming worker's pilot a sixth of
// its CPU through Marshal); the others go through it.
func (e *Event) appendJSON(dst []byte) ([]byte, error) {
	if e.Started == nil && e.Verdict == nil && e.Inspection == nil && e.Memory == nil && e.Retry == nil {
		b := append(dst, `{"type":`...)
		b = jsonw.String(b, e.Type)
		b = append(b, `,"run_id":`...)
		b = jsonw.String(b, e.RunID)
		b = append(b, `,"time":`...)
		if b, ok := jsonw.Time(b, e.Time); ok {
			if e.Message != "" {
				b = append(b, `,"message":`...)
				b = jsonw.String(b, e.Message)
			}
			if e.Session != nil {
				b = append(b, `,"session":`...)
				b = e.Session.appendJSON(b)
			}
			return append(b, '}'), nil
		}
	}
	data, err := e.MarshalJSON()
	return append(dst, data...), err
}

// MarshalJSON writes started and verdict events as their contract objects
// and other events as {"type","run_id","time","message"}.
func (e Event) MarshalJSON() ([]byte, error) {
	switch {
	case e.Started != nil:
		return json.Marshal(e.Started)
	case e.Verdict != nil:
		return json.Marshal(e.Verdict)
	}
	return json.Marshal(struct {
		Type       string           `json:"type"`
		RunID      string           `json:"run_id"`
		Time       time.Time        `json:"time"`
		Message    string           `json:"message,omitempty"`
		Session    *SessionState    `json:"session,omitempty"`
		Inspection *StallInspection `json:"inspection,omitempty"`
		Memory     *size.Tree       `json:"memory,omitempty"`
		Retry      any              `json:"retry,omitempty"`
	}{e.Type, e.RunID, e.Time, e.Message, e.Session, e.Inspection, e.Memory, e.Retry})
}
