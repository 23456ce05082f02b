package agents

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/jsonskim"
)

// claudeDecodeJSON is the watcher's decode as encoding/json gave it before
// the skim: a long line's shrunk copy when it decodes as an assistant or
// user event, else the line whole.
func claudeDecodeJSON(data []byte) (claudeEvent, bool) {
	var ev claudeEvent
	if len(data) >= claudeSkimBytes {
		if claudeDecode(jsonskim.Shrink(nil, data, 1024), &ev) && (ev.Type == "assistant" || ev.Type == "user") {
			return ev, true
		}
		ev = claudeEvent{}
	}
	return ev, claudeDecode(data, &ev)
}

// claudeBlocksJSON is what the watcher read of a message's content by
// decoding it: its blocks, each decoded into a claudeBlock.
func claudeBlocksJSON(content json.RawMessage) []claudeBlock {
	c := bytes.TrimSpace(content)
	if len(c) == 0 || c[0] != '[' {
		return nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(c, &raw) != nil {
		return nil
	}
	out := make([]claudeBlock, 0, len(raw))
	for _, r := range raw {
		var b claudeBlock
		if claudeDecode(r, &b) {
			out = append(out, b)
		}
	}
	return out
}

// claudeReadBlock is what the watcher acts on in a block: its type, id and
// tool_use_id, and whether a text block's text is not blank.
type claudeReadBlock struct {
	Type, ID, ToolUseID string
	Text                bool
}

// claudeReadBlocks projects blocks onto what the watcher acts on, leaving
// out the empty ones (an element that is not an object decodes as one).
func claudeReadBlocks[B any](bs []B, read func(B) claudeReadBlock) []claudeReadBlock {
	var out []claudeReadBlock
	for _, b := range bs {
		if r := read(b); r != (claudeReadBlock{}) {
			out = append(out, r)
		}
	}
	return out
}

// checkClaudeRead fails unless the watcher w reads data, a line, as
// decoding it reads it: the event, and its message's blocks.
func checkClaudeRead(t testing.TB, w *claudeWatcher, data []byte) {
	t.Helper()
	want, wantOK := claudeDecodeJSON(data)
	var got claudeEvent
	gotOK := w.decode(data, &got)
	if gotOK != wantOK {
		t.Fatalf("%.300s\nskim reads it: %v, encoding/json: %v", data, gotOK, wantOK)
	}
	if !gotOK {
		return
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%.300s\nthe event (-encoding/json +skim):\n%s", data, d)
	}
	if got.SessionID != "" {
		w.sessionID = got.SessionID
	}
	if got.Message == nil {
		return
	}
	wantBlocks := claudeReadBlocks(claudeBlocksJSON(want.Message.Content), func(b claudeBlock) claudeReadBlock {
		return claudeReadBlock{b.Type, b.ID, b.ToolUseID, b.Type == "text" && strings.TrimSpace(b.Text) != ""}
	})
	read := func(b claudeContentBlock) claudeReadBlock {
		return claudeReadBlock{string(b.typ), string(b.id), string(b.toolUseID), b.text}
	}
	// The blocks read with the line, then those of its content alone.
	if d := cmp.Diff(wantBlocks, claudeReadBlocks(w.messageBlocks(got.Message), read)); d != "" {
		t.Fatalf("%.300s\nthe blocks (-encoding/json +skim):\n%s", data, d)
	}
	if d := cmp.Diff(wantBlocks, claudeReadBlocks(w.blocks(got.Message.Content), read)); d != "" {
		t.Fatalf("%.300s\nthe blocks of the content (-encoding/json +skim):\n%s", data, d)
	}
}

// claudeStreamLines returns the stdout lines of the recorded claude and
// qwen streams (testdata/ at the repository root and agents/testdata/),
// and the example lines of formats-qwen-code.md.
func claudeStreamLines(t testing.TB) [][]byte {
	lines := append(recordedLines(t, RunnerClaude), recordedLines(t, RunnerQwen)...)
	files, _ := filepath.Glob(filepath.Join("testdata", "qwen", "stream", "*.stdout.jsonl"))
	files = append(files, "formats-qwen-code.md")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 && l[0] == '{' {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// claudeOddLines are lines beside the recorded streams': wrong types,
// nulls, escapes, duplicate keys and keys in another case, lines cut
// short or not JSON.
var claudeOddLines = []string{
	`{}`, `{"type":"assistant"}`, `{"type":"assistant","message":null}`, `{"type":"assistant","message":7}`,
	`{"type":"assistant","message":"m"}`, `{"type":"assistant","message":[1]}`, `{"type":"assistant","message":{}}`,
	`{"type":7,"session_id":"s"}`, `{"type":null,"subtype":null,"session_id":null}`, `{"type":"x","session_id":["s"]}`,
	`{"type":"assistant","message":{"id":"m1","model":"c","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":2,"cache_read_input_tokens":3,"cache_creation_input_tokens":4}}}`,
	`{"type":"assistant","message":{"id":7,"model":null,"content":"text","usage":null}}`,
	`{"type":"assistant","message":{"usage":{"input_tokens":1.5,"output_tokens":-2,"cache_read_input_tokens":1e3,"cache_creation_input_tokens":"4"}}}`,
	`{"type":"assistant","message":{"usage":{"input_tokens":9223372036854775807,"output_tokens":9223372036854775808,"cache_read_input_tokens":-9223372036854775808,"cache_creation_input_tokens":123456789012345678}}}`,
	`{"type":"assistant","message":{"usage":7}}`, `{"type":"assistant","message":{"usage":[]}}`, `{"type":"assistant","message":{"usage":{"input_tokens":null}}}`,
	`{"type":"assistant","message":{"content":[null,7,"s",[],{},{"type":"tool_use","id":"a"},{"type":"tool_use","id":7},{"type":null,"id":"b"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"  \n\t"},{"type":"text","text":"\n\u00a0"},{"type":"text","text":"\u0085x"},{"type":"text","text":"\\"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"\t\u0020"},{"type":"text","text":7},{"type":"text","text":null},{"type":"text","text":"\b"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"é"},{"type":"text","text":" ` + "\u3000" + `"},{"type":"text","text":"` + "\xff" + `"}]}}`,
	`{"type":"assistant","message":{"content":[{"Type":"tool_use","id":"a"},{"type":"tool_use","ID":"b"},{"type":"tool_use","id":"c","id":"d"},{"type":"tool_use","id":"e","id":7}]}}`,
	`{"type":"assistant","message":{"content":[{"t\u0079pe":"tool_use","id":"a"},{"type":"tool_\u0075se","id":"b\"c"}]}}`,
	`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":null},{"type":"tool_result"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","text":"x"},{"text":"y"},{"text":"z","type":"text"}]}}`,
	`{"type":"user","message":{"content":"plain"}}`, `{"type":"user","message":{"content":  [ {"type" : "tool_result" , "tool_use_id" : "x" } ] }}`,
	`{"type":"assistant","parent_tool_use_id":"p","message":{"content":[{"type":"text","text":"sub"}]}}`,
	`{"type":"assistant","parent_tool_use_id":7,"message":{}}`, `{"type":"assistant","parent_tool_use_id":null}`, `{"type":"assistant","parent_tool_use_id":"p\u00e9"}`,
	`{"type":"assistant","error":"rate_limit","message":{"model":"<synthetic>"}}`, `{"type":"assistant","error":null}`, `{"type":"assistant","error":{"a":1}}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":1500,"error_status":529,"error":"server_error"}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":"1500","error_status":"529"}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":null,"error_status":null}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":1e400}`, `{"type":"system","subtype":"api_retry","retry_delay_ms":-1.5e-3}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":true}`, `{"type":"system","subtype":"api_retry","retry_delay_ms":{}}`,
	`{"type":"system","subtype":"api_retry","retry_delay_ms":12345678901234567890.5}`,
	`{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.0102,"usage":{"input_tokens":9}}`,
	`{"type":"result","is_error":"yes","result":7,"terminal_reason":null,"total_cost_usd":"1","usage":"u"}`,
	`{"type":"result","is_error":true,"is_error":false}`, `{"type":"result","IS_ERROR":true}`, `{"type":"result","result":"a\u0000b\ud800"}`,
	`{"type":"result","total_cost_usd":null,"usage":null}`, `{"type":"result","terminal_reason":"max_turns","subtype":"error_max_turns"}`,
	`{"type":"system","type":"result"}`, `{"Type":"result"}`, `{"tyPe":"result"}`, `{"\u0074ype":"result"}`, `{"type":"result","ſubtype":"x"}`,
	`{"type":"result","x":"é","\u00e9":1}`, `{"type":"result","message":{"ID":"a","id":"b"}}`, `{"type":"result","usage":{"input_tokens":1,"input_tokens":2}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}`, `{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"},]}}`, `{"type":"assistant",}`, `{"type":"assistant" "x":1}`,
	`{"type":"assistant","n":01}`, `{"type":"assistant","n":tru}`, `{"type":"assistant","n":-}`, "{\"type\":\"assistant\",\"s\":\"a\tb\"}",
	`{"type":"assistant","n":1} x`, `{"type":"assistant","n":1}  `, `{"type":"stream_event","session_id":"s2","event":{"type":"message_start"}}`,
	`{"type":"a\u0073sistant","message":{"content":[{"type":"text","text":"hi"}]}}`, `{"type":"assistant","session_id":"s\"1"}`,
	"{\"type\":\"assistant\",\"session_id\":\"\xff\"}",
}

// claudeLongLines are lines of 16 KiB and more, which the watcher reads
// from a shrunk copy when they are assistant or user events.
func claudeLongLines() []string {
	long := strings.Repeat("x", 20<<10)
	blank := strings.Repeat(" ", 20<<10)
	longID := strings.Repeat("i", 2000)
	return []string{
		`{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"` + long + `"}]}}`,
		`{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"` + blank + `"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"` + longID + `","input":{"c":"` + long + `"}}]}}`,
		`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"` + longID + `","content":"` + long + `"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"` + long + "\t" + long + `"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"` + long + `"}]}`,
		`{"type":"result","result":"` + long + `"}`,
		`{"type":"result","result":"` + long + "\t" + `"}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat(`\n`, 10<<10) + `"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat(`\u00e9`, 4<<10) + `"}]}}`,
	}
}

// TestClaudeSkim: the watcher reads every line of the recorded claude and
// qwen streams, and the odd and long lines, as encoding/json decodes it.
func TestClaudeSkim(t *testing.T) {
	var w claudeWatcher
	lines := claudeStreamLines(t)
	if len(lines) < 100 {
		t.Errorf("%d recorded lines, want at least 100", len(lines))
	}
	for _, l := range lines {
		checkClaudeRead(t, &w, l)
	}
	for _, l := range append(claudeOddLines, claudeLongLines()...) {
		checkClaudeRead(t, &w, []byte(l))
		checkClaudeRead(t, &claudeWatcher{}, []byte(l))
	}
}

// FuzzClaudeSkim: the watcher reads any line as encoding/json decodes it.
func FuzzClaudeSkim(f *testing.F) {
	for _, l := range claudeStreamLines(f) {
		f.Add(l)
	}
	for _, l := range claudeOddLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.TrimSpace(data)
		if len(data) == 0 || data[0] != '{' {
			return // Line reads no other
		}
		var w claudeWatcher
		checkClaudeRead(t, &w, data)
	})
}

// TestClaudeNonBlank: claudeNonBlank reads a string as decoding it and
// trimming its white space does.
func TestClaudeNonBlank(t *testing.T) {
	for _, raw := range []string{`""`, `" "`, `"\n\t\r "`, `"x"`, `" x"`, `"\u0020"`, `"\u0041"`, `"\u00a0"`, `"\u0085"`, `"\u3000 "`,
		`"\b"`, `"\f"`, `"\""`, `"\\"`, `"\/"`, `"é"`, "\"\xff\"", "\"\u00a0\"", "\"\v\"", `7`, `null`, `"`} {
		var s string
		want := json.Unmarshal([]byte(raw), &s) == nil && strings.TrimSpace(s) != ""
		if got := claudeNonBlank([]byte(raw)); got != want {
			t.Errorf("claudeNonBlank(%s) = %v, want %v", raw, got, want)
		}
	}
}

// claudeEventErrorJSON is claudeEventError as it was, which decoded every
// assistant line with an "error" in it.
func claudeEventErrorJSON(line string) (pilot.Classification, bool) {
	typ, typed := leadingType(line)
	switch {
	case typed && typ != "result" && typ != "assistant":
		return pilot.Classification{}, false
	case typ == "assistant":
		if !strings.Contains(line, `"error"`) {
			return pilot.Classification{}, false
		}
	case !strings.Contains(line, `"is_error"`) && !strings.Contains(line, `"error"`):
		return pilot.Classification{}, false
	}
	return claudeDecodedError(line)
}

// claudeErrorLines are assistant lines with an "error" in them, beside
// the recorded streams'.
var claudeErrorLines = []string{
	`{"type":"assistant","error":"rate_limit","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 429"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"text","text":"the \"error\" key"}]},"error":"authentication_failed"}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","input":{"error":"x"}}]}}`,
	`{"type":"assistant","ERROR":"rate_limit","error":""}`, `{"type":"assistant","error":"","Error":"rate_limit"}`,
	`{"type":"assistant","\u0065rror":"rate_limit","x":"error"}`, `{"type":"assistant","error":7,"x":"error"}`,
	`{"type":"assistant","error":"\u0000"}`, `{"type":"assistant","error":"billing_error"`, `{"type":"assistant","error":"server_error","message":7}`,
	`{"type":"assistant","error":"server_error","message":{"content":"error"}}`, `{"type":"assistant", "error" : "unknown" }`,
}

// TestClaudeEventError: claudeEventError classifies every line as it did
// when it decoded each assistant line with an "error" in it.
func TestClaudeEventError(t *testing.T) {
	lines := claudeStreamLines(t)
	for _, l := range claudeOddLines {
		lines = append(lines, []byte(l))
	}
	for _, l := range claudeErrorLines {
		lines = append(lines, []byte(l))
	}
	for _, l := range lines {
		want, wantOK := claudeEventErrorJSON(string(l))
		got, gotOK := claudeEventError(string(l))
		if d := cmp.Diff(want, got); d != "" || gotOK != wantOK {
			t.Errorf("%.300s\nclassified %v, before %v (-before +now):\n%s", l, gotOK, wantOK, d)
		}
	}
}

// FuzzClaudeEventError: claudeEventError classifies any line as it did.
func FuzzClaudeEventError(f *testing.F) {
	for _, l := range claudeErrorLines {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		want, wantOK := claudeEventErrorJSON(line)
		got, gotOK := claudeEventError(line)
		if d := cmp.Diff(want, got); d != "" || gotOK != wantOK {
			t.Fatalf("%q\nclassified %v, before %v (-before +now):\n%s", line, gotOK, wantOK, d)
		}
	})
}
