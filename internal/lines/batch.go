package lines

import (
	"io"
	"sync"
)

// A Batch gathers small writes in memory and writes them, in order, to an
// io.Writer: one write system call per batch instead of one per line. A
// batch of more than a few KiB is handed to a goroutine (one per such
// batch), so that its caller goes on (reading the next chunk of a
// worker's output, say) while the last one is written.
//
// At most one batch is being written while the next one gathers: Flush
// waits when both are busy, so memory stays bounded by two batches. A
// batch's buffer comes from a pool all Batches share and goes back once
// written, so that a Batch between batches holds none. A Batch is not
// safe for concurrent use; its caller serializes the calls. Close must
// be called before it is dropped.
type Batch struct {
	w    io.Writer
	size int
	cur  []byte        // nil between batches
	done chan struct{} // receives once the batch being written is written
	out  bool          // a batch is being written
	err  error         // the first write error; a goroutine's is read after a receive from done
}

// NewBatch starts a Batch that writes to w, handing a batch over once it
// holds size bytes (64 KiB when size <= 0) or on Flush.
func NewBatch(w io.Writer, size int) *Batch {
	if size <= 0 {
		size = 64 << 10
	}
	return &Batch{w: w, size: size}
}

// inlineMax is the largest batch Flush writes itself when no write is in
// flight: handing a few lines to a goroutine would cost more than the
// write (most workers print little; their Batch never starts one).
const inlineMax = 4 << 10

// batchBufs holds the buffers of the batches not gathering or being
// written, as *[]byte.
var batchBufs sync.Pool

// put hands a written batch's buffer to batchBufs, unless it grew past
// four times the size (a long line appended whole).
func (b *Batch) put(p []byte) {
	if cap(p) <= 4*b.size {
		p = p[:0]
		batchBufs.Put(&p)
	}
}

// write writes p and hands its buffer back to the pool at once: a worker
// may print its next batch much later.
func (b *Batch) write(p []byte) {
	if _, err := b.w.Write(p); err != nil && b.err == nil {
		b.err = err
	}
	b.put(p)
	b.done <- struct{}{}
}

// reap notes the end of the batch being written, if any; it waits for the
// write when wait is set.
func (b *Batch) reap(wait bool) {
	if !b.out {
		return
	}
	if wait {
		<-b.done
		b.out = false
		return
	}
	select {
	case <-b.done:
		b.out = false
	default:
	}
}

// Append adds the concatenation of ps to the batch, handing it over when
// it is full.
func (b *Batch) Append(ps ...[]byte) {
	if b.cur == nil {
		if p, ok := batchBufs.Get().(*[]byte); ok {
			b.cur = *p
		}
	}
	for _, p := range ps {
		b.cur = append(b.cur, p...)
	}
	if len(b.cur) >= b.size {
		b.Flush()
	}
}

// Flush hands what the batch holds to a writing goroutine, first waiting
// for the batch before it to be written, or writes a small batch itself
// when no write is in flight.
func (b *Batch) Flush() {
	if len(b.cur) == 0 {
		return
	}
	b.reap(false)
	if !b.out && len(b.cur) <= inlineMax {
		if _, err := b.w.Write(b.cur); err != nil && b.err == nil {
			b.err = err
		}
		b.put(b.cur)
		b.cur = nil
		return
	}
	if b.done == nil {
		b.done = make(chan struct{}, 1)
	}
	b.reap(true)
	go b.write(b.cur)
	b.out = true
	b.cur = nil
}

// Sync flushes and waits until everything appended so far is written; it
// returns the first write error so far.
func (b *Batch) Sync() error {
	b.Flush()
	b.reap(true)
	return b.err
}

// Close syncs and returns the first write error. The Batch must not be
// used after.
func (b *Batch) Close() error {
	err := b.Sync()
	if b.cur != nil {
		b.put(b.cur)
		b.cur = nil
	}
	return err
}
