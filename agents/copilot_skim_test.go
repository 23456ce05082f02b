package agents

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// copilotRead is what the watcher acts on in an event's data.
type copilotRead struct {
	Content                                           bool
	ToolRequests                                      []string
	ToolCallID                                        string
	StatusCode                                        int
	ErrorMessage, FailureKind, Reason, ErrorType, Msg string
}

// copilotReadJSON is what the watcher read of a line by decoding it into
// a copilotEvent, as it did before the skim, and whether it decoded (the
// watcher ignored any other line).
func copilotReadJSON(data []byte) (copilotRead, bool) {
	var ev copilotEvent
	if json.Unmarshal(data, &ev) != nil {
		return copilotRead{}, false
	}
	d := ev.Data
	r := copilotRead{strings.TrimSpace(d.Content) != "", nil, d.ToolCallID, d.StatusCode, d.ErrorMessage, d.FailureKind, d.Reason, d.ErrorType, d.Message}
	for _, t := range d.ToolRequests {
		r.ToolRequests = append(r.ToolRequests, t.ToolCallID)
	}
	return r, true
}

// copilotReadSkim is copilotRead of what the skim read.
func copilotReadSkim(d *copilotData) copilotRead {
	r := copilotRead{d.content, nil, string(d.toolCallID), d.statusCode, string(d.errorMessage), string(d.failureKind), string(d.reason), string(d.errorType), string(d.message)}
	for _, t := range d.toolRequests {
		r.ToolRequests = append(r.ToolRequests, string(t))
	}
	return r
}

// checkCopilotRead fails unless s reads data, as an event line and as a
// result line, as decoding it does: both s's reading whole, and the skim
// alone wherever it is sure.
func checkCopilotRead(t testing.TB, s *copilotSkim, data []byte) {
	t.Helper()
	want, wantOK := copilotReadJSON(data)
	switch s.skimEvent(data) {
	case skimRead:
		if !wantOK {
			t.Fatalf("%.300s\nthe skim reads it, encoding/json does not", data)
		}
		if d := cmp.Diff(want, copilotReadSkim(&s.ev)); d != "" {
			t.Fatalf("%.300s\nthe skim's event (-encoding/json +skim):\n%s", data, d)
		}
	case skimFailed:
		if wantOK {
			t.Fatalf("%.300s\nthe skim fails on it, encoding/json does not", data)
		}
	}
	if gotOK := s.event(data); gotOK != wantOK {
		t.Fatalf("%.300s\nread as an event: %v, encoding/json: %v", data, gotOK, wantOK)
	} else if gotOK {
		if d := cmp.Diff(want, copilotReadSkim(&s.ev)); d != "" {
			t.Fatalf("%.300s\nthe event (-encoding/json +read):\n%s", data, d)
		}
	}

	var wantR copilotResult
	wantROK := json.Unmarshal(data, &wantR) == nil
	var r copilotResult
	sid, gotROK := s.result(data, &r)
	if gotROK != wantROK {
		t.Fatalf("%.300s\nread as a result: %v, encoding/json: %v", data, gotROK, wantROK)
	}
	if !gotROK {
		return
	}
	r.SessionID = string(sid)
	got := r
	if d := cmp.Diff(wantR, got); d != "" {
		t.Fatalf("%.300s\nthe result (-encoding/json +read):\n%s", data, d)
	}
}

// copilotStreamLines returns the stdout lines of the recorded copilot
// streams (testdata/ at the repository root and agents/testdata/).
func copilotStreamLines(t testing.TB) [][]byte {
	files, _ := filepath.Glob(filepath.Join("testdata", "copilot", "stream", "*.stdout.jsonl"))
	if len(files) == 0 {
		t.Fatal("no recorded copilot streams in agents/testdata")
	}
	return append(recordedLines(t, RunnerCopilot), fileLines(t, files)...)
}

// copilotOddLines are lines beside the recorded streams': wrong types,
// nulls, escapes, duplicate keys and keys in another case, lines cut
// short or not JSON.
var copilotOddLines = []string{
	`{}`, `null`, `[]`, `7`, `"s"`, `{"type":"assistant.message"}`, `{"type":"assistant.message","data":null}`,
	`{"type":"assistant.message","data":7}`, `{"type":"assistant.message","data":"d"}`, `{"type":"assistant.message","data":[]}`,
	`{"type":"assistant.message","data":true}`, `{"type":"assistant.message","data":{}}`, `{"type":7,"data":{}}`, `{"type":null}`,
	`{"type":["x"],"data":{"content":"hi"}}`, `{"type":{},"data":{}}`,
	`{"type":"assistant.message","data":{"content":"hi","toolRequests":[{"toolCallId":"a"},{"toolCallId":"b","name":"bash"}]}}`,
	`{"type":"assistant.message","data":{"content":"","toolRequests":[]}}`, `{"type":"assistant.message","data":{"content":null,"toolRequests":null}}`,
	`{"type":"assistant.message","data":{"content":7}}`, `{"type":"assistant.message","data":{"content":["hi"]}}`,
	`{"type":"assistant.message","data":{"content":{"text":"hi"}}}`, `{"type":"assistant.message","data":{"content":false}}`,
	`{"type":"assistant.message","data":{"content":"  \n\t"}}`, `{"type":"assistant.message","data":{"content":"\u00a0\u0085"}}`,
	`{"type":"assistant.message","data":{"content":"\u0020\t"}}`, `{"type":"assistant.message","data":{"content":"\u3000x"}}`,
	`{"type":"assistant.message","data":{"content":"` + "\xff" + `"}}`, `{"type":"assistant.message","data":{"content":"é"}}`,
	`{"type":"assistant.message","data":{"content":"\b"}}`, `{"type":"assistant.message","data":{"content":"\\"}}`,
	`{"type":"assistant.message","data":{"toolRequests":[null,{"toolCallId":"a"},{},{"toolCallId":null}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[7]}}`, `{"type":"assistant.message","data":{"toolRequests":["a"]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[[]]}}`, `{"type":"assistant.message","data":{"toolRequests":[true]}}`,
	`{"type":"assistant.message","data":{"toolRequests":{"toolCallId":"a"}}}`, `{"type":"assistant.message","data":{"toolRequests":"a"}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":7}]}}`, `{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":["a"]}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a","toolCallId":"b"}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"ToolCallId":"a"}]}}`, `{"type":"assistant.message","data":{"toolRequests":[{"toolcallid":"a"}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCall\u0049d":"a"}]}}`, `{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a\"b\u00e9"}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"` + "\xff\xfe" + `"}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a"}],"toolRequests":[{"toolCallId":"b"}]}}`,
	`{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a","arguments":{"toolCallId":"x","c":[1,{"d":null}]}}]}}`,
	`{"type":"assistant.message","data":{"content":"a"},"data":{"toolRequests":[{"toolCallId":"b"}]}}`,
	`{"type":"assistant.message","Data":{"content":"a"}}`, `{"type":"assistant.message","DATA":{"content":"a"},"data":{}}`,
	`{"type":"assistant.message","d\u0061ta":{"content":"a"}}`, `{"TYPE":"x","data":{"content":"a"}}`, `{"type":"x","type":7}`,
	`{"type":"assistant.message","data":{"Content":"a"}}`, `{"type":"assistant.message","data":{"content":"","CONTENT":"a"}}`,
	`{"type":"assistant.message","data":{"c\u006fntent":"a"}}`, `{"type":"assistant.message","data":{"content":"a","content":""}}`,
	`{"type":"assistant.message","data":{"ſtatusCode":1}}`, `{"type":"assistant.message","data":{"é":1,"\u00e9":2,"x\ny":3}}`,
	`{"type":"tool.execution_start","data":{"toolCallId":"t1"}}`, `{"type":"tool.execution_start","data":{"toolCallId":""}}`,
	`{"type":"tool.execution_start","data":{"toolCallId":1}}`, `{"type":"tool.execution_complete","data":{"toolCallId":"t1","success":false}}`,
	`{"type":"tool.execution_complete","data":{"toolCallId":"t\u0031"}}`, `{"type":"tool.execution_complete","data":{"toolcallid":"t1"}}`,
	`{"type":"model.call_failure","data":{"statusCode":429,"errorMessage":"429 Too Many Requests","failureKind":"http"}}`,
	`{"type":"model.call_failure","data":{"statusCode":0,"errorMessage":"connection refused","failureKind":"transport"}}`,
	`{"type":"model.call_failure","data":{"statusCode":"429"}}`, `{"type":"model.call_failure","data":{"statusCode":429.0}}`,
	`{"type":"model.call_failure","data":{"statusCode":4.29e2}}`, `{"type":"model.call_failure","data":{"statusCode":1e2}}`,
	`{"type":"model.call_failure","data":{"statusCode":-1}}`, `{"type":"model.call_failure","data":{"statusCode":-0}}`,
	`{"type":"model.call_failure","data":{"statusCode":null}}`, `{"type":"model.call_failure","data":{"statusCode":true}}`,
	`{"type":"model.call_failure","data":{"statusCode":{}}}`, `{"type":"model.call_failure","data":{"statusCode":[500]}}`,
	`{"type":"model.call_failure","data":{"statusCode":999999999}}`, `{"type":"model.call_failure","data":{"statusCode":1000000000}}`,
	`{"type":"model.call_failure","data":{"statusCode":9223372036854775807}}`, `{"type":"model.call_failure","data":{"statusCode":9223372036854775808}}`,
	`{"type":"model.call_failure","data":{"statusCode":-9223372036854775808}}`, `{"type":"model.call_failure","data":{"statusCode":-9223372036854775809}}`,
	`{"type":"model.call_failure","data":{"statusCode":2147483648}}`, `{"type":"model.call_failure","data":{"statusCode":500,"statusCode":502}}`,
	`{"type":"model.call_failure","data":{"errorMessage":7}}`, `{"type":"model.call_failure","data":{"failureKind":null,"errorMessage":"a\u0000b\ud800"}}`,
	`{"type":"assistant.turn_retry","data":{"reason":"rate_limit"}}`, `{"type":"assistant.turn_retry","data":{"reason":7}}`,
	`{"type":"assistant.turn_retry","data":{"Reason":"rate_limit"}}`, `{"type":"assistant.turn_retry","data":{"reason":"rate_\u006cimit"}}`,
	`{"type":"session.error","data":{"errorType":"query","message":"Execution failed: 400","statusCode":400}}`,
	`{"type":"session.error","data":{"errorType":["query"],"message":"m"}}`, `{"type":"session.error","data":{"message":{"text":"m"}}}`,
	`{"type":"session.error","data":{"errorType":"authentication","message":null}}`, `{"type":"session.error","data":{"MESSAGE":"m"}}`,
	`{"type":"result","sessionId":"s1","exitCode":0}`, `{"type":"result","sessionId":"s1","exitCode":1}`, `{"type":"result","exitCode":null}`,
	`{"type":"result"}`, `{"type":"result","sessionId":7,"exitCode":0}`, `{"type":"result","sessionId":null,"exitCode":"0"}`,
	`{"type":"result","exitCode":0.0}`, `{"type":"result","exitCode":1e0}`, `{"type":"result","exitCode":-1}`, `{"type":"result","exitCode":true}`,
	`{"type":"result","exitCode":99999999999999999999}`, `{"type":"result","exitCode":0,"exitCode":1}`, `{"type":"result","ExitCode":1}`,
	`{"type":"result","sessionid":"s2"}`, `{"type":"result","sessionId":"s\"1"}`, `{"type":"result","sessionId":"` + "\xff" + `"}`,
	`{"type":"result","sessionId":"s1","usage":{"premiumRequests":1,"totalApiDurationMs":2}}`, `{"type":"result","exitCode":[0]}`,
	`{"type":"assistant.message","data":{"content":"hi"}`, `{"type":"assistant.message","data":{"content":"hi"}}}`,
	`{"type":"assistant.message","data":{"content":"hi",}}`, `{"type":"assistant.message",}`, `{"type":"assistant.message" "x":1}`,
	`{"type":"assistant.message","n":01}`, `{"type":"assistant.message","n":tru}`, `{"type":"assistant.message","n":-}`,
	"{\"type\":\"assistant.message\",\"data\":{\"content\":\"a\tb\"}}", `{"type":"assistant.message","n":1} x`,
	`{"type":"assistant.message","data":{"content":"hi"}}  `, `  {"type":"assistant.message","data":{"content":"hi"}}`,
	`{"type":"result","exitCode":0`, `{"type":"result","sessionId":"s1`, `{"type":"assistant.message","data":{"toolRequests":[{"toolCallId":"a"}`,
	`{"type":"a\u0073sistant.message","data":{"content":"hi"}}`, "{\"type\":\"assistant.message\",\"data\":{\"toolCallId\":\"\xff\"}}",
}

// TestCopilotSkim: the watcher reads every line of the recorded copilot
// streams, and the odd lines, as encoding/json decodes it.
func TestCopilotSkim(t *testing.T) {
	var s copilotSkim
	lines := copilotStreamLines(t)
	if len(lines) < 100 {
		t.Errorf("%d recorded lines, want at least 100", len(lines))
	}
	for _, l := range lines {
		checkCopilotRead(t, &s, l)
	}
	for _, l := range copilotOddLines {
		checkCopilotRead(t, &s, []byte(l))
		checkCopilotRead(t, &copilotSkim{}, []byte(l))
	}
	deep := `{"type":"assistant.message","data":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`
	checkCopilotRead(t, &s, []byte(deep))
}

// FuzzCopilotSkim: the watcher reads any line as encoding/json decodes it.
func FuzzCopilotSkim(f *testing.F) {
	for _, l := range copilotStreamLines(f) {
		f.Add(l)
	}
	for _, l := range copilotOddLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s copilotSkim
		checkCopilotRead(t, &s, data)
	})
}
