//go:build !linux

package pilot

import (
	"fmt"
	"os"
)

// newPipe returns a close-on-exec pipe. os.Pipe puts both ends in the
// runtime poller; the worker's end is made blocking again when the
// supervisor client takes its descriptor (File.Fd does that).
func newPipe(name string, pollRead bool) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pilot: pipe: %w", err)
	}
	return r, w, nil
}

// loadedExecutable is the file the running program was loaded from. Without
// /proc/self/exe that is the file at path, which a rebuild may since have
// replaced.
func loadedExecutable(path string) string { return path }
