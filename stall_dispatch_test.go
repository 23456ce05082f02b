package pilot_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pisession"
)

// pi session lines for the fake agent's sess= steps.
const (
	sessHeader     = `{"type":"session","version":3,"id":"s1","timestamp":"2026-07-25T00:00:00.000Z","cwd":"/tmp"}`
	sessUser       = `{"type":"message","id":"u1","parentId":null,"timestamp":"2026-07-25T00:00:01.000Z","message":{"role":"user","content":"go"}}`
	sessToolCall   = `{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-07-25T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"call-1","name":"bash","arguments":{}}],"stopReason":"toolUse"}}`
	sessToolResult = `{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-07-25T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"call-1","toolName":"bash","content":[],"isError":false}}`
	sessFinal      = `{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-07-25T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}`

	// The seed's sequential batch: one assistant message asks for call-a
	// and call-b, pi runs them one after the other.
	sessBatchCall    = `{"type":"message","id":"assistant-1","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"call-a","name":"read"},{"type":"toolCall","id":"call-b","name":"bash"}],"stopReason":"toolUse"}}`
	sessBatchResultA = `{"type":"message","id":"result-a","parentId":"assistant-1","message":{"role":"toolResult","toolCallId":"call-a","content":[]}}`
	sessBatchResultB = `{"type":"message","id":"result-b","parentId":"result-a","message":{"role":"toolResult","toolCallId":"call-b","content":[]}}`
	sessBatchFinal   = `{"type":"message","id":"assistant-2","parentId":"result-b","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}`
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

// eventsOfType returns the events of type typ in the events.log at path.
func eventsOfType(t *testing.T, path, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range readEvents(t, path) {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// The seed's test_heartbeat_updates_output_and_locator_with_pi_native_session.
// pilot writes no heartbeat lines: what it saw of the native session while
// the worker ran is a phase event in events.log, and record.json names the
// file and its modification time. stream.log holds the worker's output
// alone.
func TestHeartbeatUpdatesOutputAndLocatorWithPiNativeSession(t *testing.T) {
	checkGoroutines(t)
	// The worker writes its session's header and waits until pilot has
	// read it.
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader), "await="+release, "out=done")
	d := stallDispatcher(t, script...)
	var once sync.Once
	d.Observer = func(e pilot.Event) {
		if e.Type == event.Phase && e.Session.Reason == pisession.ReasonHeaderOnly {
			once.Do(func() { os.WriteFile(release, nil, 0o600) })
		}
	}
	tk := task("pi")
	tk.Timeout = time.Minute // a backstop, should pilot never read the header
	v := dispatch(t, d, tk)
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict = %s (%s), want completed", v.Verdict, v.FailureClass)
	}
	rec := readRecord(t, v)
	native := filepath.Join(filepath.Dir(v.Record), "session.jsonl")
	if rec.SessionRecord == nil || rec.NativeSessionPath != native {
		t.Fatalf("record session fields %+v; want native_session_path %s", rec.SessionRecord, native)
	}
	st, err := os.Stat(native)
	if err != nil {
		t.Fatal(err)
	}
	if rec.NativeSessionMtimeNS == nil || *rec.NativeSessionMtimeNS != st.ModTime().UnixNano() {
		t.Errorf("native_session_mtime_ns = %v; want the file's, %d", rec.NativeSessionMtimeNS, st.ModTime().UnixNano())
	}
	seen := false
	for _, e := range eventsOfType(t, rec.EventsLog, event.Phase) {
		if sess, _ := e["session"].(map[string]any); sess["reason"] == pisession.ReasonHeaderOnly {
			seen = true
		}
	}
	if !seen {
		t.Errorf("events.log has no phase event of the header-only session")
	}
	stream, err := os.ReadFile(rec.StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	if string(stream) != "out done\n" {
		t.Errorf("stream.log = %q; want the worker's line alone", stream)
	}
}

// The seed's test_pi_silent_awaiting_model_is_inspected_without_termination.
func TestPiSilentAwaitingModelIsInspectedWithoutTermination(t *testing.T) {
	checkGoroutines(t)
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader, sessUser, sessToolCall, sessToolResult), "await="+release, "out=answer")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{ModelResponse: 50 * time.Millisecond, Tool: 50 * time.Millisecond}
	var once sync.Once
	d.Observer = func(e pilot.Event) {
		if e.Type == event.StallInspection && e.Inspection.Phase == pilot.PhaseAwaitingModel {
			once.Do(func() { os.WriteFile(release, nil, 0o600) })
		}
	}
	tk := task("pi")
	tk.Timeout = time.Minute // a backstop, should pilot never inspect
	v := dispatch(t, d, tk)
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
	// The inspection is in events.log too; nothing ended the worker.
	insps := eventsOfType(t, rec.EventsLog, event.StallInspection)
	if len(insps) == 0 {
		t.Errorf("events.log has no stall inspection")
	}
	for _, e := range insps {
		if in, _ := e["inspection"].(map[string]any); in["action"] != "inspect" {
			t.Errorf("events.log inspection %v; want action inspect", e)
		}
	}
	if n := len(eventsOfType(t, rec.EventsLog, event.Terminate)); n != 0 {
		t.Errorf("events.log has %d terminate events, want none", n)
	}
}

// The seed's test_pi_silent_starting_state_is_inspected_without_termination:
// a session with its header alone is starting, which has no stall timeout;
// its silence is inspected and the worker goes on.
func TestPiSilentStartingStateIsInspectedWithoutTermination(t *testing.T) {
	checkGoroutines(t)
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader), "await="+release, "out=answer")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{Start: 50 * time.Millisecond, ModelResponse: 50 * time.Millisecond}
	var once sync.Once
	d.Observer = func(e pilot.Event) {
		if e.Type == event.StallInspection {
			once.Do(func() { os.WriteFile(release, nil, 0o600) })
		}
	}
	tk := task("pi")
	tk.Timeout = time.Minute // a backstop, should pilot never inspect
	v := dispatch(t, d, tk)
	if v.Verdict != pilot.Completed || v.FailureClass != "" {
		t.Fatalf("verdict = %s (%s), want completed: a silent start is never a stall", v.Verdict, v.FailureClass)
	}
	rec := readRecord(t, v)
	if rec.SessionRecord == nil || rec.SessionPhase != pilot.PhaseStarting {
		t.Fatalf("record session fields %+v; want phase starting", rec.SessionRecord)
	}
	if rec.StallTimeoutSeconds != nil {
		t.Errorf("stall_timeout_seconds = %v, want null for starting", *rec.StallTimeoutSeconds)
	}
	insp := rec.SilenceInspection
	if insp == nil || insp.Action != "inspect" || insp.SilenceSeconds < 0.05 || insp.Phase != pilot.PhaseStarting {
		t.Errorf("silence_inspection = %+v, want an inspection after >= 50ms in starting", insp)
	}
	if len(eventsOfType(t, rec.EventsLog, event.StallInspection)) == 0 {
		t.Errorf("events.log has no stall inspection")
	}
	if n := len(eventsOfType(t, rec.EventsLog, event.Terminate)); n != 0 {
		t.Errorf("events.log has %d terminate events, want none", n)
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

// The seed's test_pi_incomplete_sequential_batch_uses_tool_timeout: after
// call-a's result, call-b of the same batch still runs, so the phase is
// tool-running and the tool threshold judges the silence, not the model's:
// a silence far past the model threshold is not inspected, and not even a
// short idle timeout ends the worker. When call-b's result is in, the
// worker finishes.
func TestPiIncompleteSequentialBatchUsesToolTimeout(t *testing.T) {
	checkGoroutines(t)
	// The batch runs until pilot has reached the idle timeout in its
	// silence and let it be.
	release := filepath.Join(t.TempDir(), "release")
	script := append(sessionScript(sessHeader, sessBatchCall, sessBatchResultA), "await="+release)
	script = append(script, sessionScript(sessBatchResultB, sessBatchFinal)...)
	script = append(script, "out=done")
	d := stallDispatcher(t, script...)
	d.Stall = pilot.StallPolicy{ModelResponse: 20 * time.Millisecond, Tool: time.Minute}
	var (
		mu                 sync.Mutex
		deferred           int
		inspectedBefore    []pilot.StallInspection // before the idle timeout was deferred
		phaseAtTheDeferral pilot.SessionState
	)
	d.Observer = func(e pilot.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Type {
		case event.Phase:
			if deferred == 0 {
				phaseAtTheDeferral = *e.Session
			}
		case event.StallInspection:
			if deferred == 0 {
				inspectedBefore = append(inspectedBefore, *e.Inspection)
			}
		case event.IdleDeferred:
			if deferred++; deferred == 1 {
				os.WriteFile(release, nil, 0o600)
			}
		}
	}
	tk := task("pi")
	// Long enough for the worker to start and write its session on a
	// loaded machine; the silent batch outlasts it.
	tk.IdleTimeout = 2 * time.Second
	v := dispatch(t, d, tk)
	mu.Lock()
	defer mu.Unlock()
	if deferred != 1 {
		t.Errorf("%d idle_deferred events, want 1 (once per silence)", deferred)
	}
	if len(inspectedBefore) != 0 {
		t.Errorf("inspections while call-b ran: %+v; want none, the model threshold does not apply", inspectedBefore)
	}
	if phaseAtTheDeferral.Phase != pilot.PhaseToolRunning || !cmp.Equal(phaseAtTheDeferral.PendingToolCallIDs, []string{"call-b"}) {
		t.Errorf("phase while the batch ran: %q, pending %q; want tool-running, [call-b]", phaseAtTheDeferral.Phase, phaseAtTheDeferral.PendingToolCallIDs)
	}
	if v.Verdict != pilot.Completed {
		t.Errorf("verdict = %s (%s), want completed: the idle timeout must not end a running tool", v.Verdict, v.FailureClass)
	}
	if v.SessionPhase != pilot.PhaseFinished {
		t.Errorf("session phase = %s, want finished", v.SessionPhase)
	}
}

// The other side of TestPiIncompleteSequentialBatchUsesToolTimeout: a tool
// run silent past the tool threshold is ended as a session-stall.
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

// The seed's test_pi_json_stream_progress_prevents_native_only_stall: output
// counts as activity even when the session file stands still. The seed's
// session stays starting, which pilot only ever inspects; here it stays
// tool-running, whose silence would end the worker, so that the test fails
// if the output does not count.
func TestPiJsonStreamProgressPreventsNativeOnlyStall(t *testing.T) {
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
	if stream, err := os.ReadFile(rec.StreamLog); err != nil || !strings.HasSuffix(string(stream), "out tick 30\n") {
		t.Errorf("stream.log (%v) does not end with the last tick:\n%s", err, stream)
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
		if e.Type != event.Phase {
			return
		}
		mu.Lock()
		observed++
		// A heartbeat may catch the file with its header alone
		// (starting), or with the user's message before the tool call
		// is written (awaiting-model: on a busy machine the fake agent's
		// writes are far apart).
		if p := e.Session.Phase; p != pilot.PhaseStarting && (p != pilot.PhaseAwaitingModel || len(phases) > 0) {
			phases = append(phases, p)
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
		if e["type"] == event.Phase {
			n++
		}
	}
	if n != observed {
		t.Errorf("events.log has %d phase events, the observer saw %d", n, observed)
	}
}
