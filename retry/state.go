package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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
	// ErrStateLocked: another process (or another open Store) holds
	// the state file's lock.
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
// blocked tasks and group status, in one JSON file that survives restarts.
// The process that opens it holds an exclusive lock (flock on a ".lock" file
// beside it) until Close; every change is written at once, atomically and
// durably (temporary file, fsync, rename, fsync of the directory).
//
// A Store opened with OpenStoreDryRun reads the file if it exists and
// keeps changes in memory only: it never creates, locks or changes a file.
//
// A Store is safe for concurrent use.
type Store struct {
	path   string
	dryRun bool
	lock   *os.File
	now    func() time.Time

	mu  sync.Mutex
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

// OpenStore opens the state file at path, creating it (and its directory)
// when it does not exist, and takes its lock. A file that another process
// holds is ErrStateLocked; one that is not a state file is ErrStateCorrupt,
// and the lock is released. Both come as a *StateError that says how to
// recover.
func OpenStore(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pilot: state file: %w", err)
	}
	s := &Store{path: abs, now: time.Now}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, &StateError{Path: abs, Err: err, Fix: "make its directory writable or choose another state directory"}
	}
	lock, err := os.OpenFile(abs+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, &StateError{Path: abs, Err: err, Fix: "make its directory writable or choose another state directory"}
	}
	if err := filelock.TryLock(lock); err != nil {
		holder := readHolder(lock)
		lock.Close()
		return nil, &StateError{Path: abs, Err: fmt.Errorf("%w%s", ErrStateLocked, holder),
			Fix: "wait for the other pilot process to finish, or give this run a state directory of its own"}
	}
	// Note the holder for the message above; the lock is what counts.
	if err := lock.Truncate(0); err == nil {
		lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	s.lock = lock
	if err := s.load(); err != nil {
		s.Close()
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
	s := &Store{path: abs, dryRun: true, now: time.Now}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

func readHolder(f *os.File) string {
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil && pid > 0 {
		return fmt.Sprintf(" by pid %d", pid)
	}
	return ""
}

// load reads the state file; a missing file is an empty state.
func (s *Store) load() error {
	s.doc = stateDoc{Version: StateVersion}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &StateError{Path: s.path, Err: err, Fix: "make it readable"}
	}
	corrupt := func(why error) error {
		return &StateError{Path: s.path, Err: fmt.Errorf("%w: %v", ErrStateCorrupt, why),
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
	s.doc = doc
	return nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// DryRun reports whether the store never writes.
func (s *Store) DryRun() bool { return s.dryRun }

// Close releases the lock. The state was written at every change.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close() // closing the descriptor releases the flock
	s.lock = nil
	return err
}

// Task returns the state of the task named name (a zero TaskState for a
// task the store does not know).
func (s *Store) Task(name string) TaskState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doc.Tasks[name].clone()
}

// Tasks returns the names of the tasks the store knows, sorted.
func (s *Store) Tasks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.doc.Tasks))
	for n := range s.doc.Tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UpdateTask changes the task's state with f and writes the file. A task
// without a Group gets DefaultGroup(name). On a write error the change is
// undone.
func (s *Store) UpdateTask(name string, f func(*TaskState)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.doc.Tasks[name]
	t := old.clone()
	f(&t)
	if t.Group == "" {
		t.Group = DefaultGroup(name)
	}
	t.UpdatedAt = s.now().UTC()
	if s.doc.Tasks == nil {
		s.doc.Tasks = map[string]TaskState{}
	}
	s.doc.Tasks[name] = t
	if err := s.write(); err != nil {
		if had {
			s.doc.Tasks[name] = old
		} else {
			delete(s.doc.Tasks, name)
		}
		return err
	}
	return nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	var cleared []string
	old := map[string]TaskState{}
	for name, t := range s.doc.Tasks {
		if t.Group != group {
			continue
		}
		old[name] = t
		t.Blocked = ""
		t.RecoveryFailures = nil
		t.Counters = nil
		t.UpdatedAt = s.now().UTC()
		s.doc.Tasks[name] = t
		cleared = append(cleared, name)
	}
	sort.Strings(cleared)
	if len(cleared) == 0 {
		return nil, nil
	}
	if err := s.write(); err != nil {
		for name, t := range old {
			s.doc.Tasks[name] = t
		}
		return nil, err
	}
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
func (s *Store) CheckLimit(task, counter string, limit int, what string) (bool, error) {
	t := s.Task(task)
	if t.Blocked != "" {
		return false, nil
	}
	n := t.Counters[counter]
	if limit <= 0 || n < limit {
		return true, nil
	}
	return false, s.UpdateTask(task, func(t *TaskState) {
		t.Blocked = fmt.Sprintf("%s limit already exhausted: %d/%d", what, n, limit)
	})
}

// Group returns a group's orchestration status.
func (s *Store) Group(name string) GroupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doc.Groups[name]
}

// SetGroupStatus records a group's orchestration status ("running",
// "complete", ... as the caller defines them).
func (s *Store) SetGroupStatus(name, status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.doc.Groups[name]
	if s.doc.Groups == nil {
		s.doc.Groups = map[string]GroupState{}
	}
	s.doc.Groups[name] = GroupState{Status: status, UpdatedAt: s.now().UTC()}
	if err := s.write(); err != nil {
		if had {
			s.doc.Groups[name] = old
		} else {
			delete(s.doc.Groups, name)
		}
		return err
	}
	return nil
}

// write replaces the file with the state. Called with mu held; a dry run
// writes nothing.
func (s *Store) write() error {
	if s.dryRun {
		return nil
	}
	if s.lock == nil {
		return &StateError{Path: s.path, Err: errors.New("the store is closed"), Fix: "open it again"}
	}
	data, err := json.MarshalIndent(s.doc, "", "  ")
	if err != nil {
		return &StateError{Path: s.path, Err: err}
	}
	if err := atomicfile.WriteFileSync(s.path, append(data, '\n'), 0o600); err != nil {
		return &StateError{Path: s.path, Err: err, Fix: "make its directory writable (the change was not saved)"}
	}
	return nil
}
