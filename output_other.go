//go:build !unix

package pilot

import "os"

// A pipeReader reads a worker's output pipe, holding a buffer while it
// waits.
type pipeReader struct {
	f *os.File
	readBuffer
}

func newPipeReader(f *os.File) *pipeReader { return &pipeReader{f: f} }

// read returns what one read got, in a buffer that release puts back.
func (p *pipeReader) read() ([]byte, error) { return readHolding(p.f, &p.readBuffer) }
