//go:build !linux

package cli

import (
	"os"
	"testing"
)

// openPTY skips the test: pseudo-terminals are opened the Linux way only
// (/dev/ptmx and its ioctls).
func openPTY(t *testing.T, width, height int) (ptm, pts *os.File) {
	t.Helper()
	t.Skip("pseudo-terminals are opened the Linux way only")
	return nil, nil
}
