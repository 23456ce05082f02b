package pilot

import (
	"context"
	"time"

	"github.com/pilotworkers/pilot/sandbox"
)

// A Runner adapts one kind of worker CLI: it builds the command for one
// attempt and interprets that attempt's output. Runners must be safe for
// concurrent use; per-attempt state lives in the Watcher that Command
// returns.
//
// A Runner whose CLI keeps files of its own or connects to a default
// endpoint may also have a method
//
//	SandboxNeeds(p Provider, home string) sandbox.Needs
//
// which tells the sandbox what the CLI needs for a worker of p whose home is
// home; pilot also calls it with a zero Provider to learn the CLI's own
// paths, which it guards from every other worker. The agents package's
// runners have it; a runner without it gets the workdir, its run directory
// and its temp dir only.
type Runner interface {
	// Name is the runner's key in providers files ("command", "pi", ...).
	Name() string
	// Command builds the worker command for one attempt. It must not start
	// anything.
	Command(ctx context.Context, a Attempt) (*Command, error)
}

// An Attempt is everything a Runner may use to build one worker command.
type Attempt struct {
	Task     Task
	Provider Provider

	// RunID names this attempt; RunDir is its directory, which exists.
	RunID  string
	RunDir string

	// TaskFile is a file holding the task text and Prompt is that text.
	// Both are always set: pilot reads the file when the task gave only a
	// file, and writes RunDir/task.md when it gave only a prompt. That
	// file exists before the worker starts if the Command's argv, env or
	// stdin names it; otherwise it is written while the worker starts, so
	// a Runner must not read it in Command (use Prompt).
	TaskFile string
	Prompt   string

	// Workdir is the absolute directory the worker runs in.
	Workdir string

	// SessionPath is a path under RunDir where a runner may keep the
	// worker's native session (pi --session, say). Nothing is there yet.
	SessionPath string

	// Sandbox is the mode pilot's sandbox confines the worker in:
	// sandbox.Off when pilot applies no filesystem rules to it (mode off,
	// or a default mode this machine cannot enforce). A CLI whose own
	// sandbox cannot run inside pilot's (codex's bubblewrap mounts, which
	// Landlock forbids) leaves it off when this is not Off.
	Sandbox sandbox.Mode
}

// A Command is a worker command line, as built by a Runner.
type Command struct {
	// Argv is the program and its arguments. A program name without a
	// slash is looked up in the worker environment's PATH.
	Argv []string
	// Env is extra environment from the runner (a per-worker config dir,
	// say). It is applied after the provider's env, before the credential.
	Env map[string]string
	// Stdin is the worker's standard input; nil means /dev/null.
	Stdin []byte
	// Watcher interprets the worker's output. Nil means judging by the exit alone ([JudgeExit]).
	Watcher Watcher
	// SessionPath is the worker's native session file, if it keeps one:
	// pilot watches it every heartbeat, and its growth is activity for the
	// stall policy and the idle timeout. ReadSession, when set, reads the
	// file's state (its phase) each time it has changed; a runner sets it
	// for a session format it knows (pilot's agents package reads pi's).
	// Without it the phase comes from the Watcher ([PhaseWatcher]) alone.
	SessionPath string
	ReadSession func() (SessionState, error)
	// SecretEnv names more variables that receive the provider's secret,
	// for a CLI that reads its key from a fixed name (ANTHROPIC_API_KEY,
	// say) when the provider's CredentialEnv is another. Like
	// CredentialEnv, they are set last and redacted everywhere.
	SecretEnv []string
}

// Stream names one of the worker's output streams.
type Stream string

// The two output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// A Line is one line of worker output, without its "\n" (and without a
// trailing "\r"). Data is valid only during the call that receives it;
// copy it to keep it.
type Line struct {
	Stream Stream
	// Data is the line. When the line is longer than the Dispatcher's
	// MaxLineBytes, Data holds only its first MaxLineBytes bytes and
	// Truncated is set; stream.log still has the whole line. Data is
	// valid only during the call that receives the Line: pilot reuses its
	// read buffers, so a Watcher or OnLine copies what it keeps.
	Data      []byte
	Size      int64 // the whole line's length
	Truncated bool
}

// Exit describes how an attempt ended, as pilot saw it.
type Exit struct {
	// Runner is the runner's name ("command", "pi", ...).
	Runner string
	// Started is false when the worker never ran (then Err says why).
	Started bool
	Err     error
	// Code is the exit status; -1 when the worker died from a signal.
	Code int
	// Signal is the signal that ended the worker, or 0.
	Signal int
	// Terminated is set when pilot ended the worker itself, with Reason
	// (FailTimeout, FailIdleTimeout, FailSessionStall, FailMemoryLimit or
	// FailCancelled).
	Terminated bool
	Reason     FailureClass
	// Diagnostic is the strongest terminal diagnostic pilot found in the
	// worker's output (a [Watcher]'s Diagnose, [ClassifyFailure]), if any.
	Diagnostic *Classification
	// StdoutBytes and StderrBytes count the output read.
	StdoutBytes, StderrBytes int64
	Duration                 time.Duration
}

// Failure sources: what decided a verdict's failure class (the
// "failure_source" field).
const (
	// sourcePilotPolicy: pilot ended the worker (timeout, idle timeout,
	// stall, cancel).
	sourcePilotPolicy = "pilot-policy"
	// sourceProcessTermination: the worker died from a signal, seen or
	// inferred from a 128+N exit code.
	sourceProcessTermination = "process-termination"
	// sourceProviderDiagnostic: a provider line in the worker's
	// diagnostics (stderr, or an error event of its JSON stream).
	sourceProviderDiagnostic = "provider-terminal-diagnostic"
	// sourceTerminalDiagnostic: a recognised error line of no provider
	// class.
	sourceTerminalDiagnostic = "terminal-diagnostic"
	// sourceWorkerReport: the worker's own stream says how it ended (pi's
	// stopReason, Claude's result event).
	sourceWorkerReport = "worker-report"
	// sourceExitCode: an exit code with a documented meaning.
	sourceExitCode = "exit-code"
	// sourceExitStatus: a non-zero exit and nothing more specific.
	sourceExitStatus = "exit-status"
	// sourceSpawn: the worker could not be started.
	sourceSpawn = "spawn"
)

// Result is a Watcher's judgement of an attempt. A zero Result leaves the
// judgement to [JudgeExit].
type Result struct {
	Outcome Outcome
	// Classification is why the attempt failed, when Outcome is Failed:
	// its Class (required then) and the proof, as a diagnoser gives them.
	Classification
	// DecidedBy says what decided the class, as the verdict's
	// failure_source gives it: empty for a failure the worker's own stream
	// reports ("worker-report"); "exit-code" for an exit code with a
	// documented meaning; JudgeExit sets the others.
	DecidedBy string

	// SessionID is the worker's own id for its session (codex's thread
	// id, Claude's session_id), when its stream gave one.
	SessionID string
	// Resume is what Task.Resume takes to continue this session when it
	// is not SessionID: a path (pi's session file; an isolated worker's
	// session file or store). Empty means SessionID.
	Resume string
	// Usage is the token usage (and cost) the worker reported, if any.
	Usage *Usage
	// SessionGone is the worker's own line saying that the session it was
	// asked to resume does not exist (Claude Code's "No conversation
	// found ...", pi's "No session found matching ..."), if it printed
	// one: a retry layer then starts a fresh session instead.
	SessionGone string
}

// A Watcher interprets one attempt's output. Pilot calls Line for every
// output line, in order within each stream, and Finish once at the end. It
// never calls them concurrently.
//
// Pilot applies its own policy around the Watcher: a worker that pilot
// ended (timeout, idle timeout, stall, cancel) is judged by why pilot ended
// it, whatever Finish says.
//
// A Watcher may have more methods, which pilot finds by type assertion:
//
//	Diagnose(s Stream, line string) (c Classification, ok bool)
//	Reports() (tokens, cost bool); Usage() Usage
//	RetryLoop() (loop RetryLoop, ok bool)
//	StreamState() (st SessionState, quietUntil time.Time, ok bool) // a PhaseWatcher
//	PassedStates() []SessionState // the phases the stream left since the last call
//
// Diagnose classifies the worker's output lines itself: which lines are
// its CLI's reports of how the run went wrong, and what class they prove.
// Without it, each stderr line is classified with [ClassifyFailure] and no
// stdout line counts; of all the lines, the strongest class ([Strongest])
// becomes the Exit's Diagnostic. Pilot calls it for every line, right
// before Line; line is valid only during the call (pilot copies what it
// returns). Evidence must be the CLI's own words; Source, when empty,
// becomes "<runner>:<stream>".
//
// Reports and Usage give the usage the stream has reported so far, so
// that pilot can hold Task.MaxTokens and Task.MaxCostUSD: Reports says
// what the stream reports as it goes (tokens, cost, or both).
//
// RetryLoop says when the worker is retrying a failed model call on its
// own (codex's "Reconnecting...", Claude Code's api_retry, pi's
// auto_retry_start, gemini-cli's "Attempt N failed"): its retries since
// the model last answered, ok false when it is not retrying. A worker that
// retries for longer than StallPolicy.RetryLoop is ended, and one pilot
// ends for any reason but cancellation while it retries is judged by the
// failure it was retrying (see [StallPolicy]). All of pilot's agent CLI
// watchers have it.
//
// Pilot calls none of them concurrently with Line or Finish.
type Watcher interface {
	Line(l Line)
	Finish(e Exit) Result
}

// usageWatcher is a Watcher with Reports and Usage (see Watcher).
type usageWatcher interface {
	Watcher
	Reports() (tokens, cost bool)
	Usage() Usage
}

// diagnoser is a Watcher with Diagnose (see Watcher).
type diagnoser interface {
	Watcher
	// Diagnose returns the failure line proves; ok is false when it
	// proves none. Evidence must be the CLI's own words; Source, when
	// empty, becomes "<runner>:<stream>".
	Diagnose(s Stream, line string) (c Classification, ok bool)
}

// A PhaseWatcher is a Watcher that also follows the worker's phase in its
// output stream (codex's open command items, Claude's unanswered tool_use
// blocks, pi's tool_execution events). Pilot asks it on every heartbeat,
// never concurrently with Line, and feeds the answer to the stall policy:
// a native session file, when the Command names one and it has shown more
// than PhaseStarting, wins over the stream.
type PhaseWatcher interface {
	Watcher
	// StreamState returns the phase the stream last showed; ok is false
	// while it has shown none. quietUntil, when not zero, is when a retry
	// the worker announced (pi's auto_retry_start, Claude's api_retry)
	// is due: silence until then is expected, not a stall.
	StreamState() (st SessionState, quietUntil time.Time, ok bool)
}

// retryWatcher is a Watcher with RetryLoop (see Watcher).
type retryWatcher interface {
	Watcher
	// RetryLoop returns the worker's retries since the model last
	// answered; ok is false when the worker is not retrying.
	RetryLoop() (loop RetryLoop, ok bool)
}

// RetryLoop is a worker's run of its own retries of a failing model call.
type RetryLoop struct {
	// Diagnostic is the failure the latest retry was for, classified as a
	// failed model call, with the retry notice as its evidence (generic
	// when the notice names no class).
	Diagnostic Classification
	// Since is when the first retry of the run was seen; Retries counts
	// the notices.
	Since   time.Time
	Retries int
}

// exitCodeWatcher judges an attempt by how the process ended and by its
// terminal diagnostics alone ([JudgeExit]). It is the command runner's
// watcher.
type exitCodeWatcher struct{}

// Line implements Watcher.
func (exitCodeWatcher) Line(Line) {}

// Finish implements Watcher.
func (exitCodeWatcher) Finish(e Exit) Result { return JudgeExit(e) }

// JudgeExit is the judgement every runner falls back on when the worker's
// own stream says nothing more, in this order:
//
//  1. never started: spawn-failed;
//  2. ended by pilot: the reason pilot ended it;
//  3. died from a signal, or exited 128+N (143, 137, 130, ...):
//     process-terminated, even when a provider line was printed on the way
//     out: the signal wins;
//  4. any other non-zero exit: the class of the strongest terminal
//     diagnostic, or generic-error;
//  5. exit 0: completed with output on stdout, empty without.
func JudgeExit(e Exit) Result {
	_, inferred := signalFromExitCode(e.Code)
	switch {
	case !e.Started:
		r := failedBy(FailSpawn, sourceSpawn)
		if e.Err != nil {
			r.Classification.Source, r.Evidence = "pilot", e.Err.Error()
		}
		return r
	case e.Terminated:
		return failedBy(e.Reason, sourcePilotPolicy)
	case e.Signal != 0 || inferred:
		return failedBy(FailProcessTerminated, sourceProcessTermination)
	}
	if e.Code != 0 {
		if d := e.Diagnostic; d != nil && d.Evidence != "" {
			return diagnosticResult(*d)
		}
		return failedBy(FailGeneric, sourceExitStatus)
	}
	if e.StdoutBytes == 0 {
		return Result{Outcome: Empty}
	}
	return Result{Outcome: Completed}
}

// failedBy is a failure of class c that by decided, with no evidence.
func failedBy(c FailureClass, by string) Result {
	return Result{Outcome: Failed, Classification: Classification{Class: c}, DecidedBy: by}
}

// diagnosticResult is the failed Result a diagnostic proves (JudgeExits
// of a non-zero exit with it as the Diagnostic).
func diagnosticResult(d Classification) Result {
	src := sourceTerminalDiagnostic
	if d.Class.Provider() || d.Class == FailContextLimit || d.TransportConfirmed {
		src = sourceProviderDiagnostic
	}
	return Result{Outcome: Failed, Classification: d, DecidedBy: src}
}
