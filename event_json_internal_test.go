package pilot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/size"
)

// appendJSON writes every event as Marshal does: the phase and message
// events it writes itself, the others through Marshal.
func TestEventAppendJSONIsMarshals(t *testing.T) {
	at := time.Date(2026, 12, 7, 2, 3, 4, 560000000, time.UTC)
	for _, e := range []Event{
		{Type: event.Phase, RunID: "r1", Time: at, Session: &SessionState{Phase: PhaseToolRunning, Reason: "stream:tool_use",
			ExpectedToolCallIDs: []string{"a", "b"}, CompletedToolCallIDs: []string{"a"}, PendingToolCallIDs: []string{"b"}, Version: 3, LeafID: "x<y>&z"}},
		{Type: event.Phase, RunID: "r1", Time: at, Session: &SessionState{Phase: PhaseErrored, StopReason: "error", ErrorMessage: "bad \"key\"\n\xff"}},
		{Type: event.Phase, RunID: "r1", Time: at, Session: &SessionState{}},
		{Type: event.Terminate, RunID: "r2", Time: at, Message: "grace period of 5s over: sending SIGKILL"},
		{Type: "custom", Time: at.In(time.FixedZone("x", 3600))},
		{},
		{Type: event.Memory, RunID: "r3", Time: at, Memory: &size.Tree{RSSBytes: 1 << 20, Processes: 2}},
		{Type: event.StallInspection, RunID: "r3", Time: at, Inspection: &StallInspection{Action: "inspect", SilenceSeconds: 60}},
		{Type: "retry", RunID: "r4", Time: at, Retry: map[string]int{"attempt": 2}},
		{Type: event.Phase, RunID: "r5", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Session: &SessionState{}},
		{Started: &Started{RunID: "r6", Pid: 7}},
		{Verdict: &Verdict{RunID: "r7", Verdict: Completed}},
	} {
		want, werr := json.Marshal(e)
		got, gerr := e.appendJSON([]byte("kept:"))
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%+v: appendJSON error %v, Marshal's %v", e, gerr, werr)
			continue
		}
		if werr == nil && string(got) != "kept:"+string(want) {
			t.Errorf("%+v:\nappendJSON %s\nMarshal    kept:%s", e, got, want)
		}
	}
}

func FuzzEventAppendJSON(f *testing.F) {
	f.Add("phase", "run-1", "", "tool-running", "stream:tool_use", "call_1", "leaf", "stop", "", 3, int64(1796000000123456789), 0, true)
	f.Add("terminate", "r", "a <b> & \"c\"\n", "", "", "", "", "", "\xff", 0, int64(0), 3600, false)
	f.Fuzz(func(t *testing.T, typ, runID, msg, phase, reason, id, leaf, stop, errMsg string, version int, ns int64, off int, session bool) {
		e := Event{Type: typ, RunID: runID, Message: msg, Time: time.Unix(0, ns).In(time.FixedZone("f", off%(30*3600)))}
		if session {
			e.Session = &SessionState{Phase: SessionPhase(phase), Reason: reason, ExpectedToolCallIDs: []string{id, id},
				PendingToolCallIDs: []string{id}, Version: version, LeafID: leaf, StopReason: stop, ErrorMessage: errMsg}
		}
		want, werr := json.Marshal(e)
		got, gerr := e.appendJSON(nil)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("appendJSON error %v, Marshal's %v", gerr, werr)
		}
		if werr == nil && string(got) != string(want) {
			t.Errorf("appendJSON %s\nMarshal    %s", got, want)
		}
	})
}
