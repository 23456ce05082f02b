// Package lines splits a byte stream into lines of any length while holding
// at most a fixed number of bytes of any one line in memory.
package lines

import (
	"bytes"
	"io"
	"os"
)

// A Line is one complete line, without its "\n".
type Line struct {
	// Data is the whole line, or its first Max bytes when Truncated.
	Data      []byte
	Size      int64
	Truncated bool
	// Spill, when Truncated, holds the whole line from offset 0. It is
	// valid only during the callback.
	Spill *os.File
	// NoEOL marks a last line that ended without "\n".
	NoEOL bool
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
	if cap(s.buf) > 64<<10 {
		s.buf = nil // do not keep a huge buffer after a huge line
	} else {
		s.buf = s.buf[:0]
	}
}

func (s *Splitter) dropSpill() {
	if s.spill != nil {
		s.spill.Close()
		s.spill = nil
	}
}
