package pilot_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/strayfds"
	"github.com/pilotworkers/pilot/sandbox"
)

// A worker starts with exactly fds 0, 1 and 2, dispatched alone or in a
// fanout whose jobs start together (the supervisor forks a batch at once),
// in the default sandbox and with it off (where the kernel scopes signals,
// a worker is still confined to that: both are forked from threads of
// their own), though this process holds stray inheritable descriptors, as
// one started from a shell may.
func TestWorkersStartWithOnlyStdio(t *testing.T) {
	if !strayfds.InChild(t) {
		return
	}
	checkGoroutines(t)
	var mu sync.Mutex
	listed := map[string]string{} // run id → the worker's fds line
	d := testDispatcher(t, fakeProvider(t, "fake", "fds"))
	d.OnLine = func(id string, l pilot.Line) {
		if l.Stream == pilot.Stdout && strings.HasPrefix(string(l.Data), "fds") {
			mu.Lock()
			listed[id] = string(l.Data)
			mu.Unlock()
		}
	}
	check := func(name string, v pilot.Verdict) {
		t.Helper()
		mu.Lock()
		got, ok := listed[v.RunID]
		mu.Unlock()
		if v.Verdict != pilot.Completed || !ok {
			t.Errorf("%s: verdict %s (%s), listed %q; want completed", name, v.Verdict, v.FailureClass, got)
		}
		if got != "fds 0 1 2" {
			t.Errorf("%s (run %s) listed %q, want \"fds 0 1 2\"", name, v.RunID, got)
		}
	}

	for _, mode := range []sandbox.Mode{"", sandbox.Off} {
		d.Sandbox = mode
		in := " (sandbox " + string(mode) + ")"
		if mode == "" {
			in = " (the default sandbox)"
		}
		check("a lone dispatch"+in, dispatch(t, d, task("fake")))

		const n = 6
		jobs := make([]pilot.Job, n)
		for i := range jobs {
			jobs[i] = pilot.Job{Task: pilot.Task{Provider: "fake", Mode: pilot.ModeExplore, Prompt: "list your fds"}}
		}
		vs, err := (&pilot.Fanout{Dispatcher: d}).Run(context.Background(), jobs)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vs {
			check("fanout job "+strconv.Itoa(i)+in, v.Verdict)
		}
	}
}
