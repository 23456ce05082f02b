package retry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/filelock"
)

// StateVersion is the version of the state file format this package writes.
const StateVersion = 1

// StateFileName is the state file's name in its directory.
const StateFileName = "state.json"

// Errors of the state store, matched with errors.Is.
var (
	// ErrStateLocked was returned while a Store held its file's lock
	// from OpenStore to Close. The store now locks per operation and
	// waits for another's to end, so nothing in this package returns it;
	// it remains for callers that test for it.
	ErrStateLocked = errors.New("pilot: state file is locked")
	// ErrStateCorrupt: the state file cannot be read as a state file.
	ErrStateCorrupt = errors.New("pilot: state file is corrupt")
)

// A StateError is a state file pilot could not open, read or write. Its
// message names the file and the way out.
type StateError struct {
	Path string
	// Fix says how to recover.
	Fix string
	Err error
}

func (e *StateError) Error() string {
	msg := fmt.Sprintf("pilot: state file %s: %v", e.Path, e.Err)
	if e.Fix != "" {
		msg += ": " + e.Fix
	}
	return msg
}

func (e *StateError) Unwrap() error { return e.Err }

// TaskState is what the state store keeps of one task: its consecutive
// recovery failures per stage, the caller's own counters, why it is blocked
// (empty when it is not), and its last attempt.
type TaskState struct {
	// Group is the task's group, which ClearBlocked selects by.
	Group string `json:"group"`
	// RecoveryFailures counts consecutive failed attempts per stage (a
	// Key's Stage); a success resets the stage's count.
	RecoveryFailures map[string]int `json:"recovery_failures,omitempty"`
	// Resets counts, per stage, the successes that reset its count of
	// failures: an attempt claimed on a count since reset is counted
	// again when it fails.
	Resets map[string]int `json:"resets,omitempty"`
	// Counters are the caller's own repetition counters
	// ("selfcheck_incomplete", "review_no_progress"), see Bump.
	Counters map[string]int `json:"counters,omitempty"`
	// Blocked says why the task must not run again until ClearBlocked;
	// empty when it may run.
	Blocked string `json:"blocked,omitempty"`
	// LastRecord is the record.json of the task's last attempt, and
	// LastFailureClass its failure class when it failed: enough to
	// resume it after a restart.
	LastRecord       string             `json:"last_record,omitempty"`
	LastFailureClass pilot.FailureClass `json:"last_failure_class,omitempty"`
	LastStage        string             `json:"last_stage,omitempty"`
	UpdatedAt        time.Time          `json:"updated_at"`
}

func (t TaskState) clone() TaskState {
	c := t
	c.RecoveryFailures = cloneCounts(t.RecoveryFailures)
	c.Resets = cloneCounts(t.Resets)
	c.Counters = cloneCounts(t.Counters)
	return c
}

func cloneCounts(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// GroupState is a group's orchestration status, as the caller sets it.
type GroupState struct {
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updated_at"`
}

// stateDoc is the state file.
type stateDoc struct {
	Version int                   `json:"version"`
	Tasks   map[string]TaskState  `json:"tasks"`
	Groups  map[string]GroupState `json:"groups"`
}

// A Store is pilot's persistent state: failure budgets, counters,
// blocked tasks and group status, in one JSON file that survives restarts
// and that any number of Stores share, in this process and others. Every
// operation takes the file's lock (flock on a ".lock" file beside it),
// reads the file, and, for a change, writes the changed state at once,
// atomically and durably (temporary file, fsync, rename, fsync of the
// directory) before it releases the lock: no change is lost to another's,
// and a reader sees one state or the next, never a torn one. An operation
// waits while another holds the lock; none holds it for longer than one
// read and one write. Nothing is held between operations.
//
// A Store opened with OpenStoreDryRun reads the file if it exists and
// keeps changes in memory only: it never creates, locks or changes a file.
//
// A Store is safe for concurrent use.
type Store struct {
	path   string
	dryRun bool
	now    func() time.Time

	mu     sync.Mutex // orders this Store's operations; guards what follows
	closed bool
	// doc is a dry run's state. Otherwise it is the file's state as this
	// Store last read or wrote it: what a read returns when the file
	// cannot be read, or after Close.
	doc stateDoc
}

// DefaultStorePath returns the state file of the git repository holding
// workdir: <git common dir>/pilot/state.json (".git/pilot/state.json" in an
// ordinary checkout, shared by its worktrees). It runs the git CLI.
func DefaultStorePath(ctx context.Context, workdir string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--git-common-dir")
	cmd.Dir = workdir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pilot: %s is not in a git repository (%s): give the state directory explicitly", workdir, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workdir, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("pilot: %w", err)
	}
	return filepath.Join(abs, "pilot", StateFileName), nil
}

// OpenStore opens the state file at path, creating its directory when it
// does not exist (the file itself is written by the first change). It
// reads the file once, under its lock, to refuse one that is not a state
// file: that is ErrStateCorrupt, as a *StateError that says how to
// recover. The Store holds no lock between operations, so any number of
// pilots may open one file at once.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pilot: state file: %w", err)
	}
	s := &Store{path: abs, now: time.Now}
	if err := s.locked(func() error {
		atomicfile.RemoveOrphans(s.path)
		doc, err := readState(s.path)
		s.doc = doc
		return err
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenStoreDryRun reads the state file at path, if there is one, without
// locking it; changes to the returned store are never written.
func OpenStoreDryRun(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pilot: state file: %w", err)
	}
	doc, err := readState(abs)
	if err != nil {
		return nil, err
	}
	return &Store{path: abs, dryRun: true, now: time.Now, doc: doc}, nil
}

// locked runs f holding the file's lock, which it waits for.
func (s *Store) locked(f func() error) error {
	dirFix := "make its directory writable or choose another state directory"
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return &StateError{Path: s.path, Err: err, Fix: dirFix}
	}
	lock, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return &StateError{Path: s.path, Err: err, Fix: cmp.Or(filelock.Fix(err), dirFix)}
	}
	defer lock.Close() // closing the descriptor releases the flock
	if err := filelock.Lock(lock); err != nil {
		return &StateError{Path: s.path, Err: fmt.Errorf("locking %s: %w", lock.Name(), err), Fix: filelock.Fix(err)}
	}
	return f()
}

// readState reads the state file at path; a missing file is an empty
// state.
func readState(path string) (stateDoc, error) {
	empty := stateDoc{Version: StateVersion}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return empty, &StateError{Path: path, Err: err, Fix: "make it readable"}
	}
	corrupt := func(why error) (stateDoc, error) {
		return empty, &StateError{Path: path, Err: fmt.Errorf("%w: %v", ErrStateCorrupt, why),
			Fix: "move it aside (or delete it) to start with an empty state; that forgets failure budgets and blocked tasks"}
	}
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return corrupt(err)
	}
	if dec.More() {
		return corrupt(errors.New("data after the JSON object"))
	}
	switch {
	case doc.Version == 0 && doc.Tasks == nil && doc.Groups == nil:
		// "{}": an empty state.
	case doc.Version != StateVersion:
		return corrupt(fmt.Errorf("version %d, this pilot reads version %d", doc.Version, StateVersion))
	}
	for name, t := range doc.Tasks {
		for k, n := range t.RecoveryFailures {
			if n < 0 {
				return corrupt(fmt.Errorf("task %q: negative recovery_failures[%q]", name, k))
			}
		}
		for k, n := range t.Counters {
			if n < 0 {
				return corrupt(fmt.Errorf("task %q: negative counter %q", name, k))
			}
		}
	}
	doc.Version = StateVersion
	return doc, nil
}

// writeState replaces the file at path with doc, durably.
func writeState(path string, doc stateDoc) error {
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return &StateError{Path: path, Err: err}
	}
	if err := atomicfile.WriteFileSync(path, append(data, '\n'), 0o600); err != nil {
		return &StateError{Path: path, Err: err, Fix: "make its directory writable (the change was not saved)"}
	}
	return nil
}

// read runs f on the current state: the file's, read under its lock, or a
// dry run's. When the file cannot be read (or the Store is closed) f gets
// the state this Store last read. f must not keep doc's maps.
func (s *Store) read(f func(doc *stateDoc)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dryRun && !s.closed {
		s.locked(func() error {
			doc, err := readState(s.path)
			if err == nil {
				s.doc = doc
			}
			return err
		})
	}
	f(&s.doc)
}

// change runs f on the current state under the file's lock and, when f
// reports a change, writes the result before the lock is released. A dry
// run changes its state in memory. On an error the file is unchanged.
func (s *Store) change(f func(doc *stateDoc) bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dryRun {
		f(&s.doc)
		return nil
	}
	if s.closed {
		return &StateError{Path: s.path, Err: errors.New("the store is closed"), Fix: "open it again"}
	}
	return s.locked(func() error {
		doc, err := readState(s.path)
		if err != nil {
			return err
		}
		if !f(&doc) {
			s.doc = doc
			return nil
		}
		if err := writeState(s.path, doc); err != nil {
			return err
		}
		s.doc = doc
		return nil
	})
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// DryRun reports whether the store never writes.
func (s *Store) DryRun() bool { return s.dryRun }

// Close ends the Store's use of the file: later changes fail, and reads
// return the state it last read. It holds no lock to release; every change
// was written when it was made.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Task returns the state of the task named name (a zero TaskState for a
// task the store does not know).
func (s *Store) Task(name string) TaskState {
	var t TaskState
	s.read(func(doc *stateDoc) { t = doc.Tasks[name].clone() })
	return t
}

// Tasks returns the names of the tasks the store knows, sorted.
func (s *Store) Tasks() []string {
	var names []string
	s.read(func(doc *stateDoc) {
		names = make([]string, 0, len(doc.Tasks))
		for n := range doc.Tasks {
			names = append(names, n)
		}
	})
	sort.Strings(names)
	return names
}

// UpdateTask changes the task's state with f and writes the file. f gets
// the task's state as the file holds it now, with the file locked: it must
// be quick and must not use the store. A task without a Group gets
// DefaultGroup(name). On an error nothing is changed.
func (s *Store) UpdateTask(name string, f func(*TaskState)) error {
	return s.change(func(doc *stateDoc) bool {
		t := doc.Tasks[name].clone()
		f(&t)
		s.setTask(doc, name, t)
		return true
	})
}

// setTask stores t as the task's state in doc.
func (s *Store) setTask(doc *stateDoc, name string, t TaskState) {
	if t.Group == "" {
		t.Group = DefaultGroup(name)
	}
	t.UpdatedAt = s.now().UTC()
	if doc.Tasks == nil {
		doc.Tasks = map[string]TaskState{}
	}
	doc.Tasks[name] = t
}

// DefaultGroup is the group of a task named name when none is given: the
// part of the name before its first "/" ("alpha" for "alpha/01_task"), or
// the whole name.
func DefaultGroup(name string) string {
	if g, _, ok := strings.Cut(name, "/"); ok && g != "" {
		return g
	}
	return name
}

// ClearBlocked unblocks every task of group and resets its recovery
// failures and counters; other groups are untouched. It returns the names
// of the tasks it cleared.
func (s *Store) ClearBlocked(group string) ([]string, error) {
	var cleared []string
	err := s.change(func(doc *stateDoc) bool {
		cleared = nil
		for name, t := range doc.Tasks {
			if t.Group != group {
				continue
			}
			t.Blocked = ""
			t.RecoveryFailures = nil
			t.Counters = nil
			s.setTask(doc, name, t)
			cleared = append(cleared, name)
		}
		return len(cleared) > 0
	})
	if err != nil || len(cleared) == 0 {
		return nil, err
	}
	sort.Strings(cleared)
	return cleared, nil
}

// Bump adds one to the task's counter and, when the count reaches limit,
// blocks the task with "<reason>: <count>/<limit>". It returns the new
// count and whether the task is now blocked.
func (s *Store) Bump(task, counter string, limit int, reason string) (n int, blocked bool, err error) {
	err = s.UpdateTask(task, func(t *TaskState) {
		if t.Counters == nil {
			t.Counters = map[string]int{}
		}
		t.Counters[counter]++
		n = t.Counters[counter]
		if limit > 0 && n >= limit {
			t.Blocked = fmt.Sprintf("%s: %d/%d", reason, n, limit)
			blocked = true
		}
	})
	return n, blocked, err
}

// ResetCounter sets the task's counter back to zero (progress was made).
func (s *Store) ResetCounter(task, counter string) error {
	return s.UpdateTask(task, func(t *TaskState) { delete(t.Counters, counter) })
}

// CheckLimit reports whether the task may run another pass counted by
// counter: it is not blocked and the counter is below limit. A counter
// already at the limit blocks the task with "<what> limit already
// exhausted: <count>/<limit>" and reports false, so that nothing is invoked.
// The check and the block are one change of the file.
func (s *Store) CheckLimit(task, counter string, limit int, what string) (bool, error) {
	ok := false
	err := s.change(func(doc *stateDoc) bool {
		t := doc.Tasks[task]
		if t.Blocked != "" {
			return false
		}
		n := t.Counters[counter]
		if limit <= 0 || n < limit {
			ok = true
			return false
		}
		t = t.clone()
		t.Blocked = fmt.Sprintf("%s limit already exhausted: %d/%d", what, n, limit)
		s.setTask(doc, task, t)
		return true
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Group returns a group's orchestration status.
func (s *Store) Group(name string) GroupState {
	var g GroupState
	s.read(func(doc *stateDoc) { g = doc.Groups[name] })
	return g
}

// SetGroupStatus records a group's orchestration status ("running",
// "complete", ... as the caller defines them).
func (s *Store) SetGroupStatus(name, status string) error {
	return s.change(func(doc *stateDoc) bool {
		if doc.Groups == nil {
			doc.Groups = map[string]GroupState{}
		}
		doc.Groups[name] = GroupState{Status: status, UpdatedAt: s.now().UTC()}
		return true
	})
}
