//go:build unix

package pilot

import (
	"io"
	"os"
	"syscall"
)

// A pipeReader reads a worker's output pipe through the runtime poller
// without holding a buffer while it waits: a buffer is taken only once the
// pipe has data, so a silent worker's two readers hold none.
type pipeReader struct {
	f  *os.File
	rc syscall.RawConn // nil: read through f, holding a buffer
	readBuffer
}

func newPipeReader(f *os.File) *pipeReader {
	rc, err := f.SyscallConn()
	if err != nil {
		rc = nil
	}
	return &pipeReader{f: f, rc: rc}
}

// read waits for data and returns it, in a buffer that release puts back.
// At the end of the pipe it returns io.EOF; once f is closed, or a read
// deadline passes, the error f.Read would return.
func (p *pipeReader) read() ([]byte, error) {
	if p.rc == nil {
		return readHolding(p.f, &p.readBuffer)
	}
	var (
		buf  []byte
		n    int
		rerr error
	)
	err := p.rc.Read(func(fd uintptr) bool {
		buf = p.take()
		for {
			n, rerr = syscall.Read(int(fd), buf)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			p.release()
			return false // wait for the poller to say there is data
		}
		return true
	})
	n = max(n, 0)
	switch {
	case err != nil:
		n = 0
	case rerr != nil:
		err = &os.PathError{Op: "read", Path: p.f.Name(), Err: rerr}
	case n == 0:
		err = io.EOF
	default:
		p.readBuffer.read(buf, n)
	}
	return buf[:n], err
}
