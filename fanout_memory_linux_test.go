package pilot_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/size"
)

// A memory budget that fits two workers runs at most two at once, the
// others waiting (and saying so) until one ends, and finishes all of them.
// Each worker holds memory until the test lets it go: the test lets the
// oldest running one go whenever a job says it waits, and every one once
// the last has started.
func TestFanoutMemoryBudgetRunsWhatFits(t *testing.T) {
	checkGoroutines(t)
	const n = 5
	dir := t.TempDir()
	var ps []pilot.Provider
	var jobs []pilot.Job
	for i := range n {
		name := "w" + strconv.Itoa(i)
		ps = append(ps, fakeProvider(t, name, "alloc=24MiB", "out=ready", "await="+filepath.Join(dir, name), "out=done"))
		// Each is expected to peak at its limit: 100 MiB, two in 250.
		jobs = append(jobs, pilot.Job{Task: pilot.Task{Provider: name, Mode: pilot.ModeReview, Prompt: "x", MemoryLimit: 100 * size.MiB}})
	}
	d := testDispatcher(t, ps...)
	d.Heartbeat = 10 * time.Millisecond // memory events too

	var mu sync.Mutex
	var running, most int
	var live []int // running jobs not yet let go, oldest first
	owed := 0      // jobs to let go as soon as they run: one per wait
	waited := map[int]string{}
	letGo := func() {
		for ; owed > 0 && len(live) > 0; owed-- {
			os.WriteFile(filepath.Join(dir, "w"+strconv.Itoa(live[0])), nil, 0o600)
			live = live[1:]
		}
	}
	f := &pilot.Fanout{Dispatcher: d, MemoryBudget: 250 * size.MiB, OnEvent: func(i int, e pilot.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Started != nil:
			running++
			most = max(most, running)
			live = append(live, i)
			if i == n-1 {
				owed = n
			}
			letGo()
		case e.Verdict != nil:
			running--
		case e.Type == event.FanoutJobWaiting:
			waited[i] = e.Message
			owed++
			letGo()
		}
	}}
	vs, err := f.Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Verdict.Verdict != pilot.Completed || v.PeakRSSBytes < 24<<20 {
			t.Errorf("job %d: %s (%s), peak %d; want completed, with at least its 24 MiB", i, v.Verdict.Verdict, v.FailureClass, v.PeakRSSBytes)
		}
		if left := pilottest.Alive(v.RunID); len(left) > 0 {
			t.Errorf("job %d left %v alive", i, left)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("at most %d ran at once; want 2: the budget fits two", most)
	}
	if len(waited) != n-2 {
		t.Errorf("jobs that waited: %v; want the %d after the first two", waited, n-2)
	}
	for i, msg := range waited {
		if !strings.HasPrefix(msg, "waiting for memory: 2 running job(s) count 200MiB of the 250MiB budget, and this one expects 100MiB") {
			t.Errorf("job %d waited saying %q", i, msg)
		}
	}
}

// The expected peak is the largest of the provider's latest peaks in the
// run history, no more than its limit; without history, the limit; without
// either, the default of 512 MiB.
func TestExpectedRSSFromTheRunHistory(t *testing.T) {
	p := fakeProvider(t, "hist", "alloc=40MiB", "out=done")
	d := testDispatcher(t, p, fakeProvider(t, "other", "out=done"))
	tk := task("hist")
	if got := pilot.LimitsOf(d, tk).ExpectedRSS; got != 512*size.MiB {
		t.Errorf("no history, no limit: %s, want the default of 512MiB", got)
	}
	tk.MemoryLimit = 300 * size.MiB
	if got := pilot.LimitsOf(d, tk).ExpectedRSS; got != 300*size.MiB {
		t.Errorf("no history: %s, want the limit", got)
	}
	v := dispatch(t, d, task("hist"))
	dispatch(t, d, task("other"))
	if got := pilot.LimitsOf(d, tk).ExpectedRSS; int64(got) != v.PeakRSSBytes || got < 40*size.MiB {
		t.Errorf("after a run peaking at %d: %s, want that peak", v.PeakRSSBytes, got)
	}
	tk.MemoryLimit = 8 * size.MiB
	if got := pilot.LimitsOf(d, tk).ExpectedRSS; got != 8*size.MiB {
		t.Errorf("a limit under the history: %s, want the limit", got)
	}
	if got := pilot.LimitsOf(pilottest.DispatchFunc(nil), tk).ExpectedRSS; got != 8*size.MiB {
		t.Errorf("a fake dispatcher: %s, want the task's limit", got)
	}
	if got := pilot.LimitsOf(pilottest.DispatchFunc(nil), task("hist")).ExpectedRSS; got != 512*size.MiB {
		t.Errorf("a fake dispatcher, no limit: %s, want the default of 512MiB", got)
	}
}
