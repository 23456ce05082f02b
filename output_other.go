//go:build !unix

package pilot

import "os"

// A pipeReader reads a worker's output pipe, holding a buffer from
// readBufs while it waits.
type pipeReader struct{ f *os.File }

func newPipeReader(f *os.File) pipeReader { return pipeReader{f: f} }

// read reads into a buffer from readBufs, which the caller puts back.
func (p pipeReader) read() (bp *[readBuf]byte, n int, err error) { return readHolding(p.f) }
