package agents

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
)

// CodexCollabWait reads one line of `codex exec --json` output and reports
// whether it starts or completes a collab_tool_call with tool "wait": codex
// waiting for a sub-agent, which is slow but not stalled. itemID is the
// item's id ("" if it has none). Lines that are not JSON, and other events,
// give nothing.
func CodexCollabWait(line []byte) (itemID string, started, completed bool) {
	if !bytes.Contains(line, []byte("collab_tool_call")) {
		return "", false, false
	}
	var ev struct {
		Type string `json:"type"`
		Item *struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Tool string `json:"tool"`
		} `json:"item"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Item == nil ||
		ev.Item.Type != "collab_tool_call" || ev.Item.Tool != "wait" {
		return "", false, false
	}
	switch ev.Type {
	case "item.started":
		return ev.Item.ID, true, false
	case "item.completed":
		return ev.Item.ID, false, true
	}
	return "", false, false
}

// CodexSubagentWaits follows the sub-agent waits of one codex worker: a
// wait is open from its item.started to the item.completed with the same
// item id, and every wait ends with the turn (turn.completed,
// turn.failed). While Waiting, the worker's silence is a tool run's: treat
// it as PhaseToolRunning for the StallPolicy. The zero value has no open
// wait.
type CodexSubagentWaits struct {
	open []string
}

// Observe reads one line of the worker's stdout.
func (w *CodexSubagentWaits) Observe(line []byte) {
	if id, started, completed := CodexCollabWait(line); started {
		if !slices.Contains(w.open, id) {
			w.open = append(w.open, id)
		}
		return
	} else if completed {
		w.open = slices.DeleteFunc(w.open, func(o string) bool { return o == id })
		return
	}
	if len(w.open) > 0 && bytes.Contains(line, []byte(`"turn.`)) {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &ev) == nil && (ev.Type == "turn.completed" || ev.Type == "turn.failed") {
			w.open = w.open[:0]
		}
	}
}

// Waiting reports whether a sub-agent wait is open.
func (w *CodexSubagentWaits) Waiting() bool { return len(w.open) > 0 }

// reCodexReconnecting matches codex's notices of a retried model call:
// "Reconnecting... 2/5 (...)" and "Reconnecting... waiting for network".
var reCodexReconnecting = regexp.MustCompile(`(?i)reconnecting\.\.\.\s*(?:\d+\s*/\s*\d+|waiting for network)`)

// codexRetrying reports whether msg, a codex error event's message, is a
// retry notice rather than a failure.
func codexRetrying(msg string) bool { return reCodexReconnecting.MatchString(msg) }
