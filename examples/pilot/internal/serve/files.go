package serve

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/pilotworkers/pilot/runs"
)

// errNotRegular is a run's file that is not a regular file of its own
// directory: a symlink (which might lead out of the run directories) or
// something else.
var errNotRegular = errors.New("serve: not a regular file")

// openRunFile opens the file name of run r: only a regular file, never
// through a symlink (checked on the open file, so a swap after the check
// is caught too).
func openRunFile(r runs.Run, name string) (*os.File, error) {
	path := filepath.Join(r.Dir, name)
	lst, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !lst.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fst, err := f.Stat()
	if err != nil || !os.SameFile(lst, fst) {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// window is a part of a log: the bytes [Start, End) of a file of Size
// bytes, whole lines, or a piece of a line longer than a window.
type window struct {
	Start, End, Size int64
	Data             []byte
}

// readWindow reads whole lines of f from about from (the first line that
// starts there or after), at most limit bytes; from < 0 means the tail.
// A last line without its newline yet is left for later, unless the
// window holds nothing else: a line longer than limit comes in pieces of
// limit bytes. It never reads more than limit bytes, whatever the file's
// size.
func readWindow(f *os.File, from, limit int64) (window, error) {
	st, err := f.Stat()
	if err != nil {
		return window{}, err
	}
	size := st.Size()
	if from < 0 {
		from = size - limit
	}
	from = min(size, max(from, 0))
	end := min(size, from+limit)
	buf := make([]byte, end-from)
	n, err := f.ReadAt(buf, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return window{}, err
	}
	buf = buf[:n]
	full := int64(n) == limit
	start := from
	if start > 0 {
		// Begin at a line's start: after the first newline, unless the
		// byte before from ends a line (or the window is all inside one
		// long line).
		var prev [1]byte
		if _, err := f.ReadAt(prev[:], start-1); err == nil && prev[0] != '\n' {
			if i := bytes.IndexByte(buf, '\n'); i >= 0 && i+1 < len(buf) {
				start += int64(i + 1)
				buf = buf[i+1:]
			}
		}
	}
	// End after the last whole line.
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i+1]
	} else if !full {
		buf = buf[:0] // a line being written
	}
	return window{Start: start, End: start + int64(len(buf)), Size: size, Data: buf}, nil
}

// findLast returns the offset of the last occurrence of needle in f, or -1,
// reading backwards in chunks and giving up after limit bytes.
func findLast(f *os.File, needle []byte, limit int64) int64 {
	if len(needle) == 0 {
		return -1
	}
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	const chunk = 1 << 20
	end := st.Size()
	buf := make([]byte, chunk+len(needle))
	for scanned := int64(0); end > 0 && scanned < limit; {
		start := max(0, end-chunk)
		n := end - start + int64(len(needle))
		if start+n > st.Size() {
			n = st.Size() - start
		}
		m, err := f.ReadAt(buf[:n], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return -1
		}
		if i := bytes.LastIndex(buf[:m], needle); i >= 0 {
			return start + int64(i)
		}
		scanned += end - start
		end = start
	}
	return -1
}

// lineStart is the offset of the start of the line holding off.
func lineStart(f *os.File, off int64) int64 {
	const step = 4096
	buf := make([]byte, step)
	for pos := off; pos > 0; {
		from := max(0, pos-step)
		n, err := f.ReadAt(buf[:pos-from], from)
		if err != nil && !errors.Is(err, io.EOF) {
			return pos
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return from + int64(i) + 1
		}
		pos = from
	}
	return 0
}
