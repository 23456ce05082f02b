package lines

import "io"

// A Batch gathers small writes in memory and hands them, in order, to a
// goroutine of its own that writes them to an io.Writer, so that its
// caller goes on (reading the next chunk of a worker's output, say) while
// the last one is written: one write system call per batch instead of one
// per line, and the writing overlapped with the reading.
//
// At most one batch is being written while the next one gathers: Flush
// waits when both are busy, so memory stays bounded by two batches. A
// Batch is not safe for concurrent use; its caller serializes the calls.
// Close must be called to end its goroutine.
type Batch struct {
	w     io.Writer
	size  int
	cur   []byte
	spare []byte
	todo  chan []byte
	done  chan []byte
	out   int   // batches handed to the goroutine and not yet back
	err   error // the goroutine's first write error; read after a receive from done
}

// NewBatch starts a Batch that writes to w, handing a batch over once it
// holds size bytes (64 KiB when size <= 0) or on Flush.
func NewBatch(w io.Writer, size int) *Batch {
	if size <= 0 {
		size = 64 << 10
	}
	b := &Batch{
		w:    w,
		size: size,
		cur:  make([]byte, 0, size),
		todo: make(chan []byte, 1),
		done: make(chan []byte, 1),
	}
	go b.loop()
	return b
}

func (b *Batch) loop() {
	for p := range b.todo {
		if _, err := b.w.Write(p); err != nil && b.err == nil {
			b.err = err
		}
		b.done <- p[:0]
	}
	close(b.done)
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

// Flush hands what the batch holds to the writing goroutine, first waiting
// for the batch before it to be written.
func (b *Batch) Flush() {
	if len(b.cur) == 0 {
		return
	}
	if b.out > 0 {
		b.spare = <-b.done
		b.out--
	}
	b.todo <- b.cur
	b.out++
	next := b.spare
	b.spare = nil
	if next == nil || cap(next) > 4*b.size {
		// A batch that grew past four times the size (a long line
		// appended whole) is not kept.
		next = make([]byte, 0, b.size)
	}
	b.cur = next
}

// Sync flushes and waits until everything appended so far is written; it
// returns the first write error so far.
func (b *Batch) Sync() error {
	b.Flush()
	for b.out > 0 {
		b.spare = <-b.done
		b.out--
	}
	return b.err
}

// Close syncs and ends the writing goroutine; it returns the first write
// error. The Batch must not be used after.
func (b *Batch) Close() error {
	err := b.Sync()
	close(b.todo)
	<-b.done
	return err
}
