package agents

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// opencodeWholeCases are lines on which decodeWhole must decode as
// json.Unmarshal does, beside the recorded streams'.
var opencodeWholeCases = []string{
	`{"type":"step_finish","sessionID":"s","part":{"reason":"stop","cost":0.5,"tokens":{"input":1,"output":2,"cache":{"read":3,"write":4}}}}`,
	`{"type":"step_finish","part":{"cost":null,"tokens":null}}`,
	`{"type":"step_finish","part":{"tokens":{"cache":null,"input":null}}}`,
	`{"type":"step_finish","part":null}`,
	`{"type":"step_finish","part":7}`,
	`{"type":"step_finish","part":{"cost":"1"}}`,
	`{"type":"step_finish","part":{"cost":1e400}}`,
	`{"type":"step_finish","part":{"tokens":{"input":-12.5e-3,"output":123456789012345678}}}`,
	`{"type":"step_finish","part":{"tokens":[]}}`,
	`{"type":"step_finish","part":{"reason":["x"]}}`,
	`{"type":"step_finish","part":{"text":5}}`,
	`{"type":"done","sessionID":null}`,
	`{"type":7}`,
	`{"Type":"done"}`,
	`{"type":"done","TYPE":"error"}`,
	`{"type":"done","type":"error"}`,
	`{"type":"done","ſessionID":"x"}`,
	`{"\u0074ype":"done"}`,
	`{"type":"error","sessionID":"a\u00e9\n","error":{"name":"APIError"}}`,
	"{\"type\":\"error\",\"sessionID\":\"\xff\"}",
	`{"type":"step_finish","part":{"Reason":"length"}}`,
	`{"type":"step_finish","part":{"tokens":{"Input":1}}}`,
	`{"type":"step_finish","part":{"tokens":{"cache":{"READ":1}}}}`,
	`{"type":"step_finish","part":{"tokens":{"cache":{"read":1,"read":2}}}}`,
	`{"type":"done"} x`,
	`{"type":"done",}`,
	`  {"type":"done"}`,
}

// checkDecodeWhole fails unless decodeWhole decodes line as json.Unmarshal
// does, and returns whether it read it without json.Unmarshal.
func checkDecodeWhole(t *testing.T, line []byte) (skimmed bool) {
	t.Helper()
	var w opencodeWatcher
	var got, want opencodeEvent
	ok := w.decodeWhole(line, &got)
	wantOK := json.Unmarshal(line, &want) == nil
	if ok != wantOK {
		t.Fatalf("%s\ndecodeWhole: %v, json.Unmarshal: %v", line, ok, wantOK)
	}
	if ok {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s\ndecodeWhole (-json.Unmarshal +decodeWhole):\n%s", line, diff)
		}
	}
	var ev opencodeEvent
	_, sure := w.readWhole(line, &ev)
	return sure
}

// TestOpencodeDecodeWhole: decodeWhole decodes the recorded streams' lines
// and the cases as json.Unmarshal does, and the recorded step ends,
// errors and done events without it.
func TestOpencodeDecodeWhole(t *testing.T) {
	for _, l := range recordedLines(t, RunnerOpencode) {
		if !isJSONObjectLine(l) {
			continue
		}
		skimmed := checkDecodeWhole(t, l)
		switch typ, _ := leadingType(l); string(typ) {
		case "step_finish", "error", "done":
			if !skimmed {
				t.Errorf("%s\nleft to json.Unmarshal", l)
			}
		}
	}
	for _, l := range opencodeWholeCases {
		checkDecodeWhole(t, []byte(l))
	}
}

// FuzzOpencodeDecodeWhole: decodeWhole decodes any line that starts as an
// object as json.Unmarshal does.
func FuzzOpencodeDecodeWhole(f *testing.F) {
	for _, l := range recordedLines(f, RunnerOpencode) {
		f.Add(l)
	}
	for _, l := range opencodeWholeCases {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if isJSONObjectLine(line) {
			checkDecodeWhole(t, line)
		}
	})
}

// opencodeFull reads a part event the full way, as Line does when its
// fast path declines: its type and session id, and ok false when the full
// path ignores the line.
func opencodeFull(data []byte) (typ string, sid string, ok bool) {
	var w opencodeWatcher
	var ev opencodeEvent
	if !isJSONObjectLine(data) || !w.decode(data, &ev) {
		return "", "", false
	}
	return ev.Type, ev.SessionID, true
}

// TestOpencodeHead: every part event of the recorded streams is read by
// the fast path, with the type and session id the full path reads; the
// watcher leaves a part to the full path until it has seen that session
// id, and a text part until one had text.
func TestOpencodeHead(t *testing.T) {
	n := 0
	for _, l := range recordedLines(t, RunnerOpencode) {
		typ, sid, ok := opencodeHead(l)
		if !opencodePart(typ) {
			if ok {
				t.Errorf("%s\nfast path: %s, not a part", l, typ)
			}
			continue
		}
		n++
		ftyp, fsid, fok := opencodeFull(l)
		if !ok || !fok || typ != ftyp || string(sid) != fsid {
			t.Errorf("%s\nfast path: %s %q %v, full path: %s %q %v", l, typ, sid, ok, ftyp, fsid, fok)
			continue
		}
		var w opencodeWatcher
		if w.leadingPart(l) {
			t.Errorf("%s\nread by the fast path before a session id", l)
		}
		w.sessionID = string(sid)
		if took, want := w.leadingPart(l), typ != "text"; took != want {
			t.Errorf("%s\nleadingPart before an answer: %v, want %v", l, took, want)
		}
		w.answered = true
		if !w.leadingPart(l) {
			t.Errorf("%s\nleadingPart after an answer: false", l)
		}
	}
	if n < 40 {
		t.Errorf("%d part events in the recorded streams, want at least 40", n)
	}
}

// FuzzOpencodeHead: for any line, the fast path either declines or reads
// the type and session id the full path reads, when the full path reads
// the line and it is well-formed (valid JSON with plain, distinct keys).
func FuzzOpencodeHead(f *testing.F) {
	for _, l := range recordedLines(f, RunnerOpencode) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"tool_use","sessionID":"s","timestamp":1}`))
	f.Add([]byte(`{"type":"text","timestamp":-1,"sessionID":"s","part":{"text":7}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, sid, ok := opencodeHead(data)
		if !ok {
			return
		}
		ftyp, fsid, fok := opencodeFull(data)
		if !fok || !json.Valid(data) || !plainKeys(data) {
			return
		}
		if typ != ftyp || string(sid) != fsid {
			t.Fatalf("%s\nfast path: %s %q, full path: %s %q", data, typ, sid, ftyp, fsid)
		}
	})
}

// opencodeDecodeBefore is decode as it was before decodeWhole: the
// reference decode must agree with.
func opencodeDecodeBefore(line []byte, ev *opencodeEvent) bool {
	var s, part skim
	if !s.object(line) {
		return false
	}
	typ, ok := s.str("type")
	if !ok {
		return false
	}
	switch string(typ) {
	case "text", "reasoning", "tool_use", "step_start":
	default:
		return json.Unmarshal(line, ev) == nil
	}
	sid, ok := s.str("sessionID")
	if !ok {
		return false
	}
	if p := s.raw("part"); p != nil && string(p) != "null" {
		if !part.object(p) {
			return false
		}
		psid, ok1 := part.str("sessionID")
		text, ok2 := part.str("text")
		if !ok1 || !ok2 {
			return false
		}
		if len(sid) == 0 {
			ev.Part.SessionID = string(psid)
		}
		if len(bytes.TrimSpace(text)) > 0 {
			ev.Part.Text = string(text)
		}
	}
	ev.Type, ev.SessionID = string(typ), string(sid)
	return true
}

// FuzzOpencodeDecode: decode reads any line that starts as an object as
// it did before decodeWhole (opencodeDecodeBefore), its routing by the
// leading type included.
func FuzzOpencodeDecode(f *testing.F) {
	for _, l := range recordedLines(f, RunnerOpencode) {
		f.Add(l)
	}
	for _, l := range opencodeWholeCases {
		f.Add([]byte(l))
	}
	f.Add([]byte(`{"type":"step_finish","sessionID":"s","type":"text","part":{"text":"x","cost":"y"}}`))
	f.Add([]byte(`{"type":"text","sessionID":"s","type":"step_finish","part":{"reason":"stop"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !isJSONObjectLine(line) {
			return
		}
		var w opencodeWatcher
		var got, want opencodeEvent
		ok := w.decode(line, &got)
		wantOK := opencodeDecodeBefore(line, &want)
		if ok != wantOK {
			t.Fatalf("%s\ndecode: %v, before: %v", line, ok, wantOK)
		}
		if ok {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s\ndecode (-before +now):\n%s", line, diff)
			}
		}
	})
}
