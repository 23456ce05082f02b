package pilot_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/pisession"
)

const piTestdata = "testdata/pi"

var stallPhases = []pilot.SessionPhase{
	pilot.PhaseStarting, pilot.PhaseAwaitingModel, pilot.PhaseToolRunning,
	pilot.PhaseFinished, pilot.PhaseErrored, pilot.PhaseUnknown,
}

// The zero StallPolicy's numbers, per phase. The seed pins: awaiting-model
// uses PI_MODEL_RESPONSE_STALL_SECONDS (3 minutes, from the skill text
// "the stream stops for 3 minutes outside a tool run"); starting has no
// stall timeout (test_pi_silent_starting_state_is_inspected_without_termination:
// pi_stall_timeout_seconds is None); tool-running and unknown use
// PI_TOOL_STALL_SECONDS (test_pi_phase_keeps_incomplete_sequential_batch_tool_running,
// test_pi_phase_uses_conservative_timeout_for_unknown_schema, …_future_session_version,
// …_corrupt_session_entries, test_pi_phase_does_not_treat_unknown_assistant_content_as_final).
func TestStallPolicyDefaults(t *testing.T) {
	type limits struct {
		Inspect, Terminate    time.Duration
		Inspected, Terminates bool
	}
	want := map[pilot.SessionPhase]limits{
		pilot.PhaseStarting:      {Inspect: 3 * time.Minute, Inspected: true},
		pilot.PhaseAwaitingModel: {Inspect: 3 * time.Minute, Inspected: true},
		pilot.PhaseFinished:      {Inspect: 3 * time.Minute, Inspected: true},
		pilot.PhaseErrored:       {Inspect: 3 * time.Minute, Inspected: true},
		pilot.PhaseToolRunning:   {Terminate: 30 * time.Minute, Terminates: true},
		pilot.PhaseUnknown:       {Inspect: 3 * time.Minute, Inspected: true, Terminate: 30 * time.Minute, Terminates: true},
		"":                       {Inspect: 3 * time.Minute, Inspected: true, Terminate: 30 * time.Minute, Terminates: true},
		"some-future-phase":      {Inspect: 3 * time.Minute, Inspected: true, Terminate: 30 * time.Minute, Terminates: true},
	}
	got := map[pilot.SessionPhase]limits{}
	var p pilot.StallPolicy
	for phase := range want {
		var l limits
		l.Inspect, l.Inspected = pilot.InspectAfter(p, phase)
		l.Terminate, l.Terminates = pilot.StallTimeout(p, phase)
		got[phase] = l
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("zero policy (-want +got):\n%s", diff)
	}
	if pilot.DefaultStallModelResponse != 3*time.Minute {
		t.Errorf("DefaultStallModelResponse = %v; the seed says 3 minutes", pilot.DefaultStallModelResponse)
	}
}

func TestStallPolicyFieldsAndDisabling(t *testing.T) {
	p := pilot.StallPolicy{Start: time.Second, ModelResponse: 2 * time.Second, Tool: 3 * time.Second}
	if d, ok := pilot.InspectAfter(p, pilot.PhaseStarting); d != time.Second || !ok {
		t.Errorf("InspectAfter(starting) = %v, %v", d, ok)
	}
	if d, ok := pilot.InspectAfter(p, pilot.PhaseAwaitingModel); d != 2*time.Second || !ok {
		t.Errorf("InspectAfter(awaiting-model) = %v, %v", d, ok)
	}
	if d, ok := pilot.StallTimeout(p, pilot.PhaseToolRunning); d != 3*time.Second || !ok {
		t.Errorf("StallTimeout(tool-running) = %v, %v", d, ok)
	}
	off := pilot.StallPolicy{Start: -1, ModelResponse: -1, Tool: -1}
	for _, phase := range stallPhases {
		if _, ok := pilot.InspectAfter(off, phase); ok {
			t.Errorf("negative thresholds: %s still inspected", phase)
		}
		if _, ok := pilot.StallTimeout(off, phase); ok {
			t.Errorf("negative thresholds: %s still terminated", phase)
		}
		if a := pilot.StallCheck(off, phase, 1000*time.Hour, false); a != pilot.StallNone {
			t.Errorf("negative thresholds: Check(%s) = %v", phase, a)
		}
	}
}

func TestStallPolicyCheck(t *testing.T) {
	p := pilot.StallPolicy{Start: 10 * time.Millisecond, ModelResponse: 30 * time.Millisecond, Tool: time.Second}
	ms := time.Millisecond
	tests := []struct {
		phase     pilot.SessionPhase
		silence   time.Duration
		inspected bool
		want      pilot.StallAction
	}{
		{pilot.PhaseStarting, 9 * ms, false, pilot.StallNone},
		{pilot.PhaseStarting, 10 * ms, false, pilot.StallInspect},
		{pilot.PhaseStarting, 10 * ms, true, pilot.StallNone},
		{pilot.PhaseStarting, 1000 * time.Hour, false, pilot.StallInspect},
		{pilot.PhaseStarting, 1000 * time.Hour, true, pilot.StallNone},

		{pilot.PhaseAwaitingModel, 29 * ms, false, pilot.StallNone},
		{pilot.PhaseAwaitingModel, 30 * ms, false, pilot.StallInspect},
		{pilot.PhaseAwaitingModel, 30 * ms, true, pilot.StallNone},
		{pilot.PhaseAwaitingModel, 1000 * time.Hour, true, pilot.StallNone},

		{pilot.PhaseFinished, 30 * ms, false, pilot.StallInspect},
		{pilot.PhaseFinished, 1000 * time.Hour, true, pilot.StallNone},
		{pilot.PhaseErrored, 30 * ms, false, pilot.StallInspect},
		{pilot.PhaseErrored, 1000 * time.Hour, true, pilot.StallNone},

		{pilot.PhaseToolRunning, 30 * ms, false, pilot.StallNone},
		{pilot.PhaseToolRunning, 999 * ms, false, pilot.StallNone},
		{pilot.PhaseToolRunning, time.Second, false, pilot.StallTerminate},
		{pilot.PhaseToolRunning, time.Second, true, pilot.StallTerminate},

		{pilot.PhaseUnknown, 29 * ms, false, pilot.StallNone},
		{pilot.PhaseUnknown, 30 * ms, false, pilot.StallInspect},
		{pilot.PhaseUnknown, 30 * ms, true, pilot.StallNone},
		{pilot.PhaseUnknown, time.Second, true, pilot.StallTerminate},
		{pilot.PhaseUnknown, time.Second, false, pilot.StallTerminate},
	}
	for _, tt := range tests {
		if got := pilot.StallCheck(p, tt.phase, tt.silence, tt.inspected); got != tt.want {
			t.Errorf("Check(%s, %v, inspected=%v) = %v; want %v", tt.phase, tt.silence, tt.inspected, got, tt.want)
		}
	}
}

func TestStallPolicySuppressIdleTimeout(t *testing.T) {
	p := pilot.StallPolicy{Tool: time.Minute}
	tests := []struct {
		phase   pilot.SessionPhase
		silence time.Duration
		want    bool
	}{
		{pilot.PhaseToolRunning, 0, true},
		{pilot.PhaseToolRunning, 59 * time.Second, true},
		{pilot.PhaseToolRunning, time.Minute, false},
		{pilot.PhaseAwaitingModel, time.Second, false},
		{pilot.PhaseStarting, time.Second, false},
		{pilot.PhaseFinished, time.Second, false},
		{pilot.PhaseErrored, time.Second, false},
		{pilot.PhaseUnknown, time.Second, false},
	}
	for _, tt := range tests {
		if got := pilot.SuppressIdleTimeout(p, tt.phase, tt.silence); got != tt.want {
			t.Errorf("SuppressIdleTimeout(%s, %v) = %v; want %v", tt.phase, tt.silence, got, tt.want)
		}
	}
	if !pilot.SuppressIdleTimeout(pilot.StallPolicy{Tool: -1}, pilot.PhaseToolRunning, 1000*time.Hour) {
		t.Error("with the tool threshold off, a running tool should hold off the idle timeout")
	}
	// The default tool threshold outlasts the default idle timeout, so a
	// silent tool is the stall policy's to end.
	if !pilot.SuppressIdleTimeout(pilot.StallPolicy{}, pilot.PhaseToolRunning, pilot.DefaultIdleTimeout) {
		t.Error("the zero policy lets the idle timeout end a tool run at DefaultIdleTimeout")
	}
}

var stallT0 = time.Date(2026, 7, 25, 0, 0, 0, 0, time.UTC)

func stallAt(ms int) time.Time { return stallT0.Add(time.Duration(ms) * time.Millisecond) }

// stallRun drives a StallClock over fake time from 0 to endMS in steps of
// 1 ms, with worker output at the given times, and returns the times at
// which Check acted.
func stallRun(p pilot.StallPolicy, phase pilot.SessionPhase, endMS int, outputs ...int) map[int]pilot.StallAction {
	c := pilot.NewStallClock(stallT0)
	out := map[int]bool{}
	for _, o := range outputs {
		out[o] = true
	}
	acted := map[int]pilot.StallAction{}
	for ms := 0; ms <= endMS; ms++ {
		if out[ms] {
			c.Output(stallAt(ms))
		}
		if a := c.Check(p, phase, stallAt(ms)); a != pilot.StallNone {
			acted[ms] = a
		}
	}
	return acted
}

func stallFixture(t *testing.T, name string) pilot.SessionState {
	t.Helper()
	st, err := pisession.ParseFile(filepath.Join(piTestdata, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// test_pi_silent_awaiting_model_is_inspected_without_termination: all
// tool results are in, the worker is silent for 80 ms with the model
// threshold at 30 ms: one inspection (with the stream's tail), no
// termination.
func TestStallSilentAwaitingModelIsInspectedWithoutTermination(t *testing.T) {
	st := stallFixture(t, "seed-silent-awaiting-model")
	if st.Phase != pilot.PhaseAwaitingModel || st.Reason != pisession.ReasonAllToolResultsRecorded {
		t.Fatalf("phase %q, %q; want awaiting-model, all-tool-results-recorded", st.Phase, st.Reason)
	}
	p := pilot.StallPolicy{ModelResponse: 30 * time.Millisecond}
	if diff := cmp.Diff(map[int]pilot.StallAction{30: pilot.StallInspect}, stallRun(p, st.Phase, 80)); diff != "" {
		t.Errorf("actions by ms (-want +got):\n%s", diff)
	}
	if a := pilot.StallCheck(p, st.Phase, 1000*time.Hour, true); a != pilot.StallNone {
		t.Errorf("after a long silence: %v; awaiting the model is never terminated", a)
	}
	insp := pilot.NewStallInspection(pilot.StallInspect, st, 80*time.Millisecond, []byte("[stdout] ready\n"))
	want := pilot.StallInspection{
		Action: "inspect", SilenceSeconds: 0.08, Phase: pilot.PhaseAwaitingModel,
		Reason: pisession.ReasonAllToolResultsRecorded, PendingToolCallIDs: []string{}, StreamTail: "[stdout] ready\n",
	}
	if diff := cmp.Diff(want, insp); diff != "" {
		t.Errorf("inspection (-want +got):\n%s", diff)
	}
}

// test_pi_silent_starting_state_is_inspected_without_termination: a
// header-only session is starting; it has no stall timeout; silence past
// the start threshold is inspected, never terminated.
func TestStallSilentStartingIsInspectedWithoutTermination(t *testing.T) {
	st := stallFixture(t, "seed-silent-starting")
	if st.Phase != pilot.PhaseStarting {
		t.Fatalf("phase %q; want starting", st.Phase)
	}
	p := pilot.StallPolicy{Start: 30 * time.Millisecond, ModelResponse: 30 * time.Millisecond}
	if d, ok := pilot.StallTimeout(p, st.Phase); ok {
		t.Errorf("StallTimeout(starting) = %v; want none", d)
	}
	if diff := cmp.Diff(map[int]pilot.StallAction{30: pilot.StallInspect}, stallRun(p, st.Phase, 80)); diff != "" {
		t.Errorf("actions by ms (-want +got):\n%s", diff)
	}
}

// test_pi_json_stream_progress_prevents_native_only_stall: the session
// file says starting and does not change, but pi prints a message_update
// every 15 ms: with a 30 ms start threshold nothing happens while it
// streams.
func TestStallJSONStreamProgressPreventsNativeOnlyStall(t *testing.T) {
	st := stallFixture(t, "seed-silent-starting")
	p := pilot.StallPolicy{Start: 30 * time.Millisecond}
	outputs := []int{0, 15, 30, 45, 60, 75, 90, 105}
	if got := stallRun(p, st.Phase, 120, outputs...); len(got) != 0 {
		t.Errorf("actions while streaming: %v; want none", got)
	}
	// The check can fail: without the output, the same run is inspected.
	if got := stallRun(p, st.Phase, 120); len(got) == 0 {
		t.Error("no inspection without output")
	}
}

// test_pi_incomplete_sequential_batch_uses_tool_timeout: call-b is still
// running after call-a's result; 80 ms of silence with a 20 ms model
// threshold and a 1 s tool threshold neither inspects nor terminates, and
// the idle timeout is held off; when result-b is appended, the phase is
// awaiting-model and the growth counts as activity.
func TestStallIncompleteSequentialBatchUsesToolTimeout(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(piTestdata, "seed-incomplete-batch-tool-timeout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	tail := pisession.Tail{Path: path}
	st, err := tail.Update()
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != pilot.PhaseToolRunning || !cmp.Equal(st.PendingToolCallIDs, []string{"call-b"}) {
		t.Fatalf("phase %q, pending %v; want tool-running, [call-b]", st.Phase, st.PendingToolCallIDs)
	}
	p := pilot.StallPolicy{ModelResponse: 20 * time.Millisecond, Tool: time.Second}
	clock := pilot.NewStallClock(stallT0)
	clock.SessionSize(int64(len(src)), stallAt(0))
	for ms := 0; ms <= 80; ms++ {
		if a := clock.Check(p, st.Phase, stallAt(ms)); a != pilot.StallNone {
			t.Fatalf("at %d ms: %v; a running tool is neither inspected nor ended inside the tool threshold", ms, a)
		}
		if !pilot.SuppressIdleTimeout(p, st.Phase, clock.Silence(stallAt(ms))) {
			t.Fatalf("at %d ms: the idle timeout is not held off", ms)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resultB := `{"type":"message","id":"result-b","parentId":"result-a","message":{"role":"toolResult","toolCallId":"call-b","content":[]}}` + "\n"
	if _, err := f.WriteString(resultB); err != nil {
		t.Fatal(err)
	}
	if st, err = tail.Update(); err != nil {
		t.Fatal(err)
	}
	if st.Phase != pilot.PhaseAwaitingModel || st.Reason != pisession.ReasonAllToolResultsRecorded {
		t.Fatalf("after result-b: %q, %q; want awaiting-model, all-tool-results-recorded", st.Phase, st.Reason)
	}
	clock.SessionSize(int64(len(src)+len(resultB)), stallAt(81))
	if got := clock.Silence(stallAt(90)); got != 9*time.Millisecond {
		t.Errorf("silence after the file grew = %v; want 9ms", got)
	}
	// Without that growth the same silence would get the model's
	// inspection.
	if a := pilot.StallCheck(p, st.Phase, 90*time.Millisecond, false); a != pilot.StallInspect {
		t.Errorf("Check(awaiting-model, 90ms) = %v; want inspect", a)
	}
}

// The seed's test_pi_phase_* tests, each a subtest of its name (the rest
// are pilot's own fixtures): the phase pisession reads from the seed's
// session file, and what the zero StallPolicy does with that phase. An
// incomplete batch, like every phase pilot cannot read (an unknown schema
// or assistant content, a future session version, corrupt entries), is
// ended only after the tool threshold, the conservative one; awaiting the
// model is inspected after the model threshold and never ended.
func TestStallTimeoutsOfParsedPhases(t *testing.T) {
	p := pilot.StallPolicy{}
	ids := func(s ...string) []string { return append([]string{}, s...) }
	tests := []struct {
		name     string
		fixtures []string
		phase    pilot.SessionPhase
		reason   string   // "": not checked (the seed does not)
		pending  []string // nil: not checked
		// The tool calls of the last assistant message and those with a
		// result; nil: not checked.
		expected, completed []string
		inspect             time.Duration // 0: none
		terminate           time.Duration // 0: none
	}{
		{name: "PiPhaseKeepsIncompleteSequentialBatchToolRunning", fixtures: []string{"seed-incomplete-sequential-batch"},
			phase: pilot.PhaseToolRunning, expected: ids("call-a", "call-b"), completed: ids("call-a"), pending: ids("call-b"),
			terminate: pilot.DefaultStallTool},
		{name: "PiPhaseWaitsForModelOnlyAfterEntireBatchCompletes", fixtures: []string{"seed-entire-batch-complete"},
			phase: pilot.PhaseAwaitingModel, completed: ids("call-a", "call-b"), pending: ids(),
			inspect: pilot.DefaultStallModelResponse},
		{name: "PiPhaseUsesConservativeTimeoutForUnknownSchema", fixtures: []string{"seed-tool-result-id-missing"},
			phase: pilot.PhaseUnknown, reason: pisession.ReasonToolResultIDMissing,
			inspect: pilot.DefaultStallModelResponse, terminate: pilot.DefaultStallTool},
		{name: "PiPhaseDoesNotTreatUnknownAssistantContentAsFinal", fixtures: []string{"seed-unknown-assistant-content"},
			phase: pilot.PhaseUnknown, reason: pisession.ReasonUnsupportedAssistantContent,
			inspect: pilot.DefaultStallModelResponse, terminate: pilot.DefaultStallTool},
		{name: "PiPhaseUsesConservativeTimeoutForFutureSessionVersion", fixtures: []string{"seed-future-session-version"},
			phase: pilot.PhaseUnknown, reason: "unsupported-session-version:4",
			inspect: pilot.DefaultStallModelResponse, terminate: pilot.DefaultStallTool},
		// The seed's cases missing-parent and invalid-utf8 (its bytes
		// hold a backslash before "xff": an invalid JSON escape).
		{name: "PiPhaseUsesConservativeTimeoutForCorruptSessionEntries", fixtures: []string{"seed-corrupt-missing-parent", "seed-corrupt-invalid-utf8"},
			phase:   pilot.PhaseUnknown,
			inspect: pilot.DefaultStallModelResponse, terminate: pilot.DefaultStallTool},
		{name: "PiPhaseFollowsOnlyTheActiveSessionBranch", fixtures: []string{"seed-active-branch"},
			phase: pilot.PhaseAwaitingModel, reason: pisession.ReasonUserMessage,
			inspect: pilot.DefaultStallModelResponse},

		// The invalid UTF-8 case with a real 0xff byte.
		{name: "corrupt-invalid-utf8-byte", fixtures: []string{"corrupt-invalid-utf8-byte"},
			phase: pilot.PhaseUnknown, reason: pisession.ReasonCorruptEntry,
			inspect: pilot.DefaultStallModelResponse, terminate: pilot.DefaultStallTool},
		{name: "seed-silent-starting", fixtures: []string{"seed-silent-starting"},
			phase: pilot.PhaseStarting, inspect: pilot.DefaultStallStart},
		{name: "v3-finished", fixtures: []string{"v3-finished"},
			phase: pilot.PhaseFinished, inspect: pilot.DefaultStallModelResponse},
		{name: "v3-errored", fixtures: []string{"v3-errored"},
			phase: pilot.PhaseErrored, inspect: pilot.DefaultStallModelResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, fixture := range tt.fixtures {
				st := stallFixture(t, fixture)
				if st.Phase != tt.phase || tt.reason != "" && st.Reason != tt.reason {
					t.Errorf("%s: phase %q, reason %q; want %q, %q", fixture, st.Phase, st.Reason, tt.phase, tt.reason)
				}
				for _, l := range []struct {
					name      string
					got, want []string
				}{
					{"expected", st.ExpectedToolCallIDs, tt.expected},
					{"completed", st.CompletedToolCallIDs, tt.completed},
					{"pending", st.PendingToolCallIDs, tt.pending},
				} {
					if l.want != nil && !cmp.Equal(l.got, l.want) {
						t.Errorf("%s: %s tool call ids %q; want %q", fixture, l.name, l.got, l.want)
					}
				}
				inspect, _ := pilot.InspectAfter(p, st.Phase)
				terminate, _ := pilot.StallTimeout(p, st.Phase)
				if inspect != tt.inspect || terminate != tt.terminate {
					t.Errorf("%s (%s): inspect %v, terminate %v; want %v, %v", fixture, st.Phase, inspect, terminate, tt.inspect, tt.terminate)
				}
			}
		})
	}
}

// test_external_liveness_ignores_heartbeat_mtime, as far as it concerns
// activity: a stale stream is silence however fresh pilot's own files are
// (they never reach the clock), a session file touched without growing is
// no activity, and new output is.
func TestStallClockActivity(t *testing.T) {
	p := pilot.StallPolicy{Tool: time.Second}
	c := pilot.NewStallClock(stallAt(0))
	c.SessionSize(-1, stallAt(0)) // no session file: not activity
	if got := c.Silence(stallAt(500)); got != 500*time.Millisecond {
		t.Fatalf("silence = %v; want 500ms", got)
	}
	c.SessionSize(100, stallAt(500)) // the file appears
	c.SessionSize(100, stallAt(900)) // same size (touched, or not written): nothing
	if got := c.Silence(stallAt(1500)); got != time.Second {
		t.Fatalf("silence = %v; want 1s", got)
	}
	if a := c.Check(p, pilot.PhaseUnknown, stallAt(1500)); a != pilot.StallTerminate {
		t.Fatalf("Check = %v; want terminate", a)
	}
	c.Output(stallAt(1500)) // stream.touch(): live again
	if a := c.Check(p, pilot.PhaseUnknown, stallAt(1600)); a == pilot.StallTerminate {
		t.Fatal("still terminating after new output")
	}
	c.SessionSize(50, stallAt(1700)) // rewritten shorter: activity too
	if got := c.Silence(stallAt(1700)); got != 0 {
		t.Errorf("silence after the file changed = %v; want 0", got)
	}
	if got := c.Silence(stallAt(1000)); got != 0 {
		t.Errorf("silence before the last activity = %v; want 0", got)
	}
}

// An inspection is made once per silence; activity re-arms it.
func TestStallClockInspectsOncePerSilence(t *testing.T) {
	p := pilot.StallPolicy{ModelResponse: 10 * time.Millisecond}
	got := stallRun(p, pilot.PhaseAwaitingModel, 100, 50)
	want := map[int]pilot.StallAction{10: pilot.StallInspect, 60: pilot.StallInspect}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions by ms (-want +got):\n%s", diff)
	}
}

func TestNewStallInspectionKeepsTheTail(t *testing.T) {
	st := stallFixture(t, "seed-incomplete-sequential-batch")
	stream := []byte(strings.Repeat("a", 3000) + strings.Repeat("é", 1500)) // é is 2 bytes
	insp := pilot.NewStallInspection(pilot.StallTerminate, st, 31*time.Minute, stream)
	if len(insp.StreamTail) > pilot.StallTailBytes || len(insp.StreamTail) < pilot.StallTailBytes-3 {
		t.Errorf("tail is %d bytes; want about %d", len(insp.StreamTail), pilot.StallTailBytes)
	}
	if !utf8.ValidString(insp.StreamTail) || !strings.HasSuffix(string(stream), insp.StreamTail) {
		t.Error("tail is not a valid UTF-8 suffix of the stream")
	}
	out, err := json.Marshal(insp)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	wantKeys := map[string]any{
		"action": "terminate", "silence_seconds": 1860.0, "phase": "tool-running",
		"reason": "tool-results-pending", "pending_tool_call_ids": []any{"call-b"},
	}
	for k, v := range wantKeys {
		if !cmp.Equal(v, back[k]) {
			t.Errorf("%s = %v; want %v", k, back[k], v)
		}
	}
	st.PendingToolCallIDs[0] = "changed"
	if insp.PendingToolCallIDs[0] != "call-b" {
		t.Error("the inspection shares the state's slice")
	}
}

func TestFailSessionStallIsTheSeedsClass(t *testing.T) {
	// test_retries_pi_session_stall_twice_with_same_model: the class is
	// "session-stall".
	if pilot.FailSessionStall != "session-stall" {
		t.Errorf("FailSessionStall = %q", pilot.FailSessionStall)
	}
}

func TestStallActionString(t *testing.T) {
	for a, want := range map[pilot.StallAction]string{
		pilot.StallNone: "none", pilot.StallInspect: "inspect", pilot.StallTerminate: "terminate", 9: "stallAction(?)",
	} {
		if got := a.String(); got != want {
			t.Errorf("%d.String() = %q; want %q", int(a), got, want)
		}
	}
}

// The seed's test_detects_codex_collaboration_wait and
// test_ignores_completed_or_non_json_events, each a subtest of its name,
// then the lines codex writes, with item ids.
func TestCodexCollabWait(t *testing.T) {
	type result struct {
		ID                 string
		Started, Completed bool
	}
	type lineCase struct {
		line string
		want result
	}
	groups := []struct {
		name  string
		cases []lineCase
	}{
		// The seed's lines (no item id): a wait starts; a completed one
		// is no wait in progress, and a line that is not JSON is nothing.
		{"DetectsCodexCollaborationWait", []lineCase{
			{`{"type":"item.started","item":{"type":"collab_tool_call","tool":"wait"}}`, result{"", true, false}},
		}},
		{"IgnoresCompletedOrNonJsonEvents", []lineCase{
			{`{"type":"item.completed","item":{"type":"collab_tool_call","tool":"wait"}}`, result{"", false, true}},
			{`not json`, result{}},
		}},
		// With the fields codex writes (PR #9817).
		{"codex lines", []lineCase{
			{`{"type":"item.started","item":{"id":"item_3","type":"collab_tool_call","tool":"wait","sender_thread_id":"t1","receiver_thread_ids":["t2"],"prompt":null,"agents_states":{},"status":"in_progress"}}`, result{"item_3", true, false}},
			{`{"type":"item.completed","item":{"id":"item_3","type":"collab_tool_call","tool":"wait","sender_thread_id":"t1","receiver_thread_ids":["t2"],"status":"completed"}}`, result{"item_3", false, true}},
			{`{"type":"item.updated","item":{"id":"item_3","type":"collab_tool_call","tool":"wait"}}`, result{}},
			{`{"type":"item.started","item":{"id":"item_4","type":"collab_tool_call","tool":"spawn_agent"}}`, result{}},
			{`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","status":"in_progress"}}`, result{}},
			{`{"type":"item.started","item":{"id":"item_5","type":"command_execution","command":"echo collab_tool_call wait"}}`, result{}},
			{`{"type":"item.started","item":"collab_tool_call"}`, result{}},
			{`{"type":"item.started","item":{"type":"collab_tool_call","tool":"wait"`, result{}},
			{``, result{}},
		}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tt := range g.cases {
				var got result
				got.ID, got.Started, got.Completed = agents.CodexCollabWait([]byte(tt.line))
				if got != tt.want {
					t.Errorf("CodexCollabWait(%s) = %+v; want %+v", tt.line, got, tt.want)
				}
			}
		})
	}
}

func TestCodexSubagentWaits(t *testing.T) {
	steps := []struct {
		line    string
		waiting bool
	}{
		{`{"type":"thread.started","thread_id":"0199a213"}`, false},
		{`{"type":"turn.started"}`, false},
		{`{"type":"item.started","item":{"id":"item_1","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"item.started","item":{"id":"item_2","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"item.started","item":{"id":"item_1","type":"collab_tool_call","tool":"wait"}}`, true},
		{`not json`, true},
		{`{"type":"item.completed","item":{"id":"item_1","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"item.completed","item":{"id":"item_9","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"item.completed","item":{"id":"item_2","type":"collab_tool_call","tool":"wait"}}`, false},
		{`{"type":"item.started","item":{"id":"item_3","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"item.completed","item":{"id":"item_7","type":"agent_message","text":"turn.completed"}}`, true},
		{`{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1}}`, false},
		{`{"type":"item.started","item":{"id":"item_4","type":"collab_tool_call","tool":"wait"}}`, true},
		{`{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}`, false},
	}
	var w agents.CodexSubagentWaits
	for i, s := range steps {
		w.Observe([]byte(s.line))
		if w.Waiting() != s.waiting {
			t.Fatalf("step %d (%s): Waiting() = %v; want %v", i, s.line, w.Waiting(), s.waiting)
		}
	}
}

func ExampleStallPolicy() {
	p := pilot.StallPolicy{} // the defaults
	for _, phase := range []pilot.SessionPhase{pilot.PhaseAwaitingModel, pilot.PhaseToolRunning} {
		fmt.Println(phase, pilot.StallCheck(p, phase, 5*time.Minute, false), pilot.StallCheck(p, phase, 45*time.Minute, true))
	}
	// Output:
	// awaiting-model inspect none
	// tool-running none terminate
}

func ExampleStallClock() {
	p := pilot.StallPolicy{ModelResponse: time.Minute, Tool: 10 * time.Minute}
	start := time.Date(2026, 7, 25, 12, 0, 0, 0, time.UTC)
	c := pilot.NewStallClock(start)
	c.Output(start.Add(30 * time.Second)) // the worker printed a line
	fmt.Println(c.Check(p, pilot.PhaseAwaitingModel, start.Add(time.Minute)))
	fmt.Println(c.Check(p, pilot.PhaseAwaitingModel, start.Add(2*time.Minute)))
	fmt.Println(c.Check(p, pilot.PhaseAwaitingModel, start.Add(3*time.Minute))) // once per silence
	c.SessionSize(4096, start.Add(4*time.Minute))                               // the session file grew
	fmt.Println(c.Silence(start.Add(5 * time.Minute)))
	// Output:
	// none
	// inspect
	// none
	// 1m0s
}

func ExampleStallInspection() {
	st := pilot.SessionState{Phase: pilot.PhaseToolRunning, Reason: pisession.ReasonToolResultsPending, PendingToolCallIDs: []string{"call_2"}}
	insp := pilot.NewStallInspection(pilot.StallTerminate, st, 31*time.Minute, []byte("[stderr] still compiling\n"))
	out, _ := json.Marshal(insp)
	fmt.Println(string(out))
	// Output: {"action":"terminate","silence_seconds":1860,"phase":"tool-running","reason":"tool-results-pending","pending_tool_call_ids":["call_2"],"stream_tail":"[stderr] still compiling\n"}
}

func ExampleCodexSubagentWaits() {
	var w agents.CodexSubagentWaits
	w.Observe([]byte(`{"type":"item.started","item":{"id":"item_5","type":"collab_tool_call","tool":"wait","status":"in_progress"}}`))
	fmt.Println(w.Waiting())
	w.Observe([]byte(`{"type":"item.completed","item":{"id":"item_5","type":"collab_tool_call","tool":"wait","status":"completed"}}`))
	fmt.Println(w.Waiting())
	// Output:
	// true
	// false
}
