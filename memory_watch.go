package pilot

import (
	"fmt"
	"path/filepath"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/size"
)

// memoryLimit is the limit on the run's tree: the task's, else its
// provider's; zero for none.
func (r *run) memoryLimit() size.Bytes { return memoryLimitOf(r.task, r.prov) }

func memoryLimitOf(t Task, p Provider) size.Bytes {
	switch {
	case t.MemoryLimit < 0:
		return 0
	case t.MemoryLimit > 0:
		return t.MemoryLimit
	}
	return p.MemoryLimit
}

// checkMemoryLimit refuses a memory limit this platform cannot enforce.
func checkMemoryLimit(t Task, p Provider) error {
	if limit := memoryLimitOf(t, p); limit > 0 && !followsMemory {
		return fmt.Errorf("pilot: the task of provider %s has a memory limit of %s (Task.MemoryLimit, or the provider's memory_limit): remove it, or run on Linux: %w",
			p.Name, limit, errMemoryLimitUnsupported)
	}
	return nil
}

// memoryWatch follows the resident memory of one worker's tree: its peak,
// and the samples worth an event. It belongs to the dispatch loop's
// goroutine.
type memoryWatch struct {
	r       *run
	peak    size.Tree // the sample with the most; zero before any
	emitted int64     // RSSBytes of the last memory event; -1 before any
}

func (r *run) newMemoryWatch() *memoryWatch { return &memoryWatch{r: r, emitted: -1} }

// sampled takes one sample of the tree. It emits a memory event for the
// first, and for one that moved by an eighth or 16 MiB, whichever is more,
// since the last event: enough to follow the tree (a Fanout's memory
// budget does), few enough for events.log.
func (w *memoryWatch) sampled(s supervise.Memory) size.Tree {
	tm := size.Tree{RSSBytes: s.RSS, Processes: s.Procs, Top: size.Process{Pid: s.Top, Command: s.TopComm, RSSBytes: s.TopRSS}}
	if tm.RSSBytes > w.peak.RSSBytes {
		w.peak = tm
	}
	if w.emitted < 0 || memoryMoved(w.emitted, tm.RSSBytes) {
		w.emitted = tm.RSSBytes
		w.r.emit(Event{Type: event.Memory, Memory: &tm})
	}
	return tm
}

// final is the tree's peak as far as pilot knows it: the largest sample,
// or the worker's own high-water mark (its rusage, maxRSS, for the worker
// pid running program path) when that is more, as it is for a worker
// shorter than a heartbeat.
func (w *memoryWatch) final(pid int, maxRSS int64, path string) size.Tree {
	p := w.peak
	if maxRSS > p.RSSBytes {
		p = size.Tree{RSSBytes: maxRSS, Processes: max(p.Processes, 1),
			Top: size.Process{Pid: pid, Command: comm(path), RSSBytes: maxRSS}}
	}
	return p
}

// comm is the command name the kernel gives a process running path.
func comm(path string) string {
	b := filepath.Base(path)
	return b[:min(len(b), 15)]
}

// memoryOver says that a tree holding tm is over its limit.
func memoryOver(tm size.Tree, limit size.Bytes) string {
	return fmt.Sprintf("the process tree holds %s, over its memory limit of %s; pid %d (%s) holds the most, %s",
		size.Bytes(tm.RSSBytes).Approx(), limit, tm.Top.Pid, tm.Top.Command, size.Bytes(tm.Top.RSSBytes).Approx())
}
