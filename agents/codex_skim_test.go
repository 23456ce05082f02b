package agents

import (
	"encoding/json"
	"testing"
)

// codexFullItem reads an item event the full way, as Line does when its
// fast path declines: the event type and the item's id and type, and ok
// false when the full path ignores the line.
func codexFullItem(data []byte) (event string, item, id, typ []byte, ok bool) {
	var ev skim
	if !ev.object(data) {
		return "", nil, nil, nil, false
	}
	t, ok := ev.str("type")
	if !ok {
		return "", nil, nil, nil, false
	}
	var w codexWatcher
	item = ev.raw("item")
	id, typ, _, ok = w.itemFields(item)
	return string(t), item, id, typ, ok
}

// codexFastItem reads an item event by its fast path: ok false when it
// declines.
func codexFastItem(data []byte) (event string, id, typ []byte, ok bool) {
	t, ok := leadingType(data)
	switch string(t) {
	case "item.started", "item.updated", "item.completed":
	default:
		return "", nil, nil, false
	}
	id, typ, ok = codexItemHead(data, data[len(`{"type":"`)+len(t)+1:])
	return string(t), id, typ, ok
}

// TestCodexFastItem: every item event of the recorded streams is read by
// the fast path, with the id and type the full path reads; the fast path
// leaves a collab_tool_call, and an agent_message until one had text, to
// the full path.
func TestCodexFastItem(t *testing.T) {
	n := 0
	for _, l := range recordedLines(t, RunnerCodex) {
		event, id, typ, ok := codexFastItem(l)
		if event == "" {
			continue
		}
		n++
		fevent, _, fid, ftyp, fok := codexFullItem(l)
		if !ok || !fok {
			t.Errorf("%s\nfast path: %v, full path: %v; want both to read it", l, ok, fok)
			continue
		}
		if event != fevent || string(id) != string(fid) || string(typ) != string(ftyp) {
			t.Errorf("%s\nfast path: %s %q %q, full path: %s %q %q", l, event, id, typ, fevent, fid, ftyp)
		}
		w := codexWatcher{}
		took := w.leadingItem(l)
		want := string(typ) != "collab_tool_call" && string(typ) != "agent_message"
		if took != want {
			t.Errorf("%s\nleadingItem before an answer: %v, want %v", l, took, want)
		}
		w.answer = true
		if took, want := w.leadingItem(l), string(typ) != "collab_tool_call"; took != want {
			t.Errorf("%s\nleadingItem after an answer: %v, want %v", l, took, want)
		}
	}
	if n < 20 {
		t.Errorf("%d item events in the recorded streams, want at least 20", n)
	}
}

// FuzzCodexFastItem: for any line, the fast path either declines or reads
// the event type, item id and item type the full path reads, when the
// full path reads the line and it is well-formed (valid JSON, and the
// event and its item with plain, distinct keys).
func FuzzCodexFastItem(f *testing.F) {
	for _, l := range recordedLines(f, RunnerCodex) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"item.started","item":{"type":"command_execution","id":"x"}}`))
	f.Add([]byte(`{"type":"item.started", "item": {"id":"i\u0031","type":"web_search"}}`))
	f.Add([]byte(`{"type":"item.completed","item":{"id":"","type":"web_search","id":"ws"}}`))
	f.Add([]byte("{\"type\":\"item.\xff\",\"item\":{\"id\":\"\",\"type\":\"\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		event, id, typ, ok := codexFastItem(data)
		if !ok {
			return
		}
		fevent, item, fid, ftyp, fok := codexFullItem(data)
		if !fok || !json.Valid(data) || !plainKeys(data) || !plainKeys(item) {
			return
		}
		if event != fevent || string(id) != string(fid) || string(typ) != string(ftyp) {
			t.Fatalf("%s\nfast path: %s %q %q, full path: %s %q %q", data, event, id, typ, fevent, fid, ftyp)
		}
	})
}
