package pilot

// A worker's output: its pipes and logs, the lines read and classified,
// the events emitted, and the tails a verdict keeps.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/lines"
	"github.com/pilotworkers/pilot/internal/text"
)

// openLogs opens events.log and stream.log, once. It runs after the worker
// has started, so that creating the files overlaps the worker's start-up;
// the worker's output waits in its pipes meanwhile.
func (r *run) openLogs() (err error) {
	if r.events == nil {
		if r.events, err = atomicfile.OpenFile(r.rec.EventsLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
	}
	if r.stream == nil {
		if r.stream, err = atomicfile.OpenFile(r.rec.StreamLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
		r.log = lines.NewBatch(r.stream, streamBatch)
	}
	return nil
}

// streamBatch is the most of a worker's output stream.log's writer gathers
// before writing it (a read from the worker's pipe is at most as big).
const streamBatch = 64 << 10

func (r *run) closeLogs() {
	if r.events != nil {
		r.events.Close()
	}
	if r.log != nil {
		r.log.Close()
	}
	if r.stream != nil {
		r.stream.Close()
	}
}

// readStream drains one output pipe into stream.log, the watcher and OnLine.
// Once the worker's tree is gone (w.drain) it reads on while the pipe
// gives output, and stops at w's deadline (w.cut records it).
func (r *run) readStream(done func(), w *workerIO, f *os.File, s Stream, count *atomic.Int64) {
	defer done()
	tag := []byte("out ")
	if s == Stderr {
		tag = []byte("err ")
	}
	clean := false // no secret can be in this read
	sp := &lines.Splitter{
		Max:      r.d.MaxLineBytes,
		SpillDir: r.dir,
		OnLine:   func(l lines.Line) { r.takeLine(s, tag, l, clean && l.InPlace) },
	}
	rd := newPipeReader(f)
	co := coalescer{every: r.coalesceEvery()} // a first read is never quick
	var pause *time.Timer
	defer func() {
		if pause != nil {
			pause.Stop()
		}
	}()
	for {
		if e := w.ending.Load(); e != nil {
			f.SetReadDeadline(e.next()) // RawConn.Read keeps it too
		}
		buf, err := rd.read()
		if n := len(buf); n > 0 {
			r.lastOutput.Store(time.Now().UnixNano())
			count.Add(int64(n))
			// One lock for all the lines of a read (line runs under it).
			r.lineMu.Lock()
			if s == Stderr {
				r.stderrTail.Write(buf)
			}
			r.streamTail.Write(buf)
			// One look for the secrets in the whole read costs less
			// than one in each of its lines.
			clean = r.red.clean(buf)
			sp.Write(buf)
			// The lines of this read go to stream.log in one write, made
			// while the next read is taken and split.
			r.log.Flush()
			r.lineMu.Unlock()
		}
		rd.release()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				w.cut.Store(true)
			}
			break
		}
		if d := co.after(len(buf), rd.big, time.Now()); d > 0 && w.ending.Load() == nil {
			if pause == nil {
				pause = time.NewTimer(d)
			} else {
				pause.Reset(d)
			}
			select {
			case <-pause.C:
			case <-w.wake:
			}
			co.issued = time.Now()
		}
	}
	r.lineMu.Lock()
	sp.Close()
	// Every line of this stream is in stream.log before the run's record
	// can say it ended.
	r.log.Sync()
	r.lineMu.Unlock()
}

var newline = []byte("\n")

// coalesceTick is how long at most a reader lets a chatty worker's output
// wait in its pipe: a worker printing line after line is read about once
// a tick, its lines in groups, rather than woken for at every line (a
// read, a stream.log write and a wake-up of the reader each), which is
// most of what pilot spends on a worker that streams (P8). A stream that
// gave coalesceBurst over this tick and the last is read without waiting,
// so that a fast worker never finds its pipe (64 KiB) full.
const (
	coalesceTick  = 100 * time.Millisecond
	coalesceBurst = 16 << 10
)

// A coalescer decides, after each read with data, whether a reader waits
// before its next read: only when the data came soon (within every) after
// the read was issued, the read did not fill its buffer, and the stream
// gave less than coalesceBurst over this tick and the last. A worker that
// prints now and then is read as soon as it prints.
type coalescer struct {
	every     time.Duration // 0: never waits
	issued    time.Time     // when the last read was issued
	tick      int64         // the tick of the last read (Unix time / every)
	cur, prev int           // bytes read in that tick and the one before
}

// after notes a read of n bytes that filled its buffer or not, at now, and
// returns how long to wait before the next read: 0, or until the next
// tick (so that the readers of many workers wake together), never more
// than every. The next read is issued at now when it returns 0.
func (c *coalescer) after(n int, full bool, now time.Time) time.Duration {
	if c.every <= 0 {
		return 0
	}
	quick := now.Sub(c.issued) < c.every
	c.issued = now
	ns := now.UnixNano()
	switch tick := ns / int64(c.every); tick {
	case c.tick:
	case c.tick + 1:
		c.tick, c.prev, c.cur = tick, c.cur, 0
	default: // later, or the clock stepped back
		c.tick, c.prev, c.cur = tick, 0, 0
	}
	c.cur += n
	if !quick || full || c.prev+c.cur >= coalesceBurst {
		return 0
	}
	return time.Duration((c.tick+1)*int64(c.every) - ns)
}

// coalesceEvery is the reader's coalescer's tick: coalesceTick, or less
// for a dispatch whose timeouts and stall policy act on a shorter silence
// (a tenth of the shortest), or 0 (never wait) when that is under a
// millisecond.
func (r *run) coalesceEvery() time.Duration {
	every := coalesceTick
	for _, d := range []time.Duration{r.timeout(), r.idleTimeout(), r.d.FinishGrace, r.d.Heartbeat,
		r.d.Stall.Start, r.d.Stall.ModelResponse, r.d.Stall.Tool, r.d.Stall.ModelStall} {
		if d > 0 {
			every = min(every, d/10)
		}
	}
	if every < time.Millisecond {
		return 0
	}
	return every
}

// readBuf is the size of one read from a worker's pipe after a read that
// filled its buffer, smallRead after one that did not: a worker printing a
// line at a time is read into small buffers, a fast one into big ones.
const (
	readBuf   = 64 << 10
	smallRead = 4 << 10
)

// readBufs and smallBufs hold the read buffers not in use: a reader takes
// one for a read and puts it back once the read's lines are handled (on
// unix only when the pipe has data, see pipeReader), so that a dispatch
// does not allocate its own, most of its garbage, nor a waiting worker
// hold one. Nothing keeps a reference into a buffer once it is back (lines
// are copied into stream.log's batch, and watchers and OnLine keep no
// line).
var (
	readBufs  = sync.Pool{New: func() any { return new([readBuf]byte) }}
	smallBufs = sync.Pool{New: func() any { return new([smallRead]byte) }}
)

// A readBuffer is a reader's buffer, from readBufs or smallBufs by how
// the last read went.
type readBuffer struct {
	big   bool // the last read filled its buffer
	large *[readBuf]byte
	small *[smallRead]byte
}

// take takes a buffer from its pool.
func (b *readBuffer) take() []byte {
	if b.big {
		b.large = readBufs.Get().(*[readBuf]byte)
		return b.large[:]
	}
	b.small = smallBufs.Get().(*[smallRead]byte)
	return b.small[:]
}

// read notes that a read into buf got n bytes.
func (b *readBuffer) read(buf []byte, n int) { b.big = n == len(buf) }

// release puts the buffer taken back.
func (b *readBuffer) release() {
	if b.large != nil {
		readBufs.Put(b.large)
		b.large = nil
	}
	if b.small != nil {
		smallBufs.Put(b.small)
		b.small = nil
	}
}

// readHolding reads f into a buffer from b, holding it while the read
// waits.
func readHolding(f *os.File, b *readBuffer) ([]byte, error) {
	buf := b.take()
	n, err := f.Read(buf)
	b.read(buf, n)
	return buf[:n], err
}

// takeLine handles one complete output line: stream.log gets all of it, the
// watcher and OnLine get at most MaxLineBytes. A clean line is one in
// which no secret can be. Called with lineMu held.
func (r *run) takeLine(s Stream, tag []byte, l lines.Line, clean bool) {
	data := bytes.TrimSuffix(l.Data, []byte("\r"))
	out := l.Data
	if !clean {
		out = r.red.bytes(l.Data)
	}
	switch {
	case l.Spill != nil:
		// A line too long to hold, copied from its spill file after
		// what came before it.
		r.log.Sync()
		r.stream.Write(tag)
		r.red.copy(r.stream, l.Spill)
		r.stream.Write([]byte("\n"))
	case len(out) > streamBatch:
		// A long line: written where it is, not copied into a batch.
		r.log.Sync()
		r.stream.Write(tag)
		r.stream.Write(out)
		r.stream.Write([]byte("\n"))
	default:
		r.log.Append(tag, out, newline)
	}
	line := Line{Stream: s, Data: data, Size: l.Size, Truncated: l.Truncated}
	r.noteDiagnostic(line)
	r.noteDenial(line)
	r.watcher.Line(line)
	if r.d.OnLine != nil {
		if !clean {
			line.Data = r.red.bytes(data)
		}
		r.d.OnLine(r.id, line)
	}
}

// maxDiagnosticText is the longest stderr line pilot classifies for a
// watcher without Diagnose.
const maxDiagnosticText = 64 << 10

// noteDiagnostic classifies a line (the watcher's Diagnose, or
// ClassifyFailure for a stderr line) and keeps the strongest diagnostic so
// far, the latest of equals. Called with lineMu held.
func (r *run) noteDiagnostic(l Line) {
	if l.Truncated {
		return
	}
	// The line is not copied (a megabyte-long line would cost a megabyte
	// of garbage): a diagnoser must keep nothing of it, and what it
	// returns, which may alias it, is cloned.
	line := unsafe.String(unsafe.SliceData(l.Data), len(l.Data))
	var c Classification
	if dw, ok := r.watcher.(diagnoser); ok {
		if c, ok = dw.Diagnose(l.Stream, line); !ok {
			return
		}
	} else if l.Stream == Stderr && len(line) <= maxDiagnosticText {
		c = ClassifyFailure(line)
	}
	if c.Evidence == "" {
		return
	}
	c.Evidence, c.Note, c.Source = strings.Clone(c.Evidence), strings.Clone(c.Note), strings.Clone(c.Source)
	if c.Source == "" {
		c.Source = r.runner.Name() + ":" + string(l.Stream)
	}
	if r.diag == nil {
		r.diag = new(Classification)
	}
	*r.diag = Strongest(*r.diag, c)
}

// diagnostic returns the strongest diagnostic seen, or nil.
func (r *run) diagnostic() *Classification {
	r.lineMu.Lock()
	defer r.lineMu.Unlock()
	if r.diag == nil {
		return nil
	}
	d := *r.diag
	return &d
}

// emit writes the events es to events.log, in one write, and hands them
// to the observers: the phases a worker passed between two looks cost one
// write, not one each.
func (r *run) emit(es ...Event) {
	if len(es) == 0 {
		return
	}
	now := time.Now().UTC()
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	data := r.eventBuf[:0]
	for i := range es {
		e := &es[i]
		e.RunID = r.id
		if e.Time.IsZero() {
			e.Time = now
		}
		if line, err := e.appendJSON(data); err == nil {
			data = append(line, '\n')
		}
	}
	if len(data) > 0 {
		r.events.Write(data)
	}
	if cap(data) <= 4<<10 {
		r.eventBuf = data[:0] // kept for the next events; a big one's is not
	}
	if r.delivery != nil {
		for _, e := range es {
			r.delivery.push(e) // the observers get them from their own goroutine
		}
	}
}

// observe hands e to the Dispatcher's observer, then the task's.
func (r *run) observe(e Event) {
	if r.d.Observer != nil {
		r.d.Observer(e)
	}
	if r.task.Observer != nil {
		r.task.Observer(e)
	}
}

func (r *run) tail() string {
	r.lineMu.Lock()
	raw := append([]byte(nil), r.stderrTail.Bytes()...)
	r.lineMu.Unlock()
	return text.LastRunes(strings.ToValidUTF8(string(r.red.bytes(raw)), "\uFFFD"), stderrTailRunes)
}

// workerIO is pilot's side of a worker's stdio: the read ends of its
// stdout and stderr pipes, and the feeder of its stdin.
type workerIO struct {
	outR, errR *os.File
	stdinDone  func()
	drained    chan struct{} // closed when both pipes are read to their end; nil until readInto
	// ending is set once the worker's tree is gone (drain); cut once a
	// reader stopped at its deadline, with output left unread.
	ending atomic.Pointer[ending]
	cut    atomic.Bool
	// wake is closed when the readers are to stop waiting between reads
	// (coalescer): the tree is gone, or pilot's ends are closing.
	wake     chan struct{}
	wakeOnce sync.Once
}

// stopPauses wakes readers waiting between reads, for good.
func (w *workerIO) stopPauses() { w.wakeOnce.Do(func() { close(w.wake) }) }

// ending is when the readers of a worker whose tree is gone stop: after
// quiet with nothing to read, or at until.
type ending struct {
	quiet time.Duration
	until time.Time
}

// next is the deadline of a reader's next read.
func (e *ending) next() time.Time {
	if t := time.Now().Add(e.quiet); t.Before(e.until) {
		return t
	}
	return e.until
}

// drainLimit is how many wait delays pilot reads a pipe that keeps giving
// output once the worker's tree is gone: only a process pilot could not
// kill (one that was handed the pipe outside the tree) can write to it.
const drainLimit = 15

// openWorkerIO opens the worker's stdout and stderr pipes and its stdin (a
// file holding data), closing what it opened when one fails. The worker's
// ends (outW, errW, stdin) are the caller's to hand over and close.
func openWorkerIO(data []byte) (w *workerIO, outW, errW, stdin *os.File, err error) {
	w = &workerIO{wake: make(chan struct{})}
	if w.outR, outW, err = outputPipe(); err != nil {
		return nil, nil, nil, nil, err
	}
	if w.errR, errW, err = outputPipe(); err != nil {
		w.outR.Close()
		outW.Close()
		return nil, nil, nil, nil, err
	}
	if stdin, w.stdinDone, err = stdinFile(data); err != nil {
		w.outR.Close()
		outW.Close()
		w.errR.Close()
		errW.Close()
		return nil, nil, nil, nil, err
	}
	return w, outW, errW, stdin, nil
}

// readInto starts reading both pipes into r's logs, watcher and observers.
func (w *workerIO) readInto(r *run) {
	w.drained = make(chan struct{})
	// The reader that ends last closes drained (no goroutine waits for
	// them).
	var left atomic.Int32
	left.Store(2)
	done := func() {
		if left.Add(-1) == 0 {
			close(w.drained)
		}
	}
	go r.readStream(done, w, w.outR, Stdout, &r.stdoutBytes)
	go r.readStream(done, w, w.errR, Stderr, &r.stderrBytes)
}

// drain reads both pipes to their end once the worker's tree is gone,
// then closes pilot's ends. It reports whether the output was read whole:
// a process pilot could not kill may hold a pipe open. A reader still
// taking output (a backlog on a busy machine: the pipes hold what the
// tree wrote before it went) reads on; one that waits quiet for d stops,
// and none reads past drainLimit × d.
func (w *workerIO) drain(d time.Duration) (whole bool) {
	e := &ending{quiet: d, until: time.Now().Add(drainLimit * d)}
	w.ending.Store(e)
	w.stopPauses()
	// Readers waiting now get their deadline here; the others set it
	// before their next read.
	next := e.next()
	w.outR.SetReadDeadline(next)
	w.errR.SetReadDeadline(next)
	t := time.NewTimer(time.Until(e.until) + d) // for pipes without deadlines
	defer t.Stop()
	select {
	case <-w.drained:
	case <-t.C:
		w.cut.Store(true)
	}
	w.closeAll()
	return !w.cut.Load()
}

// closeAll closes pilot's ends, waits for the readers (if any) to stop and
// for the stdin feeder to give up.
func (w *workerIO) closeAll() {
	w.stopPauses()
	w.outR.Close()
	w.errR.Close()
	if w.drained != nil {
		<-w.drained
	}
	w.stdinDone()
}

// outputPipe returns a pipe whose read end pilot reads through the runtime
// poller (so Close unblocks a Read) and whose write end is blocking, as
// ordinary programs expect their stdout to be.
func outputPipe() (r, w *os.File, err error) {
	return newPipe("worker-output", true)
}

// stdinFile returns the worker's stdin: /dev/null, or a pipe fed with data
// by a goroutine that wait (the second result) waits for.
func stdinFile(data []byte) (*os.File, func(), error) {
	if data == nil {
		// Opened as a plain file: nothing of pilot's reads it.
		f, err := atomicfile.OpenFile(os.DevNull, os.O_RDONLY, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("pilot: %w", err)
		}
		return f, func() {}, nil
	}
	rd, wr, err := newPipe("worker-stdin", false)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wr.Write(data)
		wr.Close()
	}()
	return rd, func() {
		wr.Close() // unblocks a write the worker never read
		<-done
	}, nil
}

// noteDenial keeps the latest output line of a confined worker that shows
// an access it was denied: evidence beside the verdict of a worker that
// failed, whose class stays what its own failure says. Called with lineMu
// held.
func (r *run) noteDenial(l Line) {
	if !r.confined || l.Truncated {
		return
	}
	if denied(l.Data) {
		r.denial = text.FirstRunes(strings.ToValidUTF8(string(l.Data), "\uFFFD"), stderrTailRunes)
	}
}
