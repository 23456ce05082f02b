package measure

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pisession"
)

// A PiTail follows a pi session file that grows by 1 KiB entries, as a
// running worker's does: P4.
type PiTail struct {
	f      *os.File
	tail   pisession.Tail
	parent string
	n      int
}

// NewPiTail opens the session at path, which ends with a finished turn,
// and reads it once whole.
func NewPiTail(path string) (*PiTail, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	p := &PiTail{f: f, tail: pisession.Tail{Path: path}}
	st, err := p.tail.Update()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.Phase != pilot.PhaseFinished {
		f.Close()
		return nil, fmt.Errorf("initial read: phase %q (%s), want %q", st.Phase, st.Reason, pilot.PhaseFinished)
	}
	p.parent = st.LeafID
	return p, nil
}

// Close closes the session file.
func (p *PiTail) Close() error { return p.f.Close() }

// AppendUpdate appends one 1 KiB entry (alternately an assistant tool call
// and its result) and returns the time of the Update that reads it.
func (p *PiTail) AppendUpdate() (time.Duration, error) {
	i := p.n
	p.n++
	id := fmt.Sprintf("bench%06d", i)
	var e string
	if i%2 == 0 {
		e = fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-03-15T11:00:00.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"bc%d","name":"bash","arguments":{"command":"%%s"}}],"stopReason":"toolUse"}}`, id, p.parent, i)
	} else {
		e = fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-03-15T11:00:00.000Z","message":{"role":"toolResult","toolCallId":"bc%d","toolName":"bash","content":[{"type":"text","text":"%%s"}]}}`, id, p.parent, i-1)
	}
	pad := 1024 - (len(e) - 2) - 1
	line := fmt.Sprintf(e, strings.Repeat("z", pad)) + "\n"
	if len(line) != 1024 {
		return 0, fmt.Errorf("appended %d bytes, want 1024", len(line))
	}
	if _, err := p.f.WriteString(line); err != nil {
		return 0, err
	}
	p.parent = id
	start := time.Now()
	st, err := p.tail.Update()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	want := pilot.PhaseToolRunning
	if i%2 == 1 {
		want = pilot.PhaseAwaitingModel
	}
	if st.Phase != want {
		return 0, fmt.Errorf("after append %d: phase %q (%s), want %q", i, st.Phase, st.Reason, want)
	}
	return d, nil
}

// FullParse parses the whole session at path, as the seed does at every
// heartbeat, and returns how long that took.
func FullParse(path string) (time.Duration, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := pisession.Parse(f)
	if err != nil {
		return 0, err
	}
	if st.Phase == pilot.PhaseUnknown {
		return 0, fmt.Errorf("full parse: phase unknown (%s)", st.Reason)
	}
	return time.Since(start), nil
}
