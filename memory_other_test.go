//go:build !linux

package pilot_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pilotworkers/pilot/size"
)

// Where pilot cannot follow a tree's memory, a memory limit fails the
// dispatch before anything starts, as a sandbox that cannot be enforced
// does: the limit would not hold.
func TestAMemoryLimitIsRefusedWherePilotCannotFollowMemory(t *testing.T) {
	p := fakeProvider(t, "limited", "out=never")
	p.MemoryLimit = 2 * size.GiB
	d := testDispatcher(t, p)
	tk := task("limited")
	tk.Workdir = t.TempDir()
	if err := d.Check(context.Background(), tk); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Check = %v, want errors.ErrUnsupported", err)
	}
	v, err := d.Dispatch(context.Background(), tk)
	if !errors.Is(err, errors.ErrUnsupported) || v.RunID != "" {
		t.Errorf("Dispatch = %+v, %v; want errors.ErrUnsupported and nothing run", v, err)
	}
	tk.MemoryLimit = -1 // lifted: it runs
	if err := d.Check(context.Background(), tk); errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Check with the limit lifted = %v", err)
	}
}
