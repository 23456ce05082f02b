package e2e_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
)

// A scenario is one row of issue 7's table: what the scripted model does,
// and what pilot must report for each CLI. The runs are in
// scenarios_run_test.go.
type scenario struct {
	name string
	// model says what the scripted server does, in words; the fakellm
	// script is built from the name in scenarios_run_test.go.
	model string
	// want is the verdict per runner (pi, codex, claude, opencode, gemini, qwen, kilo, copilot):
	// the "pi" row runs on both pi generations (pi-0, pi-1), and a key
	// naming one of them ("pi-1") overrides it for that one. A runner
	// missing from want does not run the scenario.
	want map[string]expect
}

// expect is what pilot must report for one CLI in one scenario.
type expect struct {
	verdict pilot.Outcome
	class   pilot.FailureClass
	// source is the failure's evidence source ("pi:stdout", "pilot"), or
	// sources either of which is right, joined by "|".
	source string
	// phase is a session phase that must be seen during the run (an event
	// or the verdict's SessionPhase); empty means none in particular.
	phase pilot.SessionPhase
	// inspected, when set, is a phase a stall inspection must report.
	inspected pilot.SessionPhase
	// why records the CLI behaviour this row is about (issue 7's "known
	// behaviour"), for the report.
	why string
}

// scenarioCLIs are the runners the scenarios run; clisOf gives each one's
// CLIs.
var scenarioCLIs = []string{"pi", "codex", "claude", "opencode", "gemini", "qwen", "kilo", "copilot"}

func all(e expect) map[string]expect {
	m := make(map[string]expect, len(scenarioCLIs))
	for _, c := range scenarioCLIs {
		e := e
		if e.source == "<cli>:stdout" {
			e.source = c + ":stdout"
		}
		m[c] = e
	}
	return m
}

func with(m map[string]expect, cli string, e expect) map[string]expect {
	m[cli] = e
	return m
}

var completed = expect{verdict: pilot.Completed, phase: pilot.PhaseFinished}

var scenarios = []scenario{
	{name: "ok-one-tool-call", model: "a bash tool call, then text",
		want: all(completed)},
	{name: "two-tool-calls-one-message", model: "one assistant message with two tool calls (bash, read), then text",
		want: all(completed)},
	{name: "long-running-tool", model: "a bash tool call that runs 4 s (past the inspect threshold, under the tool threshold), then text",
		want: all(expect{verdict: pilot.Completed, phase: pilot.PhaseToolRunning,
			why: "phase tool-running while the tool runs; not killed under the tool threshold"})},
	{name: "tool-stall-terminated", model: "a bash tool call that never ends (tail -f /dev/null); a short tool threshold",
		want: all(expect{verdict: pilot.Failed, class: pilot.FailSessionStall, source: "pilot", phase: pilot.PhaseToolRunning,
			why: "the CLIs start tools in their own process group, and codex's and opencode's outlive the CLI on SIGTERM: pilot must kill them"})},
	{name: "silent-before-first-byte", model: "a delay before the first byte longer than the inspect threshold, then text",
		want: all(expect{verdict: pilot.Completed, phase: pilot.PhaseAwaitingModel, inspected: pilot.PhaseAwaitingModel,
			why: "an inspection in awaiting-model, then the answer"})},
	{name: "silent-stall-terminated", model: "no byte at all; a short terminate threshold",
		want: all(expect{verdict: pilot.Failed, class: pilot.FailSessionStall, source: "pilot", phase: pilot.PhaseAwaitingModel,
			why: "session-stall, and the whole process tree gone"})},
	{name: "connection-refused", model: "the base URL's port refuses connections",
		want: with(all(expect{verdict: pilot.Failed, class: pilot.FailProviderConnection, source: "<cli>:stdout",
			why: "pi exits 0 after a model error in JSON mode"}),
			"codex", expect{verdict: pilot.Failed, class: pilot.FailProviderConnection, source: "codex:stdout",
				why: "codex retries a refused connection forever: pilot must end it and still say provider-connection"})},
	{name: "rate-limit-always", model: "HTTP 429 with retry-after on every request",
		want: all(expect{verdict: pilot.Failed, class: pilot.FailProviderRateLimit, source: "<cli>:stdout",
			why: "Claude Code -p reports it as result subtype success with is_error true"})},
	{name: "rate-limit-once", model: "HTTP 429 with retry-after once, then text",
		want: all(expect{verdict: pilot.Completed, phase: pilot.PhaseFinished, why: "the CLI retries and recovers"})},
	{name: "server-error-always", model: "HTTP 500 on every request",
		want: with(all(expect{verdict: pilot.Failed, class: pilot.FailProviderServerError, source: "<cli>:stdout",
			why: "the CLI gives up after its retries and says why"}),
			"opencode", expect{verdict: pilot.Failed, class: pilot.FailProviderServerError, source: "opencode:stdout",
				why: "opencode 1.18.33 does not hang on a 500: it retries 5 times (~65 s, no setting) and then reports APIError statusCode 500; its log's retry lines carry no status"})},
	{name: "mid-stream-disconnect", model: "the connection is dropped mid-stream, on every request",
		want: all(expect{verdict: pilot.Failed, class: pilot.FailProviderStreamDisconnect, source: "<cli>:stdout",
			why: "Claude Code falls back to a non-streaming request after a dropped stream"})},
	{name: "context-overflow", model: "a context-length error body in the API's own shape",
		want: all(expect{verdict: pilot.Failed, class: pilot.FailContextLimit, source: "<cli>:stdout",
			why: "pi may exit right after compaction_start; opencode 1.18.33 tries one compaction, which overflows too, then reports ContextOverflowError twice"})},
}

// wantFor is what scenario s expects of CLI c: its own row, or its
// runner's.
func wantFor(s scenario, c cli) (expect, bool) {
	if e, ok := s.want[c.name]; ok {
		return e, true
	}
	e, ok := s.want[c.runnerName()]
	return e, ok
}

// TestScenarioTable checks the table itself: unique names, a row for every
// scenario CLI, and failure rows that name a class and a source.
func TestScenarioTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range scenarios {
		if seen[s.name] {
			t.Errorf("scenario %q twice", s.name)
		}
		seen[s.name] = true
		for _, c := range scenarioCLIs {
			e, ok := s.want[c]
			if !ok {
				t.Errorf("scenario %q: no expectation for %s", s.name, c)
				continue
			}
			if (e.verdict == pilot.Failed) != (e.class != "") {
				t.Errorf("scenario %q, %s: verdict %q with class %q", s.name, c, e.verdict, e.class)
			}
			if e.class != "" && e.source == "" {
				t.Errorf("scenario %q, %s: class %q without an evidence source", s.name, c, e.class)
			}
			if e.source == "<cli>:stdout" {
				t.Errorf("scenario %q, %s: source placeholder left", s.name, c)
			}
		}
	}
	for _, c := range scenarioCLIs {
		if len(clisOf(c)) == 0 {
			t.Errorf("no CLI runs under the runner %q", c)
		}
	}
	if n := len(clisOf("pi")); n != 2 {
		t.Errorf("%d CLIs run under the pi runner, want both generations (pi-0, pi-1)", n)
	}
}
