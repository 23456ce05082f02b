// Package lines splits a byte stream into lines of any length while holding
// at most a fixed number of bytes of any one line in memory.
package lines

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// A Line is one complete line, without its "\n".
type Line struct {
	// Data is the whole line, or its first Max bytes when Truncated. It
	// is valid only during the callback (it may be part of the slice
	// passed to Write).
	Data      []byte
	Size      int64
	Truncated bool
	// Spill, when Truncated, holds the whole line from offset 0. It is
	// valid only during the callback.
	Spill *os.File
	// NoEOL marks a last line that ended without "\n".
	NoEOL bool
	// InPlace marks a line that lies whole in the slice passed to the
	// Write that delivers it, Data a part of that slice: what the caller
	// found of the slice holds for the line.
	InPlace bool
}

// A Splitter receives a stream through Write and calls OnLine once per
// line. A line longer than Max bytes is written to a spill file in SpillDir
// instead of being kept in memory. The zero Max means 8 MiB.
//
// Write never fails: a spill file that cannot be written truncates the
// line (Line.Spill is then nil) rather than stopping the stream.
type Splitter struct {
	Max      int
	SpillDir string
	OnLine   func(Line)

	buf   []byte
	spill *os.File
	size  int64
	spErr bool
}

func (s *Splitter) max() int {
	if s.Max <= 0 {
		return 8 << 20
	}
	return s.Max
}

// Write implements io.Writer; it always consumes all of p.
func (s *Splitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			break
		}
		if s.size == 0 && i <= s.max() {
			// A whole line within p: handed over where it is, not
			// copied.
			if s.OnLine != nil {
				s.OnLine(Line{Data: p[:i:i], Size: int64(i), InPlace: true})
			}
			p = p[i+1:]
			continue
		}
		s.add(p[:i])
		s.emit(false)
		p = p[i+1:]
	}
	return n, nil
}

// Close delivers a final line that had no "\n" and removes any spill file.
func (s *Splitter) Close() {
	if s.size > 0 {
		s.emit(true)
	}
	s.dropSpill()
}

func (s *Splitter) add(p []byte) {
	if len(p) == 0 {
		return
	}
	max := s.max()
	s.size += int64(len(p))
	if s.spill == nil && !s.spErr && len(s.buf)+len(p) <= max {
		s.grow(len(p))
		s.buf = append(s.buf, p...)
		return
	}
	if s.spill == nil && !s.spErr {
		f, err := os.CreateTemp(s.SpillDir, ".line-spill-*")
		if err != nil {
			s.spErr = true
		} else {
			os.Remove(f.Name()) // unlinked: it vanishes with the descriptor
			if _, err := f.Write(s.buf); err != nil {
				s.spErr = true
				f.Close()
			} else {
				s.spill = f
			}
		}
	}
	if s.spill != nil {
		if _, err := s.spill.Write(p); err != nil {
			s.spErr = true
			s.spill.Close()
			s.spill = nil
		}
	}
	if room := max - len(s.buf); room > 0 {
		if room > len(p) {
			room = len(p)
		}
		s.grow(room)
		s.buf = append(s.buf, p[:room]...)
	}
}

func (s *Splitter) emit(noEOL bool) {
	l := Line{Data: s.buf, Size: s.size, NoEOL: noEOL}
	if s.size > int64(len(s.buf)) {
		l.Truncated = true
		if s.spill != nil {
			if _, err := s.spill.Seek(0, io.SeekStart); err == nil {
				l.Spill = s.spill
			}
		}
	}
	if s.OnLine != nil {
		s.OnLine(l)
	}
	s.dropSpill()
	s.size = 0
	s.spErr = false
	if cap(s.buf) > smallBuf {
		// Do not keep a huge buffer after a huge line: hand it to the
		// next long line of any Splitter.
		putBig(s.buf)
		s.buf = nil
	} else {
		s.buf = s.buf[:0]
	}
}

// smallBuf is the most a Splitter keeps between lines.
const smallBuf = 64 << 10

// bigBufs holds, by size class (1 MiB, 2 MiB, 4 MiB, ...), the buffers
// of lines longer than smallBuf between lines, so that a stream of long
// lines does not allocate (and the garbage collector clear) new buffers
// for each, nor copy a line from buffer to buffer as it grows; the
// collector empties it when they are not reused.
var bigBufs [8]sync.Pool

const bigBuf = 1 << 20 // the smallest class

// bigClass returns the size class for n bytes, or -1 when n is beyond the
// classes.
func bigClass(n int) int {
	for c := range bigBufs {
		if n <= bigBuf<<c {
			return c
		}
	}
	return -1
}

func putBig(b []byte) {
	if c := bigClass(cap(b)); c >= 0 && cap(b) == bigBuf<<c {
		b = b[:0]
		bigBufs[c].Put(&b)
	}
}

// grow makes room for n more bytes in s.buf, from bigBufs when the line
// outgrows smallBuf.
func (s *Splitter) grow(n int) {
	need := len(s.buf) + n
	if need <= cap(s.buf) || need <= smallBuf {
		return
	}
	c := bigClass(need)
	if c < 0 {
		s.buf = append(s.buf, make([]byte, n)...)[:len(s.buf)]
		return
	}
	var nb []byte
	if b, ok := bigBufs[c].Get().(*[]byte); ok {
		nb = (*b)[:0]
	} else {
		nb = make([]byte, 0, bigBuf<<c)
	}
	nb = append(nb, s.buf...)
	putBig(s.buf)
	s.buf = nb
}

func (s *Splitter) dropSpill() {
	if s.spill != nil {
		s.spill.Close()
		s.spill = nil
	}
}
