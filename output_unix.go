//go:build unix

package pilot

import (
	"io"
	"os"
	"syscall"
)

// A pipeReader reads a worker's output pipe through the runtime poller
// without holding a buffer while it waits: a buffer is taken from readBufs
// only once the pipe has data, so a silent worker's two readers hold none.
type pipeReader struct {
	f  *os.File
	rc syscall.RawConn // nil: read through f, holding a buffer
}

func newPipeReader(f *os.File) pipeReader {
	rc, err := f.SyscallConn()
	if err != nil {
		rc = nil
	}
	return pipeReader{f: f, rc: rc}
}

// read waits for data and reads it into a buffer from readBufs, which the
// caller puts back (bp is nil when none was taken). At the end of the pipe
// it returns io.EOF; once f is closed, or a read deadline passes, the
// error f.Read would return.
func (p pipeReader) read() (bp *[readBuf]byte, n int, err error) {
	if p.rc == nil {
		return readHolding(p.f)
	}
	var rerr error
	err = p.rc.Read(func(fd uintptr) bool {
		bp = readBufs.Get().(*[readBuf]byte)
		for {
			n, rerr = syscall.Read(int(fd), bp[:])
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			readBufs.Put(bp)
			bp = nil
			return false // wait for the poller to say there is data
		}
		return true
	})
	switch {
	case err != nil:
	case rerr != nil:
		err = &os.PathError{Op: "read", Path: p.f.Name(), Err: rerr}
	case n == 0:
		err = io.EOF
	}
	return bp, max(n, 0), err
}
