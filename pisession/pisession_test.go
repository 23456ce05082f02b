package pisession_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pisession"
)

// go test -run PiSessionGolden -update-pi rewrites testdata/pi/*.golden.
var updatePi = flag.Bool("update-pi", false, "rewrite testdata/pi/*.golden from the current parser")

const piTestdata = "../testdata/pi"

func piFixtures(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(piTestdata, "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s: %v", piTestdata, err)
	}
	return paths
}

func piParseBytes(t testing.TB, data []byte) pilot.SessionState {
	t.Helper()
	st, err := pisession.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPiSessionGolden parses every fixture and compares the whole state,
// in its JSON form, with the fixture's golden file.
func TestPiSessionGolden(t *testing.T) {
	for _, path := range piFixtures(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			st, err := pisession.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(st, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(path, ".jsonl") + ".golden"
			if *updatePi {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run PiSessionGolden -update-pi)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestPiSessionPhases pins the phase and reason of each fixture by hand, so
// that a regenerated golden file cannot hide a change of behaviour. The
// fixtures named seed-* port the seed's tests; the comment names the test.
// (The seed's test_pi_phase_* tests whole, with what the stall policy does
// with the phase, are the root package's TestStallTimeoutsOfParsedPhases/
// subtests of their names.)
func TestPiSessionPhases(t *testing.T) {
	ids := func(s ...string) []string { return append([]string{}, s...) }
	type lists struct{ expected, completed, pending []string }
	tests := []struct {
		fixture string
		phase   pilot.SessionPhase
		reason  string
		lists   *lists // nil: not checked here (the golden file has them)
	}{
		// test_pi_phase_reads_large_last_jsonl_event
		{"seed-large-last-event", pilot.PhaseAwaitingModel, pisession.ReasonAllToolResultsRecorded,
			&lists{ids("large-result"), ids("large-result"), ids()}},
		// test_pi_phase_keeps_incomplete_sequential_batch_tool_running
		{"seed-incomplete-sequential-batch", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending,
			&lists{ids("call-a", "call-b"), ids("call-a"), ids("call-b")}},
		// test_pi_phase_waits_for_model_only_after_entire_batch_completes
		{"seed-entire-batch-complete", pilot.PhaseAwaitingModel, pisession.ReasonAllToolResultsRecorded,
			&lists{ids("call-a", "call-b"), ids("call-a", "call-b"), ids()}},
		// test_pi_phase_uses_conservative_timeout_for_unknown_schema
		{"seed-tool-result-id-missing", pilot.PhaseUnknown, pisession.ReasonToolResultIDMissing, nil},
		// test_pi_phase_does_not_treat_unknown_assistant_content_as_final
		{"seed-unknown-assistant-content", pilot.PhaseUnknown, pisession.ReasonUnsupportedAssistantContent, nil},
		// test_pi_phase_uses_conservative_timeout_for_future_session_version
		{"seed-future-session-version", pilot.PhaseUnknown, "unsupported-session-version:4", nil},
		// test_pi_phase_uses_conservative_timeout_for_corrupt_session_entries, case missing-parent
		{"seed-corrupt-missing-parent", pilot.PhaseUnknown, pisession.ReasonMissingParent, nil},
		// test_pi_phase_uses_conservative_timeout_for_corrupt_session_entries, case invalid-utf8
		// (the seed's bytes hold a backslash before "xff": an invalid JSON escape)
		{"seed-corrupt-invalid-utf8", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		// the same case with a real 0xff byte
		{"corrupt-invalid-utf8-byte", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		// test_pi_phase_follows_only_the_active_session_branch
		{"seed-active-branch", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, &lists{ids(), ids(), ids()}},
		// test_pi_silent_awaiting_model_is_inspected_without_termination (the phase part)
		{"seed-silent-awaiting-model", pilot.PhaseAwaitingModel, pisession.ReasonAllToolResultsRecorded,
			&lists{ids("call-1"), ids("call-1"), ids()}},
		// test_pi_silent_starting_state_is_inspected_without_termination,
		// test_heartbeat_updates_output_and_locator_with_pi_native_session,
		// test_pi_json_stream_progress_prevents_native_only_stall (the phase part)
		{"seed-silent-starting", pilot.PhaseStarting, pisession.ReasonHeaderOnly, nil},
		// test_pi_incomplete_sequential_batch_uses_tool_timeout (before result-b)
		{"seed-incomplete-batch-tool-timeout", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending,
			&lists{ids("call-a", "call-b"), ids("call-a"), ids("call-b")}},

		// Real pi lines (research/format-examples), version 1: the file
		// order is the branch.
		{"v1-large-session-excerpt", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		{"v1-stream-terminated-error", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v1-retry-after-error", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		{"v1-before-compaction-error", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v1-bash-execution-after-final", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		// The docs' example is not valid JSON (line 4 has "usage":{...}).
		{"v3-docs-verbatim", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		// Repaired, its leaf's branch is user → branch_summary → custom →
		// custom_message → label → session_info; the assistant, the
		// unmatched tool result and the compaction are on another branch.
		{"v3-docs-repaired", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},

		// Real pi 1.6.0 files (e2e runs against fakellm; the same files
		// are beside testdata/pi/stream/e2e-1.6.0-*): a "system" message
		// (the system prompt) comes before the user's, SIGTERM leaves an
		// aborted assistant message, and a retried error is followed by a
		// context_edit entry that drops it from the context.
		{"v3-pi-1.6.0-system-then-user", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, &lists{ids(), ids(), ids()}},
		{"v3-pi-1.6.0-aborted-on-sigterm", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v3-pi-1.6.0-context-edit-after-errors", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v3-pi-1.6.0-two-tool-calls-finished", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, &lists{ids(), ids(), ids()}},

		{"v3-finished", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, &lists{ids(), ids(), ids()}},
		{"v3-parallel-results-out-of-order", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending,
			&lists{ids("call_a", "call_b", "call_c"), ids("call_a", "call_c"), ids("call_b")}},
		{"v3-tool-running-then-non-message-entries", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending,
			&lists{ids("call_1"), ids(), ids("call_1")}},
		{"v3-errored", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v3-aborted", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v3-errored-then-retried", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		{"v3-user-after-errored", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-errored-then-compaction", pilot.PhaseErrored, pisession.ReasonAssistantError, nil},
		{"v3-length-with-tool-calls", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending, nil},
		{"v3-tool-use-without-tool-calls", pilot.PhaseUnknown, pisession.ReasonToolUseWithoutToolCalls, nil},
		{"v3-stop-reason-missing", pilot.PhaseUnknown, pisession.ReasonStopReasonMissing, nil},
		{"v3-unsupported-stop-reason", pilot.PhaseUnknown, pisession.ReasonUnsupportedStopReason, nil},
		{"v3-tool-result-unmatched", pilot.PhaseUnknown, pisession.ReasonToolResultIDUnmatched,
			&lists{ids("call_1"), ids(), ids("call_1")}},
		{"v3-tool-result-id-missing-after-call", pilot.PhaseUnknown, pisession.ReasonToolResultIDMissing, nil},
		{"v3-tool-call-id-missing", pilot.PhaseUnknown, pisession.ReasonToolCallIDMissing, nil},
		{"v3-assistant-content-string", pilot.PhaseUnknown, pisession.ReasonUnsupportedAssistantContent, nil},
		{"v3-unknown-role-after-assistant", pilot.PhaseUnknown, pisession.ReasonUnsupportedMessageRole, nil},
		{"v3-bash-execution-after-final", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		{"v2-hook-message-after-final", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		// A torn last line is ignored until its "\n" arrives, even when it
		// is already complete JSON.
		{"v3-torn-last-line", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending, nil},
		{"v3-torn-complete-json-no-newline", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending, nil},
		{"empty", pilot.PhaseStarting, pisession.ReasonNoCompleteLine, nil},
		{"torn-header", pilot.PhaseStarting, pisession.ReasonNoCompleteLine, nil},
		{"v3-crlf", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-blank-lines", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending, nil},
		{"v3-missing-session-header", pilot.PhaseUnknown, pisession.ReasonMissingSessionHeader, nil},
		{"v3-missing-id", pilot.PhaseUnknown, pisession.ReasonMissingID, nil},
		{"v3-message-not-object", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		{"v3-not-an-object", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		{"v3-parent-id-number", pilot.PhaseUnknown, pisession.ReasonCorruptEntry, nil},
		{"v3-orphan-parent-is-root", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-second-header-skipped", pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage, nil},
		// Back on an assistant message whose call has a result only on
		// the abandoned branch: the tool is still running on this one.
		{"v3-branch-back-to-pending-tool-call", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending,
			&lists{ids("call_1"), ids(), ids("call_1")}},
		{"v3-branch-from-user-message", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-reset-leaf-new-root", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-many-tool-calls", pilot.PhaseToolRunning, pisession.ReasonToolResultsPending, nil},
		{"v3-duplicate-tool-call-ids", pilot.PhaseAwaitingModel, pisession.ReasonAllToolResultsRecorded,
			&lists{ids("call_1"), ids("call_1"), ids()}},
		// Keys match exactly, as in JSON.parse; escapes in keys are decoded;
		// a repeated key's last value wins.
		{"v3-key-case", pilot.PhaseStarting, pisession.ReasonNoMessages, nil},
		{"v3-escaped-keys", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-duplicate-keys-last-wins", pilot.PhaseAwaitingModel, pisession.ReasonUserMessage, nil},
		{"v3-version-string", pilot.PhaseUnknown, `unsupported-session-version:"3"`, nil},
		{"v3-version-float", pilot.PhaseUnknown, "unsupported-session-version:3.0", nil},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.fixture] = true
		t.Run(tt.fixture, func(t *testing.T) {
			st, err := pisession.ParseFile(filepath.Join(piTestdata, tt.fixture+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Phase != tt.phase || st.Reason != tt.reason {
				t.Errorf("phase, reason = %q, %q; want %q, %q", st.Phase, st.Reason, tt.phase, tt.reason)
			}
			if tt.lists != nil {
				got := lists{st.ExpectedToolCallIDs, st.CompletedToolCallIDs, st.PendingToolCallIDs}
				if diff := cmp.Diff(*tt.lists, got, cmp.AllowUnexported(lists{})); diff != "" {
					t.Errorf("tool call ids (-want +got):\n%s", diff)
				}
			}
		})
	}
	for _, path := range piFixtures(t) {
		if name := strings.TrimSuffix(filepath.Base(path), ".jsonl"); !seen[name] {
			t.Errorf("fixture %s has no row in TestPiSessionPhases", name)
		}
	}
}

// The errored states keep the assistant's errorMessage; the retry after an
// error is not errored. (Golden files hold the rest.)
func TestPiSessionErrorMessage(t *testing.T) {
	tests := []struct {
		fixture, stop, msg string
	}{
		{"v1-stream-terminated-error", "error", "terminated"},
		{"v3-aborted", "aborted", "Request was aborted"},
		{"v3-errored", "error", "Connection error."},
		{"v3-errored-then-retried", "stop", ""},
	}
	for _, tt := range tests {
		st, err := pisession.ParseFile(filepath.Join(piTestdata, tt.fixture+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if st.StopReason != tt.stop || st.ErrorMessage != tt.msg {
			t.Errorf("%s: stop_reason, error_message = %q, %q; want %q, %q", tt.fixture, st.StopReason, st.ErrorMessage, tt.stop, tt.msg)
		}
	}
	st, err := pisession.ParseFile(filepath.Join(piTestdata, "v1-before-compaction-error.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.ErrorMessage, "400 ") || !strings.Contains(st.ErrorMessage, "tool_use") {
		t.Errorf("error_message = %q; want the provider's 400 text", st.ErrorMessage)
	}
}

func TestPiSessionStateJSONHasArraysNotNull(t *testing.T) {
	got, err := json.Marshal(pilot.SessionState{Phase: pilot.PhaseStarting})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"phase":"starting","reason":"","expected_tool_call_ids":[],"completed_tool_call_ids":[],"pending_tool_call_ids":[],"version":0,"leaf_id":"","stop_reason":"","error_message":""}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParsePiSessionFileMissingIsStarting(t *testing.T) {
	st, err := pisession.ParseFile(filepath.Join(t.TempDir(), "not-yet.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != pilot.PhaseStarting || st.Reason != pisession.ReasonNoSessionFile {
		t.Errorf("got %q, %q; want starting, no-session-file", st.Phase, st.Reason)
	}
}

type piErrReader struct{ err error }

func (r piErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestParsePiSessionReturnsReadErrors(t *testing.T) {
	boom := fmt.Errorf("disk on fire")
	r := io.MultiReader(strings.NewReader(`{"type":"session","version":3,"id":"s"}`+"\n"), piErrReader{boom})
	st, err := pisession.Parse(r)
	if err != boom {
		t.Fatalf("err = %v; want %v", err, boom)
	}
	if st.Phase != pilot.PhaseStarting || st.Reason != pisession.ReasonHeaderOnly {
		t.Errorf("state before the error = %q, %q; want starting, header-only", st.Phase, st.Reason)
	}
}

// piRepeatReader yields n copies of byte c.
type piRepeatReader struct {
	c byte
	n int64
}

func (r *piRepeatReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), r.n)
	for i := range p[:k] {
		p[i] = r.c
	}
	r.n -= k
	return int(k), nil
}

// The seed's test_pi_phase_reads_large_last_jsonl_event, at 50 MB rather
// than 20 KB: a last entry of any size parses (no bufio.Scanner limit).
func TestPiPhaseReadsLargeLastJsonlEvent(t *testing.T) {
	const size = 50 << 20
	head := `{"type":"session","version":3,"id":"s"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"big","name":"read"}],"stopReason":"toolUse"}}` + "\n" +
		`{"type":"message","id":"r","parentId":"a","message":{"role":"toolResult","toolCallId":"big","content":[{"type":"text","text":"`
	tail := `"}]}}` + "\n"
	r := io.MultiReader(strings.NewReader(head), &piRepeatReader{'x', size}, strings.NewReader(tail))
	st, err := pisession.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != pilot.PhaseAwaitingModel || st.Reason != pisession.ReasonAllToolResultsRecorded || st.LeafID != "r" {
		t.Errorf("got %q, %q, leaf %q; want awaiting-model, all-tool-results-recorded, r", st.Phase, st.Reason, st.LeafID)
	}
}

// A torn last line is incomplete, not corrupt: it counts once its "\n"
// arrives, however it was split.
func TestPiSessionIndexTornLine(t *testing.T) {
	var x pisession.Index
	x.Feed([]byte(`{"type":"session","version":3,"id":"s"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash"}],"stopReason":"toolUse"}}` + "\n"))
	result := `{"type":"message","id":"r","parentId":"a","message":{"role":"toolResult","toolCallId":"c1","content":[]}}`
	for i := range len(result) {
		x.Feed([]byte{result[i]})
		if st := x.State(); st.Phase != pilot.PhaseToolRunning {
			t.Fatalf("after %d bytes of the torn line: %q, %q; want tool-running", i+1, st.Phase, st.Reason)
		}
	}
	x.Feed([]byte("\n"))
	if st := x.State(); st.Phase != pilot.PhaseAwaitingModel || st.Reason != pisession.ReasonAllToolResultsRecorded {
		t.Errorf("after the newline: %q, %q; want awaiting-model, all-tool-results-recorded", st.Phase, st.Reason)
	}
	x.Reset()
	if st := x.State(); st.Phase != pilot.PhaseStarting || st.Reason != pisession.ReasonNoCompleteLine {
		t.Errorf("after Reset: %q, %q; want starting, no-complete-line", st.Phase, st.Reason)
	}
}

// piComplete returns data up to and including its last "\n".
func piComplete(data []byte) []byte {
	return data[:bytes.LastIndexByte(data, '\n')+1]
}

// piSplit cuts data into pieces at random points: mostly small, some large,
// some empty.
func piSplit(rng *rand.Rand, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		var n int
		switch rng.IntN(4) {
		case 0:
			n = 0
		case 1:
			n = 1 + rng.IntN(8)
		case 2:
			n = 1 + rng.IntN(256)
		default:
			n = 1 + rng.IntN(len(data))
		}
		n = min(n, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// The property: for any split of a file into appended chunks, the
// incremental state after each chunk equals Parse of the prefix up
// to the last complete line, and equals the reference reading (piRefState,
// written independently below).
func TestPiSessionIncrementalEqualsFull(t *testing.T) {
	inputs := map[string][]byte{}
	for _, path := range piFixtures(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(path)] = data
	}
	var gen bytes.Buffer
	piGenSession(&gen, 256<<10, rand.New(rand.NewPCG(1, 2)))
	inputs["generated-256KiB"] = gen.Bytes()

	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(piRefState(data), piParseBytes(t, data)); diff != "" {
				t.Fatalf("Parse differs from the reference (-want +got):\n%s", diff)
			}
			rng := rand.New(rand.NewPCG(uint64(len(data)), 7))
			for round := range 20 {
				var x pisession.Index
				fed := 0
				chunks := piSplit(rng, data)
				every := max(1, len(chunks)/64) // check about 64 prefixes a round
				for _, chunk := range chunks {
					x.Feed(chunk)
					fed += len(chunk)
					if rng.IntN(every) != 0 {
						continue
					}
					prefix := piComplete(data[:fed])
					if diff := cmp.Diff(piParseBytes(t, prefix), x.State()); diff != "" {
						t.Fatalf("round %d, after %d bytes (-full +incremental):\n%s", round, fed, diff)
					}
				}
				if diff := cmp.Diff(piParseBytes(t, data), x.State()); diff != "" {
					t.Fatalf("round %d, at the end (-full +incremental):\n%s", round, diff)
				}
			}
		})
	}
}

// The Tail follows a file being appended to in random pieces.
func TestPiSessionTailFollowsAppends(t *testing.T) {
	var gen bytes.Buffer
	piGenSession(&gen, 512<<10, rand.New(rand.NewPCG(3, 4)))
	data := gen.Bytes()
	path := filepath.Join(t.TempDir(), "session.jsonl")
	tail := pisession.Tail{Path: path}
	piCheckTail(t, &tail, "before the file exists", pilot.SessionState{
		Phase: pilot.PhaseStarting, Reason: pisession.ReasonNoSessionFile,
		ExpectedToolCallIDs: []string{}, CompletedToolCallIDs: []string{}, PendingToolCallIDs: []string{},
	})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fed := 0
	for _, chunk := range piSplit(rand.New(rand.NewPCG(5, 6)), data) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
		fed += len(chunk)
		piCheckTail(t, &tail, fmt.Sprintf("after %d bytes", fed), piParseBytes(t, piComplete(data[:fed])))
	}
}

func piCheckTail(t *testing.T, tail *pisession.Tail, when string, want pilot.SessionState) {
	t.Helper()
	got, err := tail.Update()
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", when, diff)
	}
}

// The Tail starts over when the file is truncated, replaced by another
// file, rewritten in place (even to a longer file), or removed.
func TestPiSessionTailStartsOver(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(piTestdata, name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	long := read("v3-many-tool-calls")       // tool-running
	short := read("seed-active-branch")      // awaiting-model
	other := read("v3-errored-then-retried") // finished
	if len(short) >= len(long) {
		t.Fatal("fixtures: short is not shorter than long")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "session.jsonl")
	write := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tail := pisession.Tail{Path: path}

	write(long)
	piCheckTail(t, &tail, "first read", piParseBytes(t, long))
	write(short) // same inode, shorter: truncated
	piCheckTail(t, &tail, "truncated", piParseBytes(t, short))

	// Rewritten in place, longer than before: only the first bytes tell.
	rewritten := append(bytes.Replace(long[:bytes.IndexByte(long, '\n')], []byte("0199a213"), []byte("ffffffff"), 1), long[bytes.IndexByte(long, '\n'):]...)
	write(rewritten)
	piCheckTail(t, &tail, "rewritten in place", piParseBytes(t, rewritten))

	// Replaced: another file renamed over it.
	tmp := filepath.Join(dir, "new.jsonl")
	if err := os.WriteFile(tmp, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	piCheckTail(t, &tail, "replaced", piParseBytes(t, other))

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	got, err := tail.Update()
	if err != nil || got.Phase != pilot.PhaseStarting || got.Reason != pisession.ReasonNoSessionFile {
		t.Fatalf("removed: %q, %q, %v; want starting, no-session-file", got.Phase, got.Reason, err)
	}
	write(short)
	piCheckTail(t, &tail, "created again", piParseBytes(t, short))
}

// A torn line of several MB arrives in pieces at the Tail.
func TestPiSessionTailLongTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	head := `{"type":"session","version":3,"id":"s"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"read"}],"stopReason":"toolUse"}}` + "\n"
	if err := os.WriteFile(path, []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := pisession.Tail{Path: path}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := []byte(`{"type":"message","id":"r","parentId":"a","message":{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"` +
		strings.Repeat("y", 6<<20) + `"}]}}`)
	for len(line) > 0 {
		n := min(len(line), 1<<20+17)
		if _, err := f.Write(line[:n]); err != nil {
			t.Fatal(err)
		}
		line = line[n:]
		if st, err := tail.Update(); err != nil || st.Phase != pilot.PhaseToolRunning {
			t.Fatalf("while the line is torn: %q, %v; want tool-running", st.Phase, err)
		}
	}
	if _, err := f.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	if st, err := tail.Update(); err != nil || st.Phase != pilot.PhaseAwaitingModel {
		t.Fatalf("after the newline: %q, %v; want awaiting-model", st.Phase, err)
	}
}

// FuzzParsePiSession: never panics, ends (every step is bounded by the
// input: no tree walks, no retries), agrees with the independent reference,
// and the incremental reading of a random split equals the full parse.
func FuzzParsePiSession(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(piTestdata, "*.jsonl"))
	for i, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) > 8<<10 {
			continue // keep the corpus small
		}
		f.Add(data, uint64(i))
	}
	f.Add([]byte(`{"type":"session","id":"s"}`+"\n"+`{"type":"message","message":{"role":"user"}}`+"\n"), uint64(0))
	f.Add([]byte("{\"type\":\"session\",\"version\":2,\"id\":\"s\"}\n{\"type\":\"message\",\"id\":\"\\ud800\",\"parentId\":null,\"message\":{\"role\":\"user\"}}\n"), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		full := piParseBytes(t, data)
		if diff := cmp.Diff(piRefState(data), full); diff != "" {
			t.Fatalf("Parse differs from the reference (-want +got):\n%s", diff)
		}
		var x pisession.Index
		for _, chunk := range piSplit(rand.New(rand.NewPCG(seed, seed>>1)), data) {
			x.Feed(chunk)
		}
		if diff := cmp.Diff(full, x.State()); diff != "" {
			t.Fatalf("incremental differs from the full parse (-full +incremental):\n%s", diff)
		}
		if _, err := json.Marshal(full); err != nil {
			t.Fatal(err)
		}
	})
}

// piRefState is a second, independent reading of the rules in session.go,
// for the property and fuzz tests: encoding/json into maps instead of the
// skimmer, and a walk of the active branch from the leaf instead of the
// per-entry summaries.
func piRefState(data []byte) pilot.SessionState {
	mk := func(phase pilot.SessionPhase, reason string) pilot.SessionState {
		return pilot.SessionState{Phase: phase, Reason: reason,
			ExpectedToolCallIDs: []string{}, CompletedToolCallIDs: []string{}, PendingToolCallIDs: []string{}}
	}
	type entry struct {
		id     string
		parent int // index into entries, -1 for none
		msg    map[string]any
	}
	var (
		entries []entry
		byID    = map[string]int{}
		header  bool
		version int
	)
	unknown := func(reason string) pilot.SessionState {
		s := mk(pilot.PhaseUnknown, reason)
		s.Version = version
		return s
	}
	lines := bytes.Split(piComplete(data), []byte("\n"))
	lines = lines[:len(lines)-1] // after the last "\n"
	for _, l := range lines {
		if len(bytes.Trim(l, " \t\r")) == 0 {
			continue
		}
		if !utf8.Valid(l) || !json.Valid(l) {
			return unknown(pisession.ReasonCorruptEntry)
		}
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return unknown(pisession.ReasonCorruptEntry)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return unknown(pisession.ReasonCorruptEntry)
		}
		typ, typOK := obj["type"].(string)
		if !header {
			header = true
			if _, idOK := obj["id"].(string); !typOK || typ != "session" || !idOK {
				return unknown(pisession.ReasonMissingSessionHeader)
			}
			var raw string
			switch ver := obj["version"].(type) {
			case nil:
				version = 1
				continue
			case json.Number:
				if n, err := strconv.Atoi(string(ver)); err == nil {
					version = n
					if n >= 1 && n <= 3 {
						continue
					}
				}
				raw = string(ver)
			case string:
				raw = strconv.QuoteToASCII(ver)
			default:
				raw = "invalid"
			}
			if len(raw) > 32 {
				raw = raw[:32]
			}
			return unknown("unsupported-session-version:" + raw)
		}
		if typOK && typ == "session" {
			continue
		}
		if !typOK || typ == "" {
			return unknown(pisession.ReasonCorruptEntry)
		}
		e := entry{parent: len(entries) - 1}
		if version >= 2 {
			idv, has := obj["id"]
			if !has {
				return unknown(pisession.ReasonMissingID)
			}
			id, ok := idv.(string)
			if !ok {
				return unknown(pisession.ReasonCorruptEntry)
			}
			e.id = id
			pv, has := obj["parentId"]
			if !has {
				return unknown(pisession.ReasonMissingParent)
			}
			switch p := pv.(type) {
			case nil:
				e.parent = -1
			case string:
				if i, ok := byID[p]; ok {
					e.parent = i
				} else {
					e.parent = -1
				}
			default:
				return unknown(pisession.ReasonCorruptEntry)
			}
		} else if id, ok := obj["id"].(string); ok {
			e.id = id
		}
		if typ == "message" {
			m, ok := obj["message"].(map[string]any)
			if !ok {
				return unknown(pisession.ReasonCorruptEntry)
			}
			if _, ok := m["role"].(string); !ok {
				return unknown(pisession.ReasonCorruptEntry)
			}
			e.msg = m
		}
		if version >= 2 {
			byID[e.id] = len(entries)
		}
		entries = append(entries, e)
	}
	if !header {
		return mk(pilot.PhaseStarting, pisession.ReasonNoCompleteLine)
	}
	if len(entries) == 0 {
		s := mk(pilot.PhaseStarting, pisession.ReasonHeaderOnly)
		s.Version = version
		return s
	}
	// The active branch, leaf first.
	var branch []map[string]any
	for i := len(entries) - 1; i >= 0; i = entries[i].parent {
		if entries[i].msg != nil {
			branch = append(branch, entries[i].msg)
		}
	}
	slices.Reverse(branch)
	s := piRefBranch(branch, mk)
	s.Version = version
	s.LeafID = entries[len(entries)-1].id
	return s
}

func piRefBranch(branch []map[string]any, mk func(pilot.SessionPhase, string) pilot.SessionState) pilot.SessionState {
	last := -1
	for i, m := range branch {
		if m["role"] == "assistant" {
			last = i
		}
	}
	// The last assistant message.
	var (
		calls              []string
		stop, errMsg, abad string
		stopOK             = true
	)
	if last >= 0 {
		a := branch[last]
		switch v := a["stopReason"].(type) {
		case nil:
		case string:
			stop = v
		default:
			stopOK = false
		}
		errMsg, _ = a["errorMessage"].(string)
		switch c := a["content"].(type) {
		case nil:
		case []any:
			for _, blk := range c {
				bm, ok := blk.(map[string]any)
				t, tok := bm["type"].(string)
				if !ok || !tok {
					abad = pisession.ReasonUnsupportedAssistantContent
					break
				}
				if t == "text" || t == "thinking" {
					continue
				}
				if t != "toolCall" {
					abad = pisession.ReasonUnsupportedAssistantContent
					break
				}
				id, _ := bm["id"].(string)
				if id == "" {
					abad = pisession.ReasonToolCallIDMissing
					break
				}
				if !slices.Contains(calls, id) {
					calls = append(calls, id)
				}
			}
		default:
			abad = pisession.ReasonUnsupportedAssistantContent
		}
		if abad != "" {
			calls = nil
		}
	}
	// What came after it.
	var (
		bad      string
		newest   string // role of the newest user, assistant or toolResult
		done     = map[string]bool{}
		ignored  = []string{"bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary", "system"}
		hasAsst  = last >= 0
		afterIdx = last + 1
	)
	if hasAsst {
		newest = "assistant"
	}
	for _, m := range branch[afterIdx:] {
		role := m["role"].(string)
		switch {
		case role == "user":
			newest = role
		case role == "toolResult":
			newest = role
			if bad != "" {
				continue
			}
			id, _ := m["toolCallId"].(string)
			switch {
			case id == "":
				bad = pisession.ReasonToolResultIDMissing
			case !slices.Contains(calls, id):
				bad = pisession.ReasonToolResultIDUnmatched
			default:
				done[id] = true
			}
		case slices.Contains(ignored, role):
		default:
			if bad == "" {
				bad = pisession.ReasonUnsupportedMessageRole
			}
		}
	}
	if bad == "" && newest == "" {
		return mk(pilot.PhaseStarting, pisession.ReasonNoMessages)
	}
	if bad == "" && newest == "user" {
		return mk(pilot.PhaseAwaitingModel, pisession.ReasonUserMessage)
	}
	s := mk(pilot.PhaseUnknown, bad)
	if !hasAsst {
		return s
	}
	s.StopReason, s.ErrorMessage = stop, errMsg
	if abad == "" && bad == "" && stopOK && (stop == "error" || stop == "aborted") {
		calls = nil // the phase is errored
	}
	for _, id := range calls {
		s.ExpectedToolCallIDs = append(s.ExpectedToolCallIDs, id)
		if done[id] {
			s.CompletedToolCallIDs = append(s.CompletedToolCallIDs, id)
		} else {
			s.PendingToolCallIDs = append(s.PendingToolCallIDs, id)
		}
	}
	switch {
	case bad != "":
	case abad != "":
		s.Reason = abad
	case stopOK && (stop == "error" || stop == "aborted"):
		s.Phase, s.Reason = pilot.PhaseErrored, pisession.ReasonAssistantError
	case len(calls) > 0 && len(done) == len(calls):
		s.Phase, s.Reason = pilot.PhaseAwaitingModel, pisession.ReasonAllToolResultsRecorded
	case len(calls) > 0:
		s.Phase, s.Reason = pilot.PhaseToolRunning, pisession.ReasonToolResultsPending
	case !stopOK:
		s.Reason = pisession.ReasonUnsupportedStopReason
	case stop == "stop" || stop == "length":
		s.Phase, s.Reason = pilot.PhaseFinished, pisession.ReasonFinalAssistantMessage
	case stop == "toolUse":
		s.Reason = pisession.ReasonToolUseWithoutToolCalls
	case stop == "":
		s.Reason = pisession.ReasonStopReasonMissing
	default:
		s.Reason = pisession.ReasonUnsupportedStopReason
	}
	return s
}

func ExampleParse() {
	session := `{"type":"session","version":3,"id":"0199a213","timestamp":"2026-03-15T10:00:00.000Z","cwd":"/work"}
{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"Run the tests."}}
{"type":"message","id":"a2","parentId":"a1","message":{"role":"assistant","content":[{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"go test ./..."}},{"type":"toolCall","id":"call_2","name":"read","arguments":{"path":"go.mod"}}],"stopReason":"toolUse"}}
{"type":"message","id":"a3","parentId":"a2","message":{"role":"toolResult","toolCallId":"call_2","toolName":"read","content":[{"type":"text","text":"module x"}]}}
`
	st, err := pisession.Parse(strings.NewReader(session))
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Phase, st.Reason, st.PendingToolCallIDs)
	// Output: tool-running tool-results-pending [call_1]
}

func ExampleIndex() {
	var x pisession.Index
	x.Feed([]byte(`{"type":"session","version":3,"id":"s"}` + "\n"))
	x.Feed([]byte(`{"type":"message","id":"a1","parentId":null,"message":{"role":"user","content":"hi"}}`))
	fmt.Println(x.State().Phase, x.State().Reason) // the user message has no "\n" yet
	x.Feed([]byte("\n"))
	fmt.Println(x.State().Phase, x.State().Reason)
	// Output:
	// starting header-only
	// awaiting-model user-message
}

func ExampleTail() {
	dir, err := os.MkdirTemp("", "pi-session")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	tail := pisession.Tail{Path: filepath.Join(dir, "session.jsonl")}

	st, _ := tail.Update() // pi has not written the file yet
	fmt.Println(st.Phase, st.Reason)

	os.WriteFile(tail.Path, []byte(`{"type":"session","version":3,"id":"s"}
{"type":"message","id":"a1","parentId":null,"message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"stopReason":"stop"}}
`), 0o644)
	st, _ = tail.Update()
	fmt.Println(st.Phase, st.Reason, st.LeafID)
	// Output:
	// starting no-session-file
	// finished final-assistant-message a1
}

func ExampleParse_json() {
	st, _ := pisession.Parse(strings.NewReader(`{"type":"session","version":3,"id":"s"}
{"type":"message","id":"a1","parentId":null,"message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error."}}
`))
	out, _ := json.Marshal(st)
	fmt.Println(string(out))
	// Output: {"phase":"errored","reason":"assistant-error","expected_tool_call_ids":[],"completed_tool_call_ids":[],"pending_tool_call_ids":[],"version":3,"leaf_id":"a1","stop_reason":"error","error_message":"Connection error."}
}

// piRandomSession writes a random session that is mostly well formed:
// branches (parents drawn from earlier ids, sometimes unknown or null),
// every message role, tool calls and results over a small id pool, every
// stopReason, and now and then a schema or JSON fault. Byte-level fuzzing
// rarely builds such trees; this drives the summaries against the
// reference's walk.
func piRandomSession(rng *rand.Rand) []byte {
	var b bytes.Buffer
	versions := []string{"3", "3", "3", "3", "3", "3", "3", "3", "2", "2", "1", "1", "null", "4", `"3"`}
	v := versions[rng.IntN(len(versions))]
	fmt.Fprintf(&b, `{"type":"session","version":%s,"id":"s","cwd":"/w"}`+"\n", v)
	var ids []string
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	callIDs := []string{"c1", "c2", "c3", "c4"}
	var lastCalls []string // the calls of the last assistant message written
	for i := range 1 + rng.IntN(14) {
		id := fmt.Sprintf("e%d", i)
		if rng.IntN(10) == 0 && len(ids) > 0 {
			id = ids[rng.IntN(len(ids))] // a repeated id
		}
		parent := `null`
		switch r := rng.IntN(10); {
		case r < 6 && len(ids) > 0:
			parent = strconv.Quote(ids[len(ids)-1])
		case r < 9 && len(ids) > 0:
			parent = strconv.Quote(ids[rng.IntN(len(ids))])
		case r == 9:
			parent = `"nowhere"`
		}
		head := fmt.Sprintf(`"id":%q,"parentId":%s`, id, parent)
		if rng.IntN(300) == 0 {
			head = fmt.Sprintf(`"id":%q`, id) // missing parent
		}
		var body string
		switch rng.IntN(6) {
		case 0:
			body = fmt.Sprintf(`"type":%q`, pick("custom", "label", "model_change", "compaction", "branch_summary", "session_info", "custom_message", "thinking_level_change", "future_entry"))
		case 1:
			body = fmt.Sprintf(`"type":"message","message":{"role":%q,"content":"x"}`, pick("user", "user", "user", "bashExecution", "custom", "hookMessage", "user", "futureRole"))
		case 2, 3:
			var blocks []string
			lastCalls = lastCalls[:0]
			for range rng.IntN(4) {
				switch rng.IntN(8) {
				case 0:
					blocks = append(blocks, `{"type":"text","text":"t"}`)
				case 1:
					blocks = append(blocks, `{"type":"thinking","thinking":"t"}`)
				case 2:
					if rng.IntN(4) == 0 {
						blocks = append(blocks, `{"type":"image","data":""}`)
					}
				case 3:
					if rng.IntN(4) == 0 {
						blocks = append(blocks, `{"type":"toolCall","name":"bash"}`)
					}
				default:
					c := pick(callIDs...)
					lastCalls = append(lastCalls, c)
					blocks = append(blocks, fmt.Sprintf(`{"type":"toolCall","id":%q,"name":"bash","arguments":{}}`, c))
				}
			}
			stop := pick(`"stop"`, `"toolUse"`, `"toolUse"`, `"length"`, `"error"`, `"aborted"`, `"pending"`, `null`, `7`, ``)
			m := fmt.Sprintf(`"role":"assistant","content":[%s]`, strings.Join(blocks, ","))
			if stop != "" {
				m += `,"stopReason":` + stop
			}
			if rng.IntN(3) == 0 {
				m += `,"errorMessage":"boom"`
			}
			body = `"type":"message","message":{` + m + `}`
		default:
			c := pick(callIDs...)
			if len(lastCalls) > 0 && rng.IntN(4) != 0 {
				c = pick(lastCalls...)
			}
			tc := fmt.Sprintf(`"toolCallId":%q,`, c)
			if rng.IntN(15) == 0 {
				tc = ""
			}
			body = fmt.Sprintf(`"type":"message","message":{"role":"toolResult",%s"content":[]}`, tc)
		}
		line := "{" + head + "," + body + "}"
		if rng.IntN(300) == 0 {
			line = line[:len(line)-1] // corrupt
		}
		if rng.IntN(50) == 0 {
			line = "\t " // blank
		}
		b.WriteString(line + "\n")
		ids = append(ids, id)
	}
	if rng.IntN(4) == 0 {
		b.WriteString(`{"type":"message","id":"torn"`) // a torn last line
	}
	return b.Bytes()
}

func TestPiSessionRandomTreesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	phases := map[pilot.SessionPhase]int{}
	reasons := map[string]int{}
	for i := range 5000 {
		data := piRandomSession(rng)
		full := piParseBytes(t, data)
		phases[full.Phase]++
		reasons[full.Reason]++
		if diff := cmp.Diff(piRefState(data), full); diff != "" {
			t.Fatalf("case %d:\n%s\nParsePiSession differs from the reference (-want +got):\n%s", i, data, diff)
		}
		var x pisession.Index
		for _, chunk := range piSplit(rng, data) {
			x.Feed(chunk)
		}
		if diff := cmp.Diff(full, x.State()); diff != "" {
			t.Fatalf("case %d:\n%s\nincremental differs (-full +incremental):\n%s", i, data, diff)
		}
	}
	t.Logf("phases: %v\nreasons: %v", phases, reasons)
	// The generator reaches every phase, or this test proves little.
	for _, p := range []pilot.SessionPhase{pilot.PhaseStarting, pilot.PhaseAwaitingModel, pilot.PhaseToolRunning, pilot.PhaseFinished, pilot.PhaseErrored, pilot.PhaseUnknown} {
		if phases[p] < 20 {
			t.Errorf("only %d random sessions in phase %s: %v", phases[p], p, phases)
		}
	}
}
