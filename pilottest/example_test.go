package pilottest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

// jsonlRunner is a complete third-party runner for a made-up agent CLI,
// "jsonl-agent", that prints one JSON event per line:
//
//	{"type":"tool","id":"t1"}          a tool call starts
//	{"type":"tool_done","id":"t1"}     it ends
//	{"type":"done","answer":"..."}     the task is finished
//	{"type":"error","message":"..."}   the model call failed
//
// It uses only pilot's exported API, as the built-in runners (package
// agents) do.
type jsonlRunner struct{}

func (jsonlRunner) Name() string { return "jsonl-agent" }

func (jsonlRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	prog := "jsonl-agent"
	if a.Provider.Binary != "" {
		prog = a.Provider.Binary
	}
	argv := append([]string{prog, "--mode", string(a.Task.Mode)}, a.Provider.Args...)
	return &pilot.Command{Argv: append(argv, a.Prompt), Watcher: &jsonlWatcher{}}, nil
}

// jsonlWatcher follows one worker's events. It is a pilot.Watcher, a
// Watcher with Diagnose (its error events are the evidence) and a
// pilot.PhaseWatcher (an open tool call is tool-running, for the stall
// policy).
type jsonlWatcher struct {
	answer, failure string
	done, seen      bool
	open            []string
}

type jsonlEvent struct {
	Type, ID, Answer, Message string
}

func (w *jsonlWatcher) Line(l pilot.Line) {
	var ev jsonlEvent
	if l.Stream != pilot.Stdout || json.Unmarshal(l.Data, &ev) != nil {
		return
	}
	w.seen = true
	switch ev.Type {
	case "tool":
		w.open = append(w.open, ev.ID)
	case "tool_done":
		w.open = w.open[:0]
	case "done":
		w.done, w.answer = true, ev.Answer
	case "error":
		w.failure = ev.Message
	}
}

// Diagnose is pilot.Watcher's optional Diagnose: an error event is a failed model
// call, whose message pilot.ClassifyProviderError reads; stderr is read
// by pilot.ClassifyFailure, as for any worker. A CLI's own words for a
// failure would be classified here first.
func (w *jsonlWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	var c pilot.Classification
	var ev jsonlEvent
	switch {
	case s == pilot.Stderr:
		c = pilot.ClassifyFailure(line)
	case json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "error":
		c = pilot.ClassifyProviderError(ev.Message, 0)
	}
	return c, c.Evidence != ""
}

// StreamState implements pilot.PhaseWatcher.
func (w *jsonlWatcher) StreamState() (pilot.SessionState, time.Time, bool) {
	st := pilot.SessionState{Phase: pilot.PhaseAwaitingModel, PendingToolCallIDs: append([]string(nil), w.open...)}
	switch {
	case w.done:
		st.Phase = pilot.PhaseFinished
	case len(w.open) > 0:
		st.Phase = pilot.PhaseToolRunning
	}
	return st, time.Time{}, w.seen
}

func (w *jsonlWatcher) Finish(e pilot.Exit) pilot.Result {
	switch {
	case e.Terminated || e.Signal != 0 || !e.Started || e.Code > 128 && e.Code < 160:
		// Pilot's own policy, a signal, or a 128+N exit decides.
		return pilot.JudgeExit(e)
	case w.done && w.answer != "":
		return pilot.Result{Outcome: pilot.Completed}
	case w.done:
		return pilot.Result{Outcome: pilot.Empty}
	case e.Diagnostic != nil && e.Diagnostic.Evidence != "":
		// classified by Diagnose; judged as pilot judges a failed exit
		return pilot.JudgeExit(pilot.Exit{Started: true, Code: 1, Diagnostic: e.Diagnostic})
	case w.failure != "":
		return pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailGeneric, Source: "jsonl-agent:stdout", Evidence: w.failure}}
	}
	return pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{Class: pilot.FailIncomplete, Source: "jsonl-agent:stdout", Evidence: "jsonl-agent exited without a done event"}}
}

// A complete third-party runner: a Dispatcher given jsonlRunner runs providers of
// runner "jsonl-agent" with it. Here the "CLI" is a shell script that
// prints a tool call, then a provider error its watcher offers as evidence.
func Example_runner() {
	runs, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(runs)
	script := runs + "/jsonl-agent"
	os.WriteFile(script, []byte(`#!/bin/sh
echo '{"type":"tool","id":"t1"}'
echo '{"type":"tool_done","id":"t1"}'
echo '{"type":"error","message":"API Error: 429 Too Many Requests (rate limit)"}'
exit 1
`), 0o700)
	reg, _ := pilot.NewRegistry(pilot.Provider{Name: "mine", Runner: "jsonl-agent", Binary: script})
	d := &pilot.Dispatcher{Providers: reg, Runners: []pilot.Runner{jsonlRunner{}}, RunDir: runs}
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "mine", Mode: pilot.ModeCode, Prompt: "fix it", Workdir: runs})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verdict, v.FailureClass, v.FailureSource)
	fmt.Println(v.EvidenceSource, v.EvidenceExcerpt)
	// Output:
	// error provider-rate-limit provider-terminal-diagnostic
	// jsonl-agent:stdout API Error: 429 Too Many Requests (rate limit)
}

// Orchestration tested without a process: a Fanout (or the retry package,
// or your own scheduler) over a fake TaskDispatcher that answers from a
// script. Here one provider's jobs fail with a rate limit.
func ExampleDispatchFunc() {
	fake := pilottest.DispatchFunc(func(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
		v := pilot.Verdict{Provider: t.Provider, Mode: t.Mode, Verdict: pilot.Completed}
		if t.Provider == "flaky" {
			v.Verdict, v.FailureClass = pilot.Failed, pilot.FailProviderRateLimit
		}
		return v, nil
	})
	f := &pilot.Fanout{Dispatcher: fake, MaxParallel: 2}
	vs, err := f.Run(context.Background(), []pilot.Job{
		{Task: pilot.Task{Provider: "steady", Mode: pilot.ModeReview, Prompt: "review"}},
		{Task: pilot.Task{Provider: "flaky", Mode: pilot.ModeReview, Prompt: "review"}},
	})
	if err != nil {
		panic(err)
	}
	for _, r := range vs {
		if v := r.Verdict; v.Verdict.Success() {
			fmt.Println(v.Job, v.Verdict)
		} else {
			fmt.Println(r.Job, r.Verdict.Verdict, r.FailureClass)
		}
	}
	// Output:
	// steady:review completed
	// flaky:review error provider-rate-limit
}
