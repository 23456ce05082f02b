//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// Fix names what to do for the causes that say it, wrapped as the stores
// wrap them, and nothing for others.
func TestFixNamesTheCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("locking s.lock: %w", syscall.ENOLCK), "gives no file locks (ENOLCK"},
		{&os.PathError{Op: "open", Path: "/s/state.lock", Err: syscall.EROFS}, "read-only (EROFS)"},
		{&os.PathError{Op: "open", Path: "/s/state.lock", Err: syscall.EACCES}, "make its directory writable"},
		{fmt.Errorf("write: %w", syscall.ENOSPC), "is full"},
		{errors.New("something else"), ""},
	} {
		if got := Fix(tt.err); tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("Fix(%v) = %q, want it to say %q", tt.err, got, tt.want)
		}
	}
}
