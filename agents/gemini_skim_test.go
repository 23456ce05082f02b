package agents

import (
	"encoding/json"
	"testing"
)

// geminiFull reads a message or tool event the full way, as Line does
// when its fast path declines: the event type and the role (a message's)
// or tool_id (a tool event's), and ok false when the full path ignores
// the line or reads it otherwise.
func geminiFull(data []byte) (typ string, v []byte, ok bool) {
	var ev skim
	if !isJSONObjectLine(data) || !ev.object(data) {
		return "", nil, false
	}
	t, ok := ev.str("type")
	if !ok {
		return "", nil, false
	}
	switch string(t) {
	case "message":
		role, rok := ev.str("role")
		_, cok := ev.str("content")
		return "message", role, rok && cok
	case "tool_use", "tool_result":
		v, ok = ev.str("tool_id")
		return string(t), v, ok
	}
	return "", nil, false
}

// TestGeminiHead: every message and tool event of the recorded streams
// is read by the fast path, with the role or tool_id the full path reads;
// the watcher leaves an assistant message to the full path until one had
// text.
func TestGeminiHead(t *testing.T) {
	n := 0
	for _, l := range recordedLines(t, RunnerGemini) {
		ftyp, fv, fok := geminiFull(l)
		typ, v, ok := geminiHead(l)
		if !fok && !ok {
			continue
		}
		n++
		if !ok || !fok || typ != ftyp || string(v) != string(fv) {
			t.Errorf("%s\nfast path: %s %q %v, full path: %s %q %v", l, typ, v, ok, ftyp, fv, fok)
			continue
		}
		var w geminiWatcher
		if took, want := w.leading(l), !(typ == "message" && string(v) == "assistant"); took != want {
			t.Errorf("%s\nleading before an answer: %v, want %v", l, took, want)
		}
		w.answered = true
		if !w.leading(l) {
			t.Errorf("%s\nleading after an answer: false", l)
		}
	}
	if n < 30 {
		t.Errorf("%d message and tool events in the recorded streams, want at least 30", n)
	}
}

// FuzzGeminiHead: for any line, the fast path either declines or reads
// the event type and the role or tool_id the full path reads, when the
// full path reads the line and it is well-formed (valid JSON with plain,
// distinct keys).
func FuzzGeminiHead(f *testing.F) {
	for _, l := range recordedLines(f, RunnerGemini) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"tool_use","tool_id":"a","timestamp":"t","tool_name":"n"}`))
	f.Add([]byte(`{"type":"message","timestamp":"t","role":"assistant","content":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, v, ok := geminiHead(data)
		if !ok {
			return
		}
		ftyp, fv, fok := geminiFull(data)
		if !fok || !json.Valid(data) || !plainKeys(data) {
			return
		}
		if typ != ftyp || string(v) != string(fv) {
			t.Fatalf("%s\nfast path: %s %q, full path: %s %q", data, typ, v, ftyp, fv)
		}
	})
}
