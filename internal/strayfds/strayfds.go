// Package strayfds runs a test again in a child process that holds
// inheritable descriptors beyond stdin, stdout and stderr, as the program
// that starts pilot may leave open (a shell's fd 10, say), for tests that
// none of them reaches a worker.
package strayfds

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// env marks the child test process.
const env = "PILOT_TEST_STRAY_FDS"

// FDs are the stray descriptors' numbers in the child: 3, where pilot's
// own first descriptor would go, and 10, which is also open in the
// supervisor the child starts (its fd 3 is its control socket).
var FDs = []int{3, 10}

// InChild reports whether this process is the child. If it is not, it runs
// the test t again in a child that holds FDs (both /dev/null, inheritable)
// and fails t if the child's run fails; the test then returns:
//
//	if !strayfds.InChild(t) {
//		return
//	}
//
// In the child it first checks that FDs are open and inheritable, so that a
// test that sees none of them in a worker proves something.
func InChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(env) != "" {
		have, err := fakeagent.InheritedFDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range FDs {
			if !slices.Contains(have, fd) {
				t.Fatalf("the child test process does not hold the stray fd %d open and inheritable (it holds %v)", fd, have)
			}
		}
		return true
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	extra := make([]*os.File, slices.Max(FDs)-2)
	for _, fd := range FDs {
		extra[fd-3] = null // the others are closed in the child
	}
	ctx := context.Background()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/20))
		defer cancel()
	}
	name := "^" + regexp.QuoteMeta(t.Name()) + "$"
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+name, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.ExtraFiles = extra
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child test process (holding fds %v) failed: %v\n%s", FDs, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the child test process did not run %s:\n%s", t.Name(), out)
	}
	t.Logf("the child test process, holding fds %v:\n%s", FDs, out)
	return false
}
