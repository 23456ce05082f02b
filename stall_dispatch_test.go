package pilot_test

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pisession"
)

// pi session lines for the fake agent's sess= steps.
const (
	sessHeader     = `{"type":"session","version":3,"id":"s1","timestamp":"2026-07-25T00:00:00.000Z","cwd":"/tmp"}`
	sessUser       = `{"type":"message","id":"u1","parentId":null,"timestamp":"2026-07-25T00:00:01.000Z","message":{"role":"user","content":"go"}}`
	sessToolCall   = `{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-07-25T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call-1","name":"bash","arguments":{}}],"stopReason":"toolUse"}}`
	sessToolResult = `{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-07-25T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"call-1","toolName":"bash","content":[],"isError":false}}`
	sessFinal      = `{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-07-25T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}`
)

// sessionScript returns fake agent steps that write lines to the native
// session file pilot follows ({session_path}).
func sessionScript(lines ...string) []string {
	out := []string{"session={session_path}"}
	for _, l := range lines {
		out = append(out, "sess="+l)
	}
	return out
}

func stallDispatcher(t *testing.T, script ...string) *pilot.Dispatcher {
	d := testDispatcher(t, fakeProvider(t, "pi", script...))
	d.Heartbeat = 10 * time.Millisecond
	return d
}

// test_pi_silent_awaiting_model_is_inspected_without_termination
func TestSilentAwaitingModelIsInspectedNotTerminated(t *testing.T) {
	checkGoroutines(t)
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader, sessUser, sessToolCall, sessToolResult), "await="+release, "out=answer")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{ModelResponse: 50 * time.Millisecond, Tool: 50 * time.Millisecond}
	var once sync.Once
	d.Observer = func(e pilot.Event) {
		if e.Type == pilot.EventStallInspection {
			once.Do(func() { os.WriteFile(release, nil, 0o600) })
		}
	}
	v := dispatch(t, d, task("pi"))
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict = %s (%s), want completed: awaiting a model is never a stall", v.Verdict, v.FailureClass)
	}
	rec := readRecord(t, v)
	got := rec.SessionRecord
	if got == nil {
		t.Fatal("record has no session fields")
	}
	want := pilot.SessionRecord{
		NativeSessionPath:    filepath.Join(filepath.Dir(v.Record), "session.jsonl"),
		SessionPhase:         pilot.PhaseAwaitingModel,
		SessionPhaseReason:   pisession.ReasonAllToolResultsRecorded,
		ExpectedToolCallIDs:  []string{"call-1"},
		CompletedToolCallIDs: []string{"call-1"},
		PendingToolCallIDs:   []string{},
		ActivityState:        pilot.ActivityStreaming,
	}
	opts := cmpIgnoreSessionVolatile()
	if diff := cmp.Diff(want, *got, opts...); diff != "" {
		t.Errorf("record session fields (-want +got):\n%s", diff)
	}
	if got.NativeSessionMtimeNS == nil {
		t.Errorf("native_session_mtime_ns missing")
	}
	if got.StallTimeoutSeconds != nil {
		t.Errorf("stall_timeout_seconds = %v, want null for awaiting-model", *got.StallTimeoutSeconds)
	}
	insp := got.SilenceInspection
	if insp == nil || insp.Action != "inspect" || insp.SilenceSeconds < 0.05 || insp.Phase != pilot.PhaseAwaitingModel {
		t.Errorf("silence_inspection = %+v, want an inspection after >= 50ms in awaiting-model", insp)
	}
}

func cmpIgnoreSessionVolatile() []cmp.Option {
	return []cmp.Option{
		cmp.FilterPath(func(p cmp.Path) bool {
			switch p.Last().String() {
			case ".NativeSessionMtimeNS", ".SilenceInspection", ".StallTimeoutSeconds":
				return true
			}
			return false
		}, cmp.Ignore()),
	}
}

// A long tool run inside the tool threshold is not killed, not even by a
// short idle timeout.
func TestToolRunningUnderTheToolThresholdIsNotKilled(t *testing.T) {
	checkGoroutines(t)
	// The tool runs until pilot has reached the idle timeout in its
	// silence and let it be.
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader, sessUser, sessToolCall), "out=tool started", "await="+release)
	script = append(script, sessionScript(sessToolResult, sessFinal)...)
	script = append(script, "out=done")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{Tool: time.Minute}
	var deferred atomic.Int32
	d.Observer = func(e pilot.Event) {
		if e.Type == pilot.EventIdleDeferred && deferred.Add(1) == 1 {
			os.WriteFile(release, nil, 0o600)
		}
	}
	tk := task("pi")
	// Long enough for the worker to start and write its session on a
	// loaded machine; the silent tool run outlasts it.
	tk.IdleTimeout = 2 * time.Second
	v := dispatch(t, d, tk)
	if deferred.Load() != 1 {
		t.Errorf("%d idle_deferred events, want 1 (once per silence)", deferred.Load())
	}
	if v.Verdict != pilot.Completed {
		t.Errorf("verdict = %s (%s), want completed: the idle timeout must not end a running tool", v.Verdict, v.FailureClass)
	}
	if v.SessionPhase != pilot.PhaseFinished {
		t.Errorf("session phase = %s, want finished", v.SessionPhase)
	}
}

// test_pi_incomplete_sequential_batch_uses_tool_timeout, at the Dispatcher.
func TestToolRunningPastTheToolThresholdIsASessionStall(t *testing.T) {
	checkGoroutines(t)
	script := append(sessionScript(sessHeader, sessUser, sessToolCall), "out=tool started", "block")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{Tool: 200 * time.Millisecond}
	v := dispatch(t, d, task("pi"))
	want := pilot.Failure{
		FailureClass:         pilot.FailSessionStall,
		FailureSource:        pilot.SourcePilotPolicy,
		TerminationSignal:    "SIGTERM",
		TerminationInitiator: "pilot",
		TerminationReason:    pilot.FailSessionStall,
	}
	if diff := cmp.Diff(want, v.Failure); diff != "" {
		t.Errorf("verdict failure (-want +got):\n%s", diff)
	}
	if v.SessionPhase != pilot.PhaseToolRunning {
		t.Errorf("session phase at the kill = %s, want tool-running", v.SessionPhase)
	}
	rec := readRecord(t, v)
	insp := rec.SilenceInspection
	if insp == nil || insp.Action != "terminate" || insp.SilenceSeconds < 0.2 ||
		!cmp.Equal(insp.PendingToolCallIDs, []string{"call-1"}) || insp.StreamTail != "tool started\n" {
		t.Errorf("silence_inspection = %+v, want the terminating check with the pending call and the stream's end", insp)
	}
	if rec.StallTimeoutSeconds == nil || *rec.StallTimeoutSeconds != 0.2 {
		t.Errorf("stall_timeout_seconds = %v, want 0.2", rec.StallTimeoutSeconds)
	}
}

// test_pi_json_stream_progress_prevents_native_only_stall: output counts as
// activity even when the session file stands still.
func TestStreamProgressPreventsAStall(t *testing.T) {
	checkGoroutines(t)
	// 1.2 s of ticks, 40 ms apart, against a 400 ms tool threshold: only
	// the output keeps the worker alive.
	script := append(sessionScript(sessHeader, sessUser, sessToolCall), "tick=30/40ms")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{Tool: 400 * time.Millisecond}
	v := dispatch(t, d, task("pi"))
	if v.Verdict != pilot.Completed {
		rec := readRecord(t, v)
		stream, _ := os.ReadFile(rec.StreamLog)
		events, _ := os.ReadFile(rec.EventsLog)
		t.Fatalf("verdict = %s (%s), want completed: the stream was never silent for the tool threshold\nstream:\n%s\nevents:\n%s", v.Verdict, v.FailureClass, stream, events)
	}
	rec := readRecord(t, v)
	if rec.ActivityState != pilot.ActivityStreaming || rec.SessionPhase != pilot.PhaseToolRunning {
		t.Errorf("activity_state %q, session_phase %q; want streaming, tool-running", rec.ActivityState, rec.SessionPhase)
	}
}

// A phase change reaches the observer and events.log.
func TestPhaseChangesAreEvents(t *testing.T) {
	checkGoroutines(t)
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader, sessUser, sessToolCall), "await="+release)
	script = append(script, sessionScript(sessToolResult, sessFinal)...)
	script = append(script, "out=done")
	d := stallDispatcher(t, script...)
	var mu sync.Mutex
	var phases []pilot.SessionPhase
	observed := 0 // every phase event, starting included
	d.Observer = func(e pilot.Event) {
		if e.Type != pilot.EventPhase {
			return
		}
		mu.Lock()
		observed++
		if e.Session.Phase != pilot.PhaseStarting { // a heartbeat may catch the file with its header alone
			phases = append(phases, e.Session.Phase)
		}
		mu.Unlock()
		if e.Session.Phase == pilot.PhaseToolRunning {
			os.WriteFile(release, nil, 0o600)
		}
	}
	v := dispatch(t, d, task("pi"))
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict = %s (%s)", v.Verdict, v.FailureClass)
	}
	if len(phases) < 2 || phases[0] != pilot.PhaseToolRunning || phases[len(phases)-1] != pilot.PhaseFinished {
		t.Errorf("phase events = %v, want tool-running first and finished last", phases)
	}
	events := readEvents(t, readRecord(t, v).EventsLog)
	n := 0
	for _, e := range events {
		if e["type"] == pilot.EventPhase {
			n++
		}
	}
	if n != observed {
		t.Errorf("events.log has %d phase events, the observer saw %d", n, observed)
	}
}
