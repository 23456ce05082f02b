package agents

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/pilotworkers/pilot/internal/jsonskim"
)

// piFull reads a message or tool event the full way, as Line does when
// its fast path declines: the type, the message's role, and the
// toolCallId the watcher reads (a tool event's; a tool result's at its
// end), and ok false when the full path ignores the line.
func piFull(data []byte) (typ string, role, id []byte, ok bool) {
	f, ok := jsonskim.Members(nil, data)
	if !ok {
		return "", nil, nil, false
	}
	typ = piString(piFields(f).get("type"))
	switch typ {
	case "message_start", "message_end":
		m, ok := jsonskim.Members(nil, piFields(f).get("message"))
		if !ok {
			return "", nil, nil, false
		}
		role = piText(piFields(m).get("role"))
		if typ == "message_end" && string(role) == "toolResult" {
			id = piText(piFields(m).get("toolCallId"))
		}
		return typ, role, id, true
	case "tool_execution_start", "tool_execution_end":
		return typ, nil, piText(piFields(f).get("toolCallId")), true
	}
	return "", nil, nil, false
}

// TestPiHead: every message and tool event of the recorded streams is
// read by the fast path, with the role and toolCallId the full path
// reads; the watcher leaves the end of an assistant message to the full
// path.
func TestPiHead(t *testing.T) {
	n := 0
	for _, l := range recordedLines(t, RunnerPi) {
		typ, role, id, ok := piHead(l)
		ftyp, frole, fid, fok := piFull(l)
		if !ok && ftyp == "" {
			continue
		}
		n++
		if !ok || !fok || typ != ftyp || string(role) != string(frole) || string(id) != string(fid) {
			t.Errorf("%s\nfast path: %s %q %q %v, full path: %s %q %q %v", l, typ, role, id, ok, ftyp, frole, fid, fok)
			continue
		}
		var w piWatcher
		if took, want := w.leading(l), !(typ == "message_end" && string(role) == "assistant"); took != want {
			t.Errorf("%s\nleading: %v, want %v", l, took, want)
		}
	}
	if n < 100 {
		t.Errorf("%d message and tool events in the recorded streams, want at least 100", n)
	}
	// Not as pi writes them today, but still leading members.
	for _, l := range []string{
		`{"type":"message_end","message":{"role":"toolResult","toolName":"ls","toolCallId":"b"}}`,
		`{"type":"message_end","timestamp":1,"message":{"toolCallId":"b","role":"toolResult"}}`,
		`{"type":"tool_execution_end","toolName":"ls","toolCallId":"b","result":{}}`,
	} {
		if _, _, id, ok := piHead([]byte(l)); !ok || string(id) != "b" {
			t.Errorf("%s\nfast path: %q %v, want toolCallId b", l, id, ok)
		}
	}
}

// FuzzPiHead: for any line, the fast path either declines or reads the
// type, role and toolCallId the full path reads, when the full path reads
// the line and it is well-formed (valid JSON, the event and its message
// with plain, distinct keys).
func FuzzPiHead(f *testing.F) {
	for _, l := range recordedLines(f, RunnerPi) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"message_end","message":{"toolCallId":"b","role":"toolResult"}}`))
	f.Add([]byte(`{"type":"message_end","message":{"role":"toolResult","toolName":"ls","toolCallId":"b"}}`))
	f.Add([]byte(`{"type":"tool_execution_start","toolCallId":"a","toolCallId":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, role, id, ok := piHead(data)
		if !ok {
			return
		}
		ftyp, frole, fid, fok := piFull(data)
		if !fok || !json.Valid(data) || !plainKeys(data) {
			return
		}
		if m := jsonskim.Get(mustMembers(data), "message"); m != nil && !plainKeys(m) {
			return
		}
		if typ != ftyp || string(role) != string(frole) || string(id) != string(fid) {
			t.Fatalf("%s\nfast path: %s %q %q, full path: %s %q %q", data, typ, role, id, ftyp, frole, fid)
		}
	})
}

func mustMembers(data []byte) []jsonskim.Member {
	ms, _ := jsonskim.Members(nil, data)
	return ms
}

// piContents are message contents beside the recorded streams' on which
// piWatcher.content must read what decoding them reads.
var piContents = []string{
	`"done"`, `"  "`, `"\u0020x"`, `null`, `7`, `{}`, `[]`, `[null]`, `[7]`, `[[]]`, `"\x"`,
	`[{"type":"text","text":"hi"}]`, `[{"type":"text","text":" \n"}]`, `[{"type":"text","text":7}]`,
	`[{"type":"text","text":"hi"},{"type":5}]`, `[{"type":5},{"type":"toolCall","id":"a"}]`,
	`[{"type":"toolCall","id":"a"},{"type":"toolCall","id":"a"},{"type":"toolCall","id":""},{"type":"toolCall","id":7}]`,
	`[{"Type":"text","text":"hi"}]`, `[{"type":"text","TEXT":"hi"}]`, `[{"type":"text","text":"","text":"hi"}]`,
	`[{"type":"text","type":null,"text":"hi"}]`, `[{"\u0074ype":"text","text":"hi"}]`, `[{"type":"te\u0078t","text":"h\u0069"}]`,
	`[{"type":"text","text":"hi"},]`, `[{"type":"text","text":"hi"}`, `[{"type":"toolCall","id":"a","ID":"b"}]`,
	`"0" `, " \t[{\"type\":\"text\",\"text\":\"hi\"}]\n",
}

// checkPiContent fails unless content reads raw as decoding it does.
func checkPiContent(t *testing.T, raw []byte) {
	t.Helper()
	want, wantIDs := piContentText(raw), piToolCallIDs(raw)
	var w piWatcher
	for _, valid := range []bool{false, true} {
		if valid && !json.Valid(raw) {
			continue
		}
		text, ids := w.content(raw, valid, true)
		if text != want || !slices.Equal(ids, wantIDs) {
			t.Fatalf("content(%s, valid %v) = %v %q, decoding %v %q", raw, valid, text, ids, want, wantIDs)
		}
		if text, _ := w.content(raw, valid, false); text != want {
			t.Fatalf("content(%s, valid %v) without ids = %v, decoding %v", raw, valid, text, want)
		}
	}
}

// TestPiContent: content reads the recorded messages' contents, and the
// cases, as decoding them does.
func TestPiContent(t *testing.T) {
	for _, c := range piRecordedContents(t) {
		checkPiContent(t, c)
	}
	for _, c := range piContents {
		checkPiContent(t, []byte(c))
	}
	checkPiContent(t, nil)
}

// piRecordedContents returns the contents of the recorded streams'
// messages (those of message events and of agent_end's list).
func piRecordedContents(t testing.TB) [][]byte {
	var out [][]byte
	add := func(m []byte) {
		ms, ok := jsonskim.Members(nil, m)
		if c := jsonskim.Get(ms, "content"); ok && c != nil {
			out = append(out, c)
		}
	}
	for _, l := range recordedLines(t, RunnerPi) {
		f, ok := jsonskim.Members(nil, l)
		if !ok {
			continue
		}
		if m := jsonskim.Get(f, "message"); m != nil {
			add(m)
		}
		if ms, ok := jsonskim.Elements(nil, jsonskim.Get(f, "messages")); ok {
			for _, m := range ms {
				add(m)
			}
		}
	}
	return out
}

// FuzzPiContent: content reads any content as decoding it does.
func FuzzPiContent(f *testing.F) {
	for _, c := range piRecordedContents(f) {
		f.Add(c)
	}
	for _, c := range piContents {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 0 {
			checkPiContent(t, raw)
		}
	})
}

// FuzzPiScalars: piString, piBool and piFloat read any raw value as
// decoding it into a string, bool or float64 does, and decodeFloat
// decodes as json.Unmarshal.
func FuzzPiScalars(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b"`, `"é"`, "\"\x01\"", `null`, `true`, `false`, `tru`, `0`, `-0`, `01`,
		`12`, `123456789012345`, `1234567890123456789`, `1.5e3`, `1e400`, `-1e-400`, `0x10`, `1_0`, `+1`, `{}`, ` 1`, `0.0 `, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var s string
		serr := json.Unmarshal(raw, &s)
		if got := piString(raw); got != s || (serr != nil && got != "") {
			t.Fatalf("piString(%q) = %q, decoding %q %v", raw, got, s, serr)
		}
		var b bool
		berr := json.Unmarshal(raw, &b)
		if got, ok := piBool(raw); ok != (berr == nil) || ok && got != b {
			t.Fatalf("piBool(%q) = %v %v, decoding %v %v", raw, got, ok, b, berr)
		}
		var n float64
		nerr := json.Unmarshal(raw, &n)
		if got, ok := piFloat(raw); ok != (nerr == nil) || ok && math.Float64bits(got) != math.Float64bits(n) {
			t.Fatalf("piFloat(%q) = %v %v, decoding %v %v", raw, got, ok, n, nerr)
		}
		got, want := 42.0, 42.0
		ok := decodeFloat(raw, &got)
		werr := json.Unmarshal(raw, &want)
		if raw == nil {
			werr = nil // a missing member
		}
		if ok != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("decodeFloat(%q) = %v %v, json.Unmarshal %v %v", raw, got, ok, want, werr)
		}
	})
}
