package lines

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
)

// gatedWriter records its writes and, while gated, holds each write until
// the test lets it go.
type gatedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	gate   chan struct{} // nil: no gate
	err    error
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	if w.gate != nil {
		<-w.gate
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	w.buf.Write(p)
	return len(p), w.err
}

func TestBatchWritesInOrderInFewWrites(t *testing.T) {
	w := &gatedWriter{}
	b := NewBatch(w, 1024)
	var want strings.Builder
	for i := range 1000 {
		line := []byte(strings.Repeat("x", i%50) + "\n")
		b.Append([]byte("out "), line)
		want.WriteString("out ")
		want.Write(line)
		if i%100 == 99 {
			b.Flush()
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.buf.String(); got != want.String() {
		t.Fatalf("wrote %d bytes, want %d, or in another order", len(got), want.Len())
	}
	// ~29 KiB in 1 KiB batches: about 30 writes, not 1000.
	if w.writes > 60 {
		t.Errorf("%d writes for 1000 appends of at most 54 bytes in 1 KiB batches", w.writes)
	}
}

func TestBatchSyncWaitsForTheWrite(t *testing.T) {
	w := &gatedWriter{gate: make(chan struct{})}
	b := NewBatch(w, 64<<10)
	first := strings.Repeat("x", inlineMax) + "\n" // too big to be written inline
	b.Append([]byte(first))
	b.Flush() // handed over; the writer is held at its gate
	synced := make(chan error)
	go func() { synced <- b.Sync() }()
	w.mu.Lock() // the write is still held at the gate: nothing written
	if w.buf.Len() != 0 {
		t.Errorf("wrote %q before the gate opened", w.buf.String())
	}
	w.mu.Unlock()
	close(w.gate)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if got := w.buf.String(); got != first {
		t.Errorf("after Sync: %d bytes, want %d", len(got), len(first))
	}
	b.Close()
}

func TestBatchReportsTheFirstWriteError(t *testing.T) {
	full := errors.New("no space left on device")
	w := &gatedWriter{err: full}
	b := NewBatch(w, 8)
	b.Append([]byte("0123456789\n")) // over the size: handed over at once
	b.Append([]byte("next\n"))
	if err := b.Close(); !errors.Is(err, full) {
		t.Fatalf("Close: %v, want %v", err, full)
	}
}

func TestBatchWritesSmallBatchesItself(t *testing.T) {
	w := &gatedWriter{}
	b := NewBatch(w, 64<<10)
	b.Append([]byte("out ok\n"))
	b.Flush()
	if b.done != nil {
		t.Error("a Batch of one short line started a goroutine")
	}
	if got := w.buf.String(); got != "out ok\n" {
		t.Errorf("after Flush: %q, want it written", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// Once the big batch before it is written, a small batch is written by
// Flush itself, and the Batch keeps no buffer between batches.
func TestBatchWritesSmallBatchesItselfAfterABigOne(t *testing.T) {
	w := &gatedWriter{}
	b := NewBatch(w, 64<<10)
	big := strings.Repeat("x", inlineMax) + "\n" // too big to be written inline
	b.Append([]byte(big))
	if err := b.Sync(); err != nil { // handed over, written and back
		t.Fatal(err)
	}
	b.Append([]byte("out ok\n"))
	b.Flush()
	w.mu.Lock()
	got := w.buf.String()
	w.mu.Unlock()
	if got != big+"out ok\n" {
		t.Errorf("after Flush: %d bytes, want the small batch written too", len(got))
	}
	if b.cur != nil {
		t.Errorf("after a small batch: a buffer of %d bytes kept, want none", cap(b.cur))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
