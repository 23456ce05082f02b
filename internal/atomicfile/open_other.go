//go:build !unix

package atomicfile

import "os"

// OpenFile is os.OpenFile (on Unix it skips the runtime's poller).
func OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
