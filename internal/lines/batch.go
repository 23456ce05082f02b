package lines

import "io"

// A Batch gathers small writes in memory and writes them, in order, to an
// io.Writer: one write system call per batch instead of one per line. A
// batch of more than a few KiB is handed to a goroutine of the Batch's own
// (started for the first such batch), so that its caller goes on (reading
// the next chunk of a worker's output, say) while the last one is written.
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
	return &Batch{w: w, size: size}
}

// inlineMax is the largest batch Flush writes itself when no write is in
// flight: handing a few lines to the goroutine would cost more than the
// write (most workers print little; their Batch never starts one).
const inlineMax = 4 << 10

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
	if b.out == 0 && len(b.cur) <= inlineMax {
		if _, err := b.w.Write(b.cur); err != nil && b.err == nil {
			b.err = err
		}
		b.cur = b.cur[:0]
		return
	}
	if b.todo == nil { // the first batch worth a goroutine
		b.todo, b.done = make(chan []byte, 1), make(chan []byte, 1)
		go b.loop()
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
	if b.todo != nil {
		close(b.todo)
		<-b.done
	}
	return err
}
