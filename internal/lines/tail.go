package lines

// Tail keeps the last N bytes written to it; with N <= 0 it keeps nothing.
type Tail struct {
	N   int
	buf []byte
}

// Write implements io.Writer; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	if t.N <= 0 {
		t.buf = t.buf[:0]
		return n, nil
	}
	if len(p) >= t.N {
		t.buf = append(t.buf[:0], p[len(p)-t.N:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.N; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns the kept bytes. The slice is valid until the next Write.
func (t *Tail) Bytes() []byte { return t.buf }
