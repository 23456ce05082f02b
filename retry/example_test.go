package retry_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
)

// A worker that fails once, then succeeds: the retry waits (here on a fake
// clock), runs the task again, and the verdict counts the attempts.
func ExampleDispatch() {
	dir, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(dir)
	marker := filepath.Join(dir, "tried")
	reg, _ := pilot.NewRegistry(pilot.Provider{
		Name:   "flaky",
		Runner: "command",
		Argv: []string{"/bin/sh", "-c",
			`if [ -e "$1" ]; then echo done; else touch "$1"; echo "upstream hiccup" >&2; exit 1; fi`, "sh", marker},
	})
	d := &pilot.Dispatcher{Providers: reg, RunDir: filepath.Join(dir, "runs")}
	policy := retry.Policy{
		MaxFailures: 3,
		Sleep: func(_ context.Context, d time.Duration) error {
			fmt.Println("waiting about", retry.BackoffCeiling(1))
			return nil
		},
	}
	v, err := retry.Dispatch(context.Background(), d,
		pilot.Task{Provider: "flaky", Mode: pilot.ModeExplore, Prompt: "look around", Workdir: dir},
		retry.Key{Task: "demo/look-around"}, policy)
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verdict.Verdict, "after", v.Attempts, "attempts")
	// Output:
	// waiting about 10s
	// completed after 2 attempts
}

// Failure budgets and blocks persist in a state file; clearing one group
// leaves the others blocked.
func ExampleStore_ClearBlocked() {
	dir, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(dir)
	s, err := retry.OpenStore(filepath.Join(dir, "state.json"))
	if err != nil {
		panic(err)
	}
	defer s.Close()
	for _, task := range []string{"alpha/01", "beta/01"} {
		s.UpdateTask(task, func(t *retry.TaskState) {
			t.Blocked = "recovery failure limit exhausted: 10/10"
			t.RecoveryFailures = map[string]int{"code": 10}
		})
	}
	cleared, _ := s.ClearBlocked("alpha")
	fmt.Println("cleared:", cleared)
	fmt.Printf("alpha/01: %q\n", s.Task("alpha/01").Blocked)
	fmt.Printf("beta/01: %q\n", s.Task("beta/01").Blocked)
	// Output:
	// cleared: [alpha/01]
	// alpha/01: ""
	// beta/01: "recovery failure limit exhausted: 10/10"
}
