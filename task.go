package pilot

// The task a Dispatcher runs, and its validation.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
)

// EnvRunID is set in every worker's environment to its run id. pilot also
// uses it to recognise the worker's descendants.
const EnvRunID = "PILOT_RUN_ID"

// A Task is one bounded piece of work for one provider.
type Task struct {
	// Provider is the provider's name in the Dispatcher's registry.
	Provider string
	// Mode is the kind of work; required.
	Mode Mode
	// TaskFile is a file holding the task text, and Prompt is the text
	// itself; set one (if both are set, TaskFile wins for {task_file} and
	// Prompt for {prompt}).
	TaskFile string
	Prompt   string
	// Workdir is the directory the worker runs in; empty means the
	// current directory.
	Workdir string
	// Timeout bounds the whole run and IdleTimeout the time without any
	// output; zero means the Dispatcher's defaults. Negative disables.
	Timeout     time.Duration
	IdleTimeout time.Duration
	// MaxTokens and MaxCostUSD cap what the worker may spend: past either,
	// by the usage its stream reports as it runs (every token it counts:
	// input, output, cache reads and writes; the cost in US dollars),
	// pilot ends it as budget-exceeded. Zero means no cap. A cap the
	// runner cannot follow while the worker runs (see Watcher's Usage) is an
	// error: nothing starts.
	MaxTokens  int64
	MaxCostUSD float64
	// MemoryLimit bounds the resident memory of the worker's whole process
	// tree: past it, pilot ends the tree as it ends a timeout, with class
	// FailMemoryLimit. Zero means the provider's MemoryLimit; negative
	// disables. Pilot samples the tree every Dispatcher.Heartbeat, so a
	// tree may overshoot between samples. Linux only: elsewhere a limit
	// fails the dispatch (an error matching [errors.ErrUnsupported]), spawning nothing.
	MemoryLimit size.Bytes
	// Label is a free-form name carried into events and the verdict.
	Label string
	// Group names the fanout or graph the task is a job of, and GroupJob
	// the job's name in it, for its record ("group", "group_job"): a
	// reader of the run history gathers a group's runs by them. Empty
	// means none; Dispatch does not use them otherwise.
	Group, GroupJob string
	// Sandbox is how far the worker is confined; empty means the
	// provider's mode, else the Dispatcher's, else sandbox.Secrets. A
	// mode set here that the machine cannot enforce fails the dispatch
	// (*sandbox.UnavailableError), spawning nothing.
	Sandbox sandbox.Mode
	// Resume continues an earlier session instead of starting a new one:
	// the Resume field of that run's Verdict, from a provider of the same
	// runner. That is the CLI's session id, or a path: pi's session file,
	// or for an isolated worker (whose sessions live in its own run
	// directory) its session file or store, which the runner carries over
	// into the new worker's config dir. It is required in ModeResume,
	// where the worker may write as in ModeCode; other modes may set it
	// too. A runner that cannot resume refuses it.
	Resume string

	// Key names the task for layers that keep state about it across
	// attempts and restarts (the retry package's budgets, a scheduler's
	// jobs); empty means each derives one. Dispatch does not use it.
	Key string
	// Lineage links this attempt to the attempts of the same task before
	// it, for its record (retry_key, attempt, previous_record,
	// resumed_from, resume_fallback). A retry layer sets it; zero means
	// a first attempt of its own.
	Lineage Lineage
	// Observer, when set, receives this dispatch's events after the
	// Dispatcher's Observer, under the same rules. Orchestration layers
	// use it to follow one task (Fanout's OnEvent does).
	Observer func(Event)
}

// Lineage is what an attempt's record says of the attempts before it. It
// lives in the root, not in retry, because the record is the root's and
// layers other than retry (contrib/temporal) set it too.
type Lineage struct {
	// Key names the task and Attempt numbers this attempt (1 for the
	// first).
	Key     string
	Attempt int
	// PreviousRecord is the record of the attempt before; ResumedFrom
	// the record whose session this attempt continues; ResumeFallback
	// why this attempt starts afresh instead of resuming.
	PreviousRecord string
	ResumedFrom    string
	ResumeFallback string
}

func validateTask(t *Task) error {
	if !t.Mode.valid() {
		return fmt.Errorf("pilot: unknown mode: %q (want one of code, explore, test, review, resume)", t.Mode)
	}
	if t.Mode == ModeResume && t.Resume == "" {
		return errors.New("pilot: mode resume needs the session to continue: set Task.Resume to the earlier verdict's \"resume\" value")
	}
	if t.MaxTokens < 0 || t.MaxCostUSD < 0 || t.MaxCostUSD != t.MaxCostUSD {
		return fmt.Errorf("pilot: a negative budget (MaxTokens %d, MaxCostUSD %v): set a positive cap, or 0 for none", t.MaxTokens, t.MaxCostUSD)
	}
	if t.TaskFile == "" && t.Prompt == "" {
		return errors.New("pilot: task has neither a task file nor a prompt: set Task.TaskFile or Task.Prompt")
	}
	if t.TaskFile != "" {
		abs, err := filepath.Abs(t.TaskFile)
		if err != nil {
			return fmt.Errorf("pilot: task file: %w", err)
		}
		st, err := os.Stat(abs)
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("pilot: task file not found: %s", t.TaskFile)
		}
		t.TaskFile = abs
	}
	if t.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("pilot: no workdir given and the current directory is unknown: %w", err)
		}
		t.Workdir = wd
	}
	abs, err := filepath.Abs(t.Workdir)
	if err != nil {
		return fmt.Errorf("pilot: workdir: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return fmt.Errorf("pilot: workdir is not an existing directory: %s", t.Workdir)
	}
	t.Workdir = abs
	return nil
}
