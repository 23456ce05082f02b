package pilot_test

import (
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

// A worker whose tree allocates past its memory limit is ended as a
// timeout is, with class memory-limit and the tree's memory as the
// evidence, and nothing of its tree is left. The memory is its child's,
// in a session of its own: the tree is what is measured, not the worker.
func TestAWorkerPastItsMemoryLimitIsEnded(t *testing.T) {
	checkGoroutines(t)
	p := fakeProvider(t, "hog", "spawn:setsid", "alloc=160MiB", "ready", "block", "end", "out=ready", "block")
	p.MemoryLimit = 128 * size.MiB
	d := testDispatcher(t, p)
	d.Heartbeat = 10 * time.Millisecond // a sample every 10 ms: the verdict comes sooner
	worker := 0
	d.Observer = func(e pilot.Event) {
		if e.Started != nil {
			worker = e.Started.Pid
		}
	}
	v := dispatch(t, d, task("hog"))

	if v.Verdict != pilot.Failed || v.FailureClass != pilot.FailMemoryLimit {
		t.Fatalf("verdict %s (%s), want error (memory-limit); stderr %q", v.Verdict, v.FailureClass, v.StderrTail)
	}
	if v.FailureSource != "pilot-policy" || v.TerminationInitiator != "pilot" || v.TerminationReason != pilot.FailMemoryLimit {
		t.Errorf("failure %+v, want pilot's policy, with memory-limit as the termination reason", v.Failure)
	}
	// The child may be ended, mid-allocation, before the worker prints
	// its pid: the peak names it.
	if v.PeakRSSBytes <= 128<<20 || v.PeakRSSProcess == nil || v.PeakRSSProcess.Pid == worker || v.PeakRSSBytes < v.PeakRSSProcess.RSSBytes {
		t.Fatalf("peak %d bytes, process %+v; want over 128 MiB, most of it the worker's child's (the worker is %d)", v.PeakRSSBytes, v.PeakRSSProcess, worker)
	}
	child := v.PeakRSSProcess.Pid
	if v.EvidenceSource != "pilot:memory" || !strings.Contains(v.EvidenceExcerpt, "over its memory limit of 128MiB") ||
		!strings.Contains(v.EvidenceExcerpt, "pid "+strconv.Itoa(child)+" ") {
		t.Errorf("evidence %s: %q; want pilot:memory naming the limit and the child %d", v.EvidenceSource, v.EvidenceExcerpt, child)
	}
	if left := pilottest.Alive(v.RunID); len(left) > 0 {
		t.Errorf("processes of the run left alive: %v", left)
	}
	if !gone(child) {
		t.Errorf("the child %d outlived the dispatch", child)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	if rec.MemoryLimitBytes != 128<<20 || rec.PeakRSSBytes != v.PeakRSSBytes || rec.FailureClass != pilot.FailMemoryLimit {
		t.Errorf("record: limit %d, peak %d, class %s; want the verdict's", rec.MemoryLimitBytes, rec.PeakRSSBytes, rec.FailureClass)
	}
}

// Every verdict and record carries the tree's peak, with or without a
// limit: from the samples of a worker that lives through them, from the
// worker's own high-water mark for one that exits first. A task's limit
// of -1 lifts its provider's.
func TestEveryVerdictHasItsPeakRSS(t *testing.T) {
	// The worker allocates 64 MiB and the test waits for a memory event
	// of 48: a sample taken halfway through the allocation (the first
	// always makes an event) is then either 48 or more, or a step (16
	// MiB) short of what the worker holds after it, which the next
	// sample reports. With 48 allocated, a sample at 44 left the rest
	// under the step: no event, and the worker waiting for a minute.
	gate := filepath.Join(t.TempDir(), "gate")
	long := fakeProvider(t, "long", "alloc=64MiB", "out=ready", "await="+gate, "out=done")
	long.MemoryLimit = 16 * size.MiB
	short := fakeProvider(t, "short", "alloc=40MiB", "out=done")
	d := testDispatcher(t, long, short)
	d.Heartbeat = 10 * time.Millisecond
	var mu sync.Mutex
	var seen []size.Tree
	d.Observer = func(e pilot.Event) {
		if e.Type == event.Memory && e.Memory != nil {
			mu.Lock()
			seen = append(seen, *e.Memory)
			mu.Unlock()
			if e.Memory.RSSBytes >= 48<<20 {
				os.WriteFile(gate, nil, 0o600) // sampled with its memory: let it finish
			}
		}
	}
	tk := task("long")
	tk.MemoryLimit = -1
	v := dispatch(t, d, tk)
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict %s (%s), want completed: the task lifted its provider's limit", v.Verdict, v.FailureClass)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[0].Processes != 1 {
		t.Fatalf("memory events %+v, want samples of the one process", seen)
	}
	if v.PeakRSSBytes < 48<<20 || v.PeakRSSProcess == nil || v.PeakRSSProcess.Command == "" {
		t.Errorf("peak %d, process %+v; want at least 48 MiB and who held it", v.PeakRSSBytes, v.PeakRSSProcess)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil || rec.PeakRSSBytes != v.PeakRSSBytes || rec.MemoryLimitBytes != 0 {
		t.Errorf("record: peak %d, limit %d, %v; want the verdict's peak and no limit", rec.PeakRSSBytes, rec.MemoryLimitBytes, err)
	}

	d.Heartbeat = time.Hour // no sample: the worker's own peak, from its exit
	v = dispatch(t, d, task("short"))
	if v.Verdict != pilot.Completed || v.PeakRSSBytes < 40<<20 || v.PeakRSSProcess == nil || v.PeakRSSProcess.RSSBytes != v.PeakRSSBytes {
		t.Errorf("short worker: %s, peak %d, process %+v; want completed with at least 40 MiB", v.Verdict, v.PeakRSSBytes, v.PeakRSSProcess)
	}
}
