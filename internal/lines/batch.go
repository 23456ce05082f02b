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
// waits when both are busy, so memory stays bounded by two batches; once
// the batches are small again, the big buffers go back to a pool shared by
// all Batches. A Batch is not safe for concurrent use; its caller
// serializes the calls. Close must be called before it is dropped.
type Batch struct {
	w     io.Writer
	size  int
	cur   []byte
	spare []byte
	done  chan []byte // the batch being written comes back on it
	out   bool        // a batch is being written
	err   error       // the first write error; a goroutine's is read after a receive from done
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

// batchBufs holds the batch buffers of Batches whose batches are small
// again, as *[]byte.
var batchBufs sync.Pool

func (b *Batch) write(p []byte) {
	if _, err := b.w.Write(p); err != nil && b.err == nil {
		b.err = err
	}
	b.done <- p[:0]
}

// reap takes back the batch being written, if any, once written; it waits
// for the write when wait is set.
func (b *Batch) reap(wait bool) {
	if !b.out {
		return
	}
	if wait {
		b.spare, b.out = <-b.done, false
		return
	}
	select {
	case b.spare = <-b.done:
		b.out = false
	default:
	}
}

// Append adds the concatenation of ps to the batch, handing it over when
// it is full.
func (b *Batch) Append(ps ...[]byte) {
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
		b.cur = b.cur[:0]
		// Small batches again: the big buffers go back to the pool.
		if cap(b.cur) > inlineMax {
			b.put(b.cur)
			b.cur = nil
		}
		if b.spare != nil {
			b.put(b.spare)
			b.spare = nil
		}
		return
	}
	if b.done == nil {
		b.done = make(chan []byte, 1)
	}
	b.reap(true)
	go b.write(b.cur)
	b.out = true
	next := b.spare
	b.spare = nil
	if next == nil {
		if p, ok := batchBufs.Get().(*[]byte); ok && cap(*p) >= b.size {
			next = (*p)[:0]
		}
	}
	if next == nil || cap(next) > 4*b.size {
		// A batch that grew past four times the size (a long line
		// appended whole) is not kept.
		next = make([]byte, 0, b.size)
	}
	b.cur = next
}

// put hands a batch buffer to batchBufs, unless it grew past four times the
// size.
func (b *Batch) put(p []byte) {
	if cap(p) <= 4*b.size {
		p = p[:0]
		batchBufs.Put(&p)
	}
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
	for _, p := range [][]byte{b.cur, b.spare} {
		if cap(p) > inlineMax {
			b.put(p)
		}
	}
	b.cur, b.spare = nil, nil
	return err
}
