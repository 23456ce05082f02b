//go:build unix

package pilot

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/event"
)

// emit writes the events it is given in one write, each a line of its
// own, in order: the phases a worker passed between two looks cost
// events.log one write. Each write to a seqpacket socket is a message of
// its own, so the first read shows what the first write held.
func TestEmitWritesItsEventsInOneWrite(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		t.Skip("no seqpacket sockets:", err)
	}
	for _, fd := range fds {
		if err := syscall.SetNonblock(fd, true); err != nil { // read through the poller, with a deadline
			t.Fatal(err)
		}
	}
	w, rd := os.NewFile(uintptr(fds[0]), "events"), os.NewFile(uintptr(fds[1]), "reader")
	defer w.Close()
	defer rd.Close()
	at := time.Date(2026, 12, 7, 2, 3, 4, 0, time.UTC)
	r := &run{id: "r1", events: w}
	es := []Event{
		{Type: event.Phase, Time: at, Session: &SessionState{Phase: PhaseAwaitingModel}},
		{Type: event.Phase, Time: at, Session: &SessionState{Phase: PhaseToolRunning, PendingToolCallIDs: []string{"t1"}}},
		{Type: event.Phase, Session: &SessionState{Phase: PhaseFinished}}, // stamped by emit
	}
	before := time.Now()
	r.emit(es...)
	buf := make([]byte, 64<<10)
	n, err := rd.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n")
	if len(lines) != len(es) {
		t.Fatalf("the first write held %d lines, want all %d:\n%s", len(lines), len(es), buf[:n])
	}
	for i, l := range lines {
		var got struct {
			RunID   string    `json:"run_id"`
			Time    time.Time `json:"time"`
			Session *struct {
				Phase SessionPhase `json:"phase"`
			} `json:"session"`
		}
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		if got.RunID != "r1" || got.Session == nil || got.Session.Phase != es[i].Session.Phase {
			t.Errorf("line %d = %s, want run r1 in phase %s", i, l, es[i].Session.Phase)
		}
		if i < 2 && !got.Time.Equal(at) || i == 2 && got.Time.Before(before.Truncate(time.Second)) {
			t.Errorf("line %d: time %v", i, got.Time)
		}
	}
	r.emit() // nothing: no write
	rd.SetReadDeadline(time.Now())
	if n, err := rd.Read(buf); err == nil {
		t.Errorf("emit of no event wrote %q", buf[:n])
	}
}
