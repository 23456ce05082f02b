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
	"github.com/pilotworkers/pilot/schedule"
)

// State is what the task loop keeps across runs and restarts, in a
// directory of the repository's git dir (see DefaultStateDir), which any
// number of task loops share, in this process and others:
//
//   - schedule.json, a schedule.Store: which loop owns which task. A loop
//     claims a task before it runs it and releases it when the task ends;
//     a task another live loop owns is external-active, not run. Owners
//     are told apart by pid, so two loops in one process are one owner.
//   - state.json, a retry.Store: the budgets of consecutive failures per
//     task and stage, the repetition counters, why a task is blocked, the
//     group's status. The store locks it per change, so pilot state may
//     read it, or clear a block, while the loop runs.
//   - progress.json: each task's stage progress (its worker and selfcheck
//     done, for which plan), its attempt counters (execution ids), and the
//     orchestration of the group: each task's status, its archive, and the
//     archive directories that existed when the orchestration began. Each
//     change is made under progress.json.lock, on the file as it is then,
//     and written atomically, so that no loop's change is lost to
//     another's and no reader sees part of one.
//
// A dry-run State reads what exists and writes nothing, not even its
// directory.
type State struct {
	Dir   string
	Retry *retry.Store
	// Owners is who runs which task (schedule.json).
	Owners *schedule.Store

	dryRun bool
	mu     sync.Mutex  // orders this State's reads and changes of doc
	doc    progressDoc // the progress file as last read; a dry run's in memory
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
// Task loops share their claims of tasks only through one directory: a
// loop of every group and a loop of one group keep theirs apart.
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

// OpenState opens the state in dir, creating dir. It takes no lock: task
// loops sharing dir claim each task in Owners before they run it. A state
// file that cannot be read is refused (it fails closed), with the fix.
func OpenState(dir string, dryRun bool) (*State, error) {
	path := filepath.Join(dir, retry.StateFileName)
	owners, err := schedule.OpenStore(filepath.Join(dir, schedule.StoreFileName), dryRun)
	if err != nil {
		return nil, fmt.Errorf("taskloop: %w", err)
	}
	s := &State{Dir: dir, Owners: owners, dryRun: dryRun}
	if dryRun {
		if s.Retry, err = retry.OpenStoreDryRun(path); err != nil {
			return nil, err
		}
	} else {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("taskloop: state directory: %w", err)
		}
		if s.Retry, err = retry.OpenStore(path); err != nil {
			return nil, err
		}
	}
	if s.doc, err = readProgress(s.progressPath()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *State) progressPath() string { return filepath.Join(s.Dir, "progress.json") }

// readProgress reads the progress file at path; a missing one is empty.
func readProgress(path string) (progressDoc, error) {
	doc := progressDoc{Version: progressVersion, Tasks: map[string]*taskProgress{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return doc, fmt.Errorf("taskloop: reading state file %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || doc.Version != progressVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", doc.Version, progressVersion)
		}
		return doc, fmt.Errorf("taskloop: state file %s cannot be read (%v): move it aside (the tasks' stages start over) or fix it", path, err)
	}
	if doc.Tasks == nil {
		doc.Tasks = map[string]*taskProgress{}
	}
	return doc, nil
}

// view runs f on the progress as the file holds it now (no lock: every
// write is a rename, so the file is one change or the next); when it
// cannot be read, on the progress last read. A dry run's is in memory.
func (s *State) view(f func(doc *progressDoc)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dryRun {
		if doc, err := readProgress(s.progressPath()); err == nil {
			s.doc = doc
		}
	}
	f(&s.doc)
}

// change runs f on the progress file as it is now, holding its lock, and
// writes the result when f reports a change; an error from f leaves the
// file as it was. A dry run changes its progress in memory.
func (s *State) change(f func(doc *progressDoc) (bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dryRun {
		_, err := f(&s.doc)
		return err
	}
	unlock, err := lockFile(s.progressPath() + ".lock")
	if err != nil {
		return fmt.Errorf("taskloop: locking state file %s: %w", s.progressPath(), err)
	}
	defer unlock()
	doc, err := readProgress(s.progressPath())
	if err != nil {
		return err
	}
	changed, err := f(&doc)
	if err != nil || !changed {
		if err == nil {
			s.doc = doc
		}
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(s.progressPath(), append(data, '\n')); err != nil {
		return fmt.Errorf("taskloop: writing state file %s: %w", s.progressPath(), err)
	}
	s.doc = doc
	return nil
}

// Close ends the state's use of its files. It holds no lock to release;
// every change was written when it was made.
func (s *State) Close() error { return s.Retry.Close() }

// progress returns task t's progress, started over when t's plan is not
// the one the progress is for.
func (s *State) progress(t taskfile.Task) taskfile.Progress {
	var out taskfile.Progress
	s.view(func(doc *progressDoc) {
		if p := doc.Tasks[t.Name]; p != nil && p.Plan == t.Header {
			out = taskfile.Progress{WorkerDone: p.WorkerDone, SelfcheckDone: p.SelfcheckDone}
		}
	})
	return out
}

// setProgress records task t's progress for its current plan.
func (s *State) setProgress(t taskfile.Task, f func(p *taskProgress)) error {
	return s.change(func(doc *progressDoc) (bool, error) {
		p := doc.Tasks[t.Name]
		if p == nil {
			p = &taskProgress{}
			doc.Tasks[t.Name] = p
		}
		if p.Plan != t.Header {
			*p = taskProgress{Plan: t.Header, Attempts: p.Attempts}
		}
		f(p)
		return true, nil
	})
}

// nextAttempt returns the number of task's next attempt of stage (from 0)
// and counts it.
func (s *State) nextAttempt(task, stage string) (n int, err error) {
	err = s.change(func(doc *progressDoc) (bool, error) {
		p := doc.Tasks[task]
		if p == nil {
			p = &taskProgress{}
			doc.Tasks[task] = p
		}
		if p.Attempts == nil {
			p.Attempts = map[string]int{}
		}
		n = p.Attempts[stage]
		p.Attempts[stage] = n + 1
		return true, nil
	})
	return n, err
}

// ClearBlocked unblocks the tasks of group (every group when empty) and
// resets their budgets and counters, and forgets the tasks the
// orchestration recorded gone without completing; other groups are
// untouched. A dry-run State changes nothing on disk.
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
	return s.change(func(doc *progressDoc) (bool, error) {
		o := doc.Orchestration
		if o == nil {
			return false, nil
		}
		changed := false
		for name, ot := range o.Tasks {
			if ot.Status == "failed" && (group == "" || groupOf(name) == group) {
				delete(o.Tasks, name)
				changed = true
			}
		}
		return changed, nil
	})
}

// Orchestration returns a copy of the recorded orchestration, or nil.
func (s *State) Orchestration() *Orchestration {
	var c *Orchestration
	s.view(func(doc *progressDoc) {
		o := doc.Orchestration
		if o == nil {
			return
		}
		cp := *o
		cp.Tasks = map[string]*OrchestrationTask{}
		for k, v := range o.Tasks {
			t := *v
			cp.Tasks[k] = &t
		}
		cp.Baseline = append([]string(nil), o.Baseline...)
		c = &cp
	})
	return c
}

// Prepare begins an orchestration of group over tasks: every task is
// active again (a blocker's reason is dropped; the retry state says
// whether it is still blocked), tasks an earlier run recorded stay
// recorded, so that Reconcile can account for those gone since, and the
// archive baseline is taken when none was (or the last orchestration
// completed). A loop that joins another's running orchestration shares
// its baseline.
func (s *State) Prepare(group, workspace string, tasks []taskfile.Task, now time.Time) error {
	return s.change(func(doc *progressDoc) (bool, error) {
		o := doc.Orchestration
		if o == nil || o.Group != group || o.Status == "complete" {
			base, err := archiveDirs(workspace)
			if err != nil {
				return false, err
			}
			o = &Orchestration{Group: group, StartedAt: now.UTC(), Baseline: base, Tasks: map[string]*OrchestrationTask{}}
			doc.Orchestration = o
		}
		o.Status, o.UpdatedAt = "running", now.UTC()
		for _, t := range tasks {
			o.Tasks[t.Name] = &OrchestrationTask{Status: "active"}
		}
		return true, nil
	})
}

// Reconcile accounts for the tasks the orchestration recorded active that
// are no longer in agent-task/ (present names those that are): a task
// whose directory became a new archive with a complete.log (one not in
// the baseline) is complete; one that disappeared otherwise is an error,
// by name. Completed tasks are recorded.
func (s *State) Reconcile(workspace string, present map[string]bool) (completed, errs map[string]string, err error) {
	err = s.change(func(doc *progressDoc) (bool, error) {
		completed, errs = map[string]string{}, map[string]string{}
		o := doc.Orchestration
		if o == nil {
			return false, nil
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
			archive, found, err := newArchive(workspace, name, o.Baseline)
			if err != nil {
				return false, err
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
		return true, nil
	})
	return completed, errs, err
}

// record sets task name's status in the orchestration.
func (s *State) record(name string, f func(*OrchestrationTask)) error {
	return s.change(func(doc *progressDoc) (bool, error) {
		o := doc.Orchestration
		if o == nil {
			return false, nil
		}
		ot := o.Tasks[name]
		if ot == nil {
			ot = &OrchestrationTask{}
			o.Tasks[name] = ot
		}
		f(ot)
		o.UpdatedAt = time.Now().UTC()
		return true, nil
	})
}

// finish records the orchestration's status.
func (s *State) finish(status string) error {
	var o *Orchestration
	err := s.change(func(doc *progressDoc) (bool, error) {
		if o = doc.Orchestration; o == nil {
			return false, nil
		}
		o.Status, o.UpdatedAt = status, time.Now().UTC()
		return true, nil
	})
	if err != nil || o == nil {
		return err
	}
	return s.Retry.SetGroupStatus(o.Group, status)
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
