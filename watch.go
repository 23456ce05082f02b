package pilot

import (
	"os"
	"slices"
	"time"

	"github.com/pilotworkers/pilot/event"
)

// sessionWatch follows one worker's activity and native session for the
// stall policy. It belongs to the dispatch loop's goroutine.
type sessionWatch struct {
	r     *run
	path  string                       // the native session file; "" for none
	read  func() (SessionState, error) // reads it; nil when its format is unknown
	clock *stallClock

	state      SessionState // what the stall policy goes by
	fileState  SessionState // the native session file's own
	size       int64        // of the session file; -1 when absent
	mtime      int64
	seenOutput int64  // the last output time the clock was told of
	activity   string // what the last activity was
	inspection *StallInspection
}

// Activity states for Record.ActivityState.
const (
	activityNone      = "none"      // nothing yet
	activityStreaming = "streaming" // the worker's stdout or stderr
	activitySession   = "session"   // its native session file grew
)

// reasonNoSessionFile is the reason of a session that has no file (yet).
const reasonNoSessionFile = "no-session-file"

func (r *run) newSessionWatch(cmd *Command, start time.Time) *sessionWatch {
	w := &sessionWatch{
		r:         r,
		clock:     newStallClock(start),
		state:     SessionState{Phase: PhaseStarting, Reason: reasonNoSessionFile},
		fileState: SessionState{Phase: PhaseStarting, Reason: reasonNoSessionFile},
		size:      -1,
		activity:  activityNone,
	}
	w.seenOutput = r.lastOutput.Load()
	w.path, w.read = cmd.SessionPath, cmd.ReadSession
	return w
}

// phasePasser is a PhaseWatcher that also keeps the phases its stream
// left between two looks (see Watcher): a phase shorter than a heartbeat
// is told too.
type phasePasser interface {
	PassedStates() []SessionState
}

// follows reports whether the run followed its session's phase: a
// session file it could read appeared, or its watcher reads the phase
// from the stream. A run that followed none has no phase to tell.
func (w *sessionWatch) follows() bool {
	_, ok := w.r.watcher.(PhaseWatcher)
	return ok || w.read != nil && w.size >= 0
}

// beat takes one look: new output, session growth, the phase, and what the
// stall policy says about the silence.
func (w *sessionWatch) beat(now time.Time) stallAction {
	if lo := w.r.lastOutput.Load(); lo != w.seenOutput {
		w.seenOutput = lo
		w.clock.Output(time.Unix(0, lo))
		w.activity = activityStreaming
	}
	if w.path != "" {
		size, mtime := int64(-1), int64(0)
		if st, err := os.Stat(w.path); err == nil {
			size, mtime = st.Size(), st.ModTime().UnixNano()
		}
		if size != w.size {
			w.size, w.mtime = size, mtime
			w.clock.SessionSize(size, now)
			w.activity = activitySession
			if w.read != nil {
				if st, err := w.read(); err == nil {
					w.fileState = st
				}
			}
		}
	}
	// The session file when it says more than "starting", else the
	// stream, else the file.
	next := w.fileState
	var passed []SessionState
	if pw, ok := w.r.watcher.(PhaseWatcher); ok {
		w.r.lineMu.Lock()
		st, quietUntil, ok := pw.StreamState()
		if pp, has := pw.(phasePasser); has {
			passed = pp.PassedStates()
		}
		w.r.lineMu.Unlock()
		if !quietUntil.IsZero() {
			w.clock.Output(quietUntil) // a retry is due then: silence until then is expected
		}
		if ok && (w.read == nil || w.fileState.Phase == PhaseStarting) {
			next = st
		} else {
			passed = nil // the session file tells the phase
		}
	}
	// The phases the stream passed through since the last look, each
	// told once, then the one it is in.
	var phases []Event
	for _, st := range append(passed, next) {
		if !samePhase(st, w.state) {
			shown := w.r.red.state(st)
			phases = append(phases, Event{Type: event.Phase, Session: &shown})
		}
		w.state = st
	}
	w.r.emit(phases...)
	a := w.clock.Check(w.r.d.Stall, w.state.Phase, now)
	if a != stallNone {
		insp := newStallInspection(a, w.r.red.state(w.state), w.clock.Silence(now), w.r.streamTailBytes())
		w.inspection = &insp
	}
	return a
}

// look is beat for the supervision loop (workerView): the stall policy's
// action, with the inspection, phase and silence it judged.
func (w *sessionWatch) look(now time.Time) sight {
	s := sight{stall: w.beat(now), phase: w.state.Phase, silence: w.clock.Silence(now)}
	if s.stall != stallNone {
		s.inspection = w.inspection
	}
	return s
}

// retryLoop returns the worker's own retry loop (workerView).
func (w *sessionWatch) retryLoop() (RetryLoop, bool) { return w.r.retryLoop() }

// finished reports whether the worker's session file or stream shows it
// finished, as of now.
func (w *sessionWatch) finished() bool { return w.inPhase(PhaseFinished) }

// inPhase reports whether the session file or the stream shows one of ps.
func (w *sessionWatch) inPhase(ps ...SessionPhase) bool {
	if slices.Contains(ps, w.state.Phase) || slices.Contains(ps, w.fileState.Phase) {
		return true
	}
	if pw, ok := w.r.watcher.(PhaseWatcher); ok {
		w.r.lineMu.Lock()
		st, _, ok := pw.StreamState()
		w.r.lineMu.Unlock()
		return ok && slices.Contains(ps, st.Phase)
	}
	return false
}

// retryLoop returns the worker's own retry loop, if its watcher sees one.
func (r *run) retryLoop() (RetryLoop, bool) {
	rw, ok := r.watcher.(retryWatcher)
	if !ok {
		return RetryLoop{}, false
	}
	r.lineMu.Lock()
	defer r.lineMu.Unlock()
	return rw.RetryLoop()
}

// samePhase reports whether a and b are the same phase for the same tool
// calls: a new entry that changes neither is not worth an event.
func samePhase(a, b SessionState) bool {
	return a.Phase == b.Phase && a.Reason == b.Reason &&
		slices.Equal(a.ExpectedToolCallIDs, b.ExpectedToolCallIDs) &&
		slices.Equal(a.PendingToolCallIDs, b.PendingToolCallIDs)
}

// record is the session part of the run's record.
func (w *sessionWatch) record(p StallPolicy) *SessionRecord {
	st := w.r.red.state(w.state)
	sr := &SessionRecord{
		SessionPhase:         st.Phase,
		SessionPhaseReason:   st.Reason,
		ExpectedToolCallIDs:  nonNil(st.ExpectedToolCallIDs),
		CompletedToolCallIDs: nonNil(st.CompletedToolCallIDs),
		PendingToolCallIDs:   nonNil(st.PendingToolCallIDs),
		ActivityState:        w.activity,
		SilenceInspection:    w.inspection,
	}
	if w.path != "" {
		sr.NativeSessionPath = w.path
		if w.size >= 0 {
			mt := w.mtime
			sr.NativeSessionMtimeNS = &mt
		}
	}
	if d, ok := p.stallTimeout(w.state.Phase); ok {
		secs := d.Seconds()
		sr.StallTimeoutSeconds = &secs
	}
	return sr
}

// streamTailBytes is the end of the worker's output, secrets redacted.
func (r *run) streamTailBytes() []byte {
	r.lineMu.Lock()
	raw := append([]byte(nil), r.streamTail.Bytes()...)
	r.lineMu.Unlock()
	return r.red.bytes(raw)
}
