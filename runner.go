package pilot

import (
	"context"
	"time"
)

// A Runner adapts one kind of worker CLI: it builds the command for one
// attempt and interprets that attempt's output. Runners must be safe for
// concurrent use; per-attempt state lives in the Watcher that Command
// returns.
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
	// Watcher interprets the worker's output. Nil means ExitCodeWatcher.
	Watcher Watcher
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
	// Truncated is set; stream.log still has the whole line.
	Data      []byte
	Size      int64 // the whole line's length
	Truncated bool
}

// Exit describes how an attempt ended, as pilot saw it.
type Exit struct {
	// Started is false when the worker never ran (then Err says why).
	Started bool
	Err     error
	// Code is the exit status; -1 when the worker died from a signal.
	Code int
	// Signal is the signal that ended the worker, or 0.
	Signal int
	// Terminated is set when pilot ended the worker itself, with Reason
	// (FailTimeout, FailIdleTimeout or FailCancelled).
	Terminated bool
	Reason     FailureClass
	// StdoutBytes and StderrBytes count the output read.
	StdoutBytes, StderrBytes int64
	Duration                 time.Duration
}

// Result is a Watcher's judgement of an attempt.
type Result struct {
	Outcome      Outcome
	FailureClass FailureClass // required when Outcome is Failed
	Evidence     *Evidence
}

// A Watcher interprets one attempt's output. Pilot calls Line for every
// output line, in order within each stream, and Finish once at the end. It
// never calls them concurrently.
type Watcher interface {
	Line(l Line)
	Finish(e Exit) Result
}

// ExitCodeWatcher judges an attempt by its exit status alone: exit 0 with
// output on stdout is Completed, exit 0 with no stdout is Empty, and
// anything else is Failed. It is the command runner's watcher.
type ExitCodeWatcher struct{}

// Line implements Watcher.
func (ExitCodeWatcher) Line(Line) {}

// Finish implements Watcher.
func (ExitCodeWatcher) Finish(e Exit) Result { return JudgeExit(e) }

// JudgeExit is the judgement every runner falls back on when the worker's own
// output says nothing more: pilot's termination reason first, then how the
// process ended.
func JudgeExit(e Exit) Result {
	switch {
	case !e.Started:
		r := Result{Outcome: Failed, FailureClass: FailSpawn}
		if e.Err != nil {
			r.Evidence = &Evidence{Source: "pilot", Line: e.Err.Error()}
		}
		return r
	case e.Terminated:
		return Result{Outcome: Failed, FailureClass: e.Reason}
	case e.Signal != 0:
		return Result{Outcome: Failed, FailureClass: FailProcessTerminated}
	case e.Code != 0:
		return Result{Outcome: Failed, FailureClass: FailGeneric}
	case e.StdoutBytes == 0:
		return Result{Outcome: Empty}
	}
	return Result{Outcome: Completed}
}
