package schedule

import "slices"

// Writes is what one job may write: Files (normalized, sorted, as
// WriteSet returns them), or Unknown, with Why, which keeps the job from
// running beside any other job that writes. The zero Writes writes
// nothing another job is kept from.
type Writes struct {
	Files   []string
	Unknown bool
	Why     string
}

func (s Writes) writes() bool { return s.Unknown || len(s.Files) > 0 }

// Writers holds the write sets of a graph's running jobs and says whether
// another may start beside them: the rule Scheduler.Run keeps on one
// machine, and contrib/temporal's workflow across many. Jobs are named by
// their index in the graph. It reads no clock and no map in an order that
// matters, so a replayed workflow decides as the run did.
type Writers struct {
	files   map[string]int // file -> the running job that writes it
	writing []int          // running jobs that write, ascending
	unknown int            // running jobs whose write set is unknown
}

// Conflict returns a running job that keeps a job of write set s from
// starting, and why (name gives a job's name for the reason); -1 and ""
// when none does. The running job named is the first in graph order.
func (w *Writers) Conflict(s Writes, name func(int) string) (int, string) {
	if !s.writes() {
		return -1, ""
	}
	if s.Unknown {
		if len(w.writing) > 0 {
			k := w.writing[0]
			return k, "its write set is unknown (" + s.Why + ") and " + name(k) + " is writing"
		}
		return -1, ""
	}
	if w.unknown > 0 {
		k := w.writing[0]
		return k, "running job " + name(k) + " has an unknown write set"
	}
	for _, f := range s.Files {
		if k, ok := w.files[f]; ok {
			return k, "its write set overlaps running job " + name(k) + " on " + f
		}
	}
	return -1, ""
}

// Start records that job i, of write set s, runs.
func (w *Writers) Start(i int, s Writes) {
	if !s.writes() {
		return
	}
	if s.Unknown {
		w.unknown++
	}
	at, _ := slices.BinarySearch(w.writing, i)
	w.writing = slices.Insert(w.writing, at, i)
	if w.files == nil {
		w.files = map[string]int{}
	}
	for _, f := range s.Files {
		w.files[f] = i
	}
}

// Finish records that job i, of write set s, no longer runs.
func (w *Writers) Finish(i int, s Writes) {
	if !s.writes() {
		return
	}
	if s.Unknown {
		w.unknown--
	}
	if at, ok := slices.BinarySearch(w.writing, i); ok {
		w.writing = slices.Delete(w.writing, at, at+1)
	}
	for _, f := range s.Files {
		if w.files[f] == i {
			delete(w.files, f)
		}
	}
}

// Writing reports whether any running job writes.
func (w *Writers) Writing() bool { return len(w.writing) > 0 }
