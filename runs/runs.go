// Package runs reads and tidies pilot's run history: the run directories a
// [pilot.Dispatcher] writes under its RunDir, one per dispatch, each with
// its record.json, stream.log and events.log. It lists and finds runs,
// prints or follows a run's log, closes out the runs whose pilot died
// ([Reconcile]) and removes old ones ([Prune]), as `pilot runs` does.
//
// Every function takes the run directory dir, a Dispatcher's RunDir; ""
// means [pilot.DefaultRunDir]. Nothing here starts a worker, and nothing
// but Reconcile and Prune changes a file.
package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/worktrees"
)

// Statuses of a record beside its verdict (see [pilot.Record].Status).
const (
	// StatusRunning is a record's status while its dispatch goes on.
	StatusRunning = rundir.Running
	// StatusAbandoned is the status Reconcile gives a record whose pilot
	// died before it could close the record out.
	StatusAbandoned = rundir.Abandoned
)

// Run is one run directory and its record. The zero Run is no run.
type Run struct {
	// ID is the run id: the name of the run's directory.
	ID string
	// Dir is the run's directory.
	Dir string
	// Record is its record.json as it was read.
	Record pilot.Record
}

// RecordPath is the path of the run's record.json.
func (r Run) RecordPath() string { return filepath.Join(r.Dir, "record.json") }

// StreamLog is the path of the run's stream.log: the worker's output.
func (r Run) StreamLog() string { return filepath.Join(r.Dir, "stream.log") }

// EventsLog is the path of the run's events.log: pilot's events of the run.
func (r Run) EventsLog() string { return filepath.Join(r.Dir, "events.log") }

// Owner reports whether the pilot that dispatched the run still runs, and
// how that was found out (a pid gone, or reused by a later process). It
// means something only while the record says StatusRunning: a running
// record whose pilot is gone will never end, and Reconcile closes it out.
func (r Run) Owner() (alive bool, evidence string) {
	rec := r.Record
	pv := rec.Provenance
	return rundir.Owner(rundir.Record{RunID: rec.RunID, Status: rec.Status, Pid: rec.Pid, Pgid: rec.Pgid,
		StartedAt: rec.StartedAt, DispatcherPid: pv.Pid, DispatcherStart: pv.Start,
		BootID: pv.BootID, PidNamespace: pv.PidNamespace, Host: pv.Host})
}

// OwnsWorktree reports whether e, an entry of [worktrees.List], is the
// run's worktree: the inventory names the run, or the run's workdir is the
// worktree (the inventory learns the run id only when the run is over).
func (r Run) OwnsWorktree(e worktrees.Entry) bool {
	return e.RunID == r.ID || (r.Record.Workdir != "" && filepath.Clean(e.Path) == filepath.Clean(r.Record.Workdir))
}

// RecordError is a run directory whose record.json could not be read or
// parsed; List and Prune leave that run out and go on.
type RecordError struct {
	Dir string // the run's directory
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("runs: the record of %s cannot be read (fix or remove the directory): %v", e.Dir, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// ErrNoRun is the error of Find when no run has the name given, and
// ErrAmbiguous when the name is the start of several run ids.
var (
	ErrNoRun     = errors.New("runs: no such run")
	ErrAmbiguous = errors.New("runs: the name is the start of several run ids")
)

// List returns the runs of the run directory dir, newest first. A missing
// dir has no runs; so has a directory with no record.json yet (its pilot
// has not written it, or died first), and it is left out silently. A run
// whose record cannot be read is left out too, with a [*RecordError]
// joined into err; the runs that could be read are returned all the same.
func List(dir string) ([]Run, error) {
	dir = resolve(dir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runs: reading the run directory: %w", err)
	}
	var runs []Run
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		r, err := read(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		runs = append(runs, r)
	}
	slices.SortStableFunc(runs, func(a, b Run) int {
		if c := b.Record.StartedAt.Compare(a.Record.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return runs, errors.Join(errs...)
}

// Find returns the run that name names in dir: a run id, the start of
// exactly one, "last" (the run started last, as List orders them), or the
// path of a run directory or of its record.json (a path may be outside
// dir). Its errors wrap ErrNoRun, ErrAmbiguous, or what reading the
// record met (a [*RecordError]).
func Find(dir, name string) (Run, error) {
	if name == Last {
		if _, err := os.Stat(filepath.Join(resolve(dir), name, "record.json")); err != nil {
			all, err := List(dir)
			if len(all) > 0 {
				return all[0], nil
			}
			if err != nil {
				return Run{}, err
			}
			return Run{}, fmt.Errorf("%w in %s: there is no last run", ErrNoRun, resolve(dir))
		}
	}
	if strings.ContainsRune(name, os.PathSeparator) || strings.ContainsRune(name, '/') {
		d := name
		if filepath.Base(d) == "record.json" {
			d = filepath.Dir(d)
		}
		return read(d)
	}
	dir = resolve(dir)
	var match []string
	if _, err := os.Stat(filepath.Join(dir, name, "record.json")); err == nil {
		match = []string{name}
	} else {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Run{}, fmt.Errorf("runs: reading the run directory: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && strings.HasPrefix(e.Name(), name) {
				match = append(match, e.Name())
			}
		}
	}
	switch {
	case len(match) == 0:
		return Run{}, fmt.Errorf("%w %q in %s: give a run id that List returns, or a run directory's path", ErrNoRun, name, dir)
	case len(match) > 1:
		return Run{}, fmt.Errorf("%w: %q starts %d run ids in %s; give more of the run id", ErrAmbiguous, name, len(match), dir)
	}
	return read(filepath.Join(dir, match[0]))
}

// Last is the name Find takes for the run started last.
const Last = "last"

// read reads the run in directory dir. A missing record.json is returned
// as it is (fs.ErrNotExist); any other failure is a *RecordError.
func read(dir string) (Run, error) {
	r := Run{ID: filepath.Base(dir), Dir: dir}
	var err error
	r.Record, err = pilot.ReadRecord(r.RecordPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, &RecordError{Dir: dir, Err: err}
	}
	return r, err
}

// resolve is dir, or pilot.DefaultRunDir() for "".
func resolve(dir string) string {
	if dir == "" {
		return pilot.DefaultRunDir()
	}
	return dir
}
