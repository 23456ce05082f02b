package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/retry"
)

// ErrLocked is returned by OpenState when another task loop holds the
// state: it is running the same group now, so this one must not.
var ErrLocked = errors.New("taskloop: another task loop holds the state")

// errLoopHeld is lockLoop's: another holds the lock.
var errLoopHeld = errors.New("taskloop: loop.lock is held")

// LockFileName is the task loop's lock in its state directory.
const LockFileName = "loop.lock"

// State is what the task loop keeps across runs and restarts, in a
// directory of the repository's git dir (see DefaultStateDir):
//
//   - loop.lock: the task loop's lock, held while the State is open, so
//     that two task loops never run one group at once (a flock; where
//     there is none, a file holding the pid, see lockLoop).
//   - state.json, a retry.Store: the budgets of consecutive failures per
//     task and stage, the repetition counters, why a task is blocked, the
//     group's status. The store locks it per change, so pilot state may
//     read it, or clear a block, while the loop runs.
//   - progress.json: each task's stage progress (its worker and selfcheck
//     done, for which plan), its attempt counters (execution ids), and the
//     orchestration of the group: each task's status, its archive, and the
//     archive directories that existed when the orchestration began.
//   - owner.json: which process holds the state.
//
// A dry-run State reads what exists and writes nothing, not even its
// directory.
type State struct {
	Dir   string
	Retry *retry.Store

	dryRun bool
	unlock func() error // releases loop.lock; nil for a dry run
	mu     sync.Mutex
	doc    progressDoc
}

const progressVersion = 1

type progressDoc struct {
	Version       int                      `json:"version"`
	Tasks         map[string]*taskProgress `json:"tasks"`
	Orchestration *Orchestration           `json:"orchestration,omitempty"`
}

// taskProgress is one task's progress through its stages.
type taskProgress struct {
	// Plan is the plan header the progress is for: a new plan (a
	// follow-up) starts the stages over.
	Plan           taskfile.Header `json:"plan"`
	WorkerDone     bool            `json:"worker_done"`
	SelfcheckDone  bool            `json:"selfcheck_done"`
	WorkerProvider string          `json:"worker_provider,omitempty"`
	// Attempts counts the attempts of each stage, for execution ids.
	Attempts map[string]int `json:"attempts,omitempty"`
}

// An Orchestration is one group's run as the task loop records it.
type Orchestration struct {
	Group     string    `json:"group"`
	Status    string    `json:"status"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Baseline lists the archive directories (relative to agent-task/)
	// that existed when the orchestration began: only an archive outside
	// it can be a task's new completion.
	Baseline []string                      `json:"baseline"`
	Tasks    map[string]*OrchestrationTask `json:"tasks"`
}

// An OrchestrationTask is one task's status in an orchestration.
type OrchestrationTask struct {
	// Status is "active" while the loop drives it, then "complete",
	// "blocked", "waiting" (on tasks that did not complete) or "failed".
	Status    string   `json:"status"`
	Stage     string   `json:"stage,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Archive   string   `json:"archive,omitempty"`
	WaitingOn []string `json:"waiting_on,omitempty"`
}

// DefaultStateDir is the state directory of group (every group when
// empty) for the repository holding workspace: taskloop/<group> beside
// pilot's retry state in the git common dir (.git/pilot/taskloop/<group>).
func DefaultStateDir(ctx context.Context, workspace, group string) (string, error) {
	p, err := retry.DefaultStorePath(ctx, workspace)
	if err != nil {
		return "", err
	}
	if group == "" {
		group = "all"
	}
	return filepath.Join(filepath.Dir(p), "taskloop", strings.ReplaceAll(group, "/", "-")), nil
}

// OpenState opens the state in dir, creating dir, and takes the task
// loop's lock (loop.lock) until Close. Another task loop holding it is
// ErrLocked (the error names its pid when it recorded one); a state file
// that cannot be read is refused (it fails closed) with the fix, and the
// lock released. A dry run takes no lock and creates nothing.
func OpenState(dir string, dryRun bool) (*State, error) {
	path := filepath.Join(dir, retry.StateFileName)
	if dryRun {
		rs, err := retry.OpenStoreDryRun(path)
		if err != nil {
			return nil, err
		}
		s := &State{Dir: dir, Retry: rs, dryRun: true}
		if err := s.read(); err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("taskloop: state directory: %w", err)
	}
	unlock, err := lockLoop(filepath.Join(dir, LockFileName))
	if errors.Is(err, errLoopHeld) {
		who := ""
		if data, rerr := os.ReadFile(filepath.Join(dir, "owner.json")); rerr == nil {
			var o struct {
				Pid int `json:"pid"`
			}
			if json.Unmarshal(data, &o) == nil && o.Pid > 0 {
				who = fmt.Sprintf(" (pid %d)", o.Pid)
			}
		}
		return nil, fmt.Errorf("%w%s: %s; it is running this group now, or wait for it to end", ErrLocked, who, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("taskloop: locking the state directory: %w", err)
	}
	rs, err := retry.OpenStore(path)
	if err != nil {
		unlock()
		return nil, err
	}
	s := &State{Dir: dir, Retry: rs, unlock: unlock}
	if err := s.read(); err != nil {
		s.Close()
		return nil, err
	}
	owner, _ := json.Marshal(map[string]any{"pid": os.Getpid(), "since": time.Now().UTC()})
	if err := writeFileAtomic(filepath.Join(dir, "owner.json"), append(owner, '\n')); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *State) progressPath() string { return filepath.Join(s.Dir, "progress.json") }

func (s *State) read() error {
	s.doc = progressDoc{Version: progressVersion, Tasks: map[string]*taskProgress{}}
	data, err := os.ReadFile(s.progressPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.doc); err != nil || s.doc.Version != progressVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", s.doc.Version, progressVersion)
		}
		return fmt.Errorf("taskloop: state file %s cannot be read (%v): move it aside (the tasks' stages start over) or fix it", s.progressPath(), err)
	}
	if s.doc.Tasks == nil {
		s.doc.Tasks = map[string]*taskProgress{}
	}
	return nil
}

// save writes the progress file; the caller holds s.mu.
func (s *State) save() error {
	if s.dryRun {
		return nil
	}
	data, err := json.MarshalIndent(s.doc, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.progressPath(), append(data, '\n')); err != nil {
		return fmt.Errorf("taskloop: writing state file %s: %w", s.progressPath(), err)
	}
	return nil
}

// Close releases the state's lock (loop.lock), after removing owner.json,
// so that it never removes the next holder's.
func (s *State) Close() error {
	err := s.Retry.Close()
	if s.unlock != nil {
		os.Remove(filepath.Join(s.Dir, "owner.json"))
		err = errors.Join(err, s.unlock())
		s.unlock = nil
	}
	return err
}

// progress returns task t's progress, started over when t's plan is not
// the one the progress is for.
func (s *State) progress(t taskfile.Task) taskfile.Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.doc.Tasks[t.Name]
	if p == nil || p.Plan != t.Header {
		return taskfile.Progress{}
	}
	return taskfile.Progress{WorkerDone: p.WorkerDone, SelfcheckDone: p.SelfcheckDone}
}

// setProgress records task t's progress for its current plan.
func (s *State) setProgress(t taskfile.Task, f func(p *taskProgress)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.doc.Tasks[t.Name]
	if p == nil {
		p = &taskProgress{}
		s.doc.Tasks[t.Name] = p
	}
	if p.Plan != t.Header {
		*p = taskProgress{Plan: t.Header, Attempts: p.Attempts}
	}
	f(p)
	return s.save()
}

// nextAttempt returns the number of task's next attempt of stage (from 0)
// and counts it.
func (s *State) nextAttempt(task, stage string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.doc.Tasks[task]
	if p == nil {
		p = &taskProgress{}
		s.doc.Tasks[task] = p
	}
	if p.Attempts == nil {
		p.Attempts = map[string]int{}
	}
	n := p.Attempts[stage]
	p.Attempts[stage] = n + 1
	return n, s.save()
}

// ClearBlocked unblocks the tasks of group (every group when empty) and
// resets their budgets and counters, and forgets the tasks the
// orchestration recorded gone without completing; other groups are
// untouched. A
// dry-run State changes nothing on disk.
func (s *State) ClearBlocked(group string) ([]string, error) {
	if err := s.forgetFailed(group); err != nil {
		return nil, err
	}
	if group != "" {
		return s.Retry.ClearBlocked(group)
	}
	seen := map[string]bool{}
	var all []string
	for _, name := range s.Retry.Tasks() {
		g := s.Retry.Task(name).Group
		if seen[g] {
			continue
		}
		seen[g] = true
		cleared, err := s.Retry.ClearBlocked(g)
		if err != nil {
			return all, err
		}
		all = append(all, cleared...)
	}
	return all, nil
}

// forgetFailed drops from the orchestration the tasks of group (every
// group when empty) that it recorded failed (gone without completing), so
// that a person who has looked can let the group complete.
func (s *State) forgetFailed(group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.doc.Orchestration
	if o == nil {
		return nil
	}
	for name, ot := range o.Tasks {
		if ot.Status == "failed" && (group == "" || groupOf(name) == group) {
			delete(o.Tasks, name)
		}
	}
	return s.save()
}

// Orchestration returns a copy of the recorded orchestration, or nil.
func (s *State) Orchestration() *Orchestration {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.doc.Orchestration
	if o == nil {
		return nil
	}
	c := *o
	c.Tasks = map[string]*OrchestrationTask{}
	for k, v := range o.Tasks {
		t := *v
		c.Tasks[k] = &t
	}
	c.Baseline = append([]string(nil), o.Baseline...)
	return &c
}

// Prepare begins an orchestration of group over tasks: every task is
// active again (a blocker's reason is dropped; the retry state says
// whether it is still blocked), tasks an earlier run recorded stay
// recorded, so that Reconcile can account for those gone since, and the
// archive baseline is taken when none was (or the last orchestration
// completed).
func (s *State) Prepare(group, workspace string, tasks []taskfile.Task, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.doc.Orchestration
	if o == nil || o.Group != group || o.Status == "complete" {
		base, err := archiveDirs(workspace)
		if err != nil {
			return err
		}
		o = &Orchestration{Group: group, StartedAt: now.UTC(), Baseline: base, Tasks: map[string]*OrchestrationTask{}}
		s.doc.Orchestration = o
	}
	o.Status, o.UpdatedAt = "running", now.UTC()
	for _, t := range tasks {
		o.Tasks[t.Name] = &OrchestrationTask{Status: "active"}
	}
	return s.save()
}

// Reconcile accounts for the tasks the orchestration recorded active that
// are no longer in agent-task/ (present names those that are): a task
// whose directory became a new archive with a complete.log (one not in
// the baseline) is complete; one that disappeared otherwise is an error,
// by name. Completed tasks are recorded.
func (s *State) Reconcile(workspace string, present map[string]bool) (completed, errs map[string]string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	completed, errs = map[string]string{}, map[string]string{}
	o := s.doc.Orchestration
	if o == nil {
		return completed, errs, nil
	}
	names := make([]string, 0, len(o.Tasks))
	for name := range o.Tasks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ot := o.Tasks[name]
		if present[name] || ot.Status == "complete" {
			continue
		}
		archive, found, aerr := newArchive(workspace, name, o.Baseline)
		if aerr != nil {
			return completed, errs, aerr
		}
		if found {
			ot.Status, ot.Archive, ot.Reason = "complete", archive, ""
			completed[name] = archive
			continue
		}
		why := fmt.Sprintf("task %s disappeared from agent-task/ without a new archive holding a complete.log", name)
		ot.Status, ot.Reason = "failed", why
		errs[name] = why
	}
	return completed, errs, s.save()
}

// record sets task name's status in the orchestration.
func (s *State) record(name string, f func(*OrchestrationTask)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.doc.Orchestration
	if o == nil {
		return nil
	}
	ot := o.Tasks[name]
	if ot == nil {
		ot = &OrchestrationTask{}
		o.Tasks[name] = ot
	}
	f(ot)
	o.UpdatedAt = time.Now().UTC()
	return s.save()
}

// finish records the orchestration's status.
func (s *State) finish(status string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.doc.Orchestration; o != nil {
		o.Status, o.UpdatedAt = status, time.Now().UTC()
	}
	if err := s.save(); err != nil {
		return err
	}
	if s.doc.Orchestration != nil {
		return s.Retry.SetGroupStatus(s.doc.Orchestration.Group, status)
	}
	return nil
}

// writeFileAtomic writes data to path through a synced temporary file
// renamed over it, so that a reader sees the old file or the new one,
// never part, and the new one survives a crash of the machine once it
// returns, making path's directory. On error path is unchanged.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
