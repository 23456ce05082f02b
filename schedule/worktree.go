package schedule

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/worktrees"
)

// Worktrees makes a Scheduler's worktree jobs' git worktrees and merges
// their work, touching no checkout of the repository's own.
// worktrees.New's *worktrees.Git is one; see its methods for what each
// must do. A conflict is an error in which errors.As finds a
// *worktrees.Conflict.
type Worktrees interface {
	pilot.Worktrees
	// CreateAt is Create with the branch starting at commit base.
	CreateAt(ctx context.Context, dir, name, base string) (pilot.WorktreeInfo, error)
	// Merge returns a commit of onto with branches merged in, in order.
	Merge(ctx context.Context, dir, onto string, branches []string) (string, error)
	// Advance merges branch from into branch into (made at base when
	// missing) and returns into's new tip.
	Advance(ctx context.Context, dir, into, base, from string) (string, error)
}

// prepareWorktrees checks, before anything runs, that the graph's worktree
// jobs can have their worktrees, and fixes the graph's base commit.
func (r *runState) prepareWorktrees(ctx context.Context, g Graph) error {
	var first string
	for _, j := range g.Jobs {
		if j.Worktree {
			first = j.ID
			break
		}
	}
	if first == "" {
		if r.s.Integrate != "" {
			return errors.New("schedule: Scheduler.Integrate is set but no job of the graph is a worktree job: only worktree jobs leave branches to integrate")
		}
		return nil
	}
	if r.s.Worktrees == nil {
		return fmt.Errorf("schedule: job %s is a worktree job: set Scheduler.Worktrees (worktrees.New makes one)", first)
	}
	if err := r.s.Worktrees.CheckRepo(ctx, r.workdir); err != nil {
		return fmt.Errorf("schedule: worktree jobs: %w", err)
	}
	base, err := r.s.Worktrees.Merge(ctx, r.workdir, "HEAD", nil)
	if err != nil {
		return fmt.Errorf("schedule: worktree jobs: reading the base commit: %w", err)
	}
	r.base = base
	if into := r.s.Integrate; into != "" {
		// Refused now, not after the graph ran: a branch that is checked
		// out, a bad name, or one that does not take the base.
		if _, err := r.s.Worktrees.Advance(ctx, r.workdir, into, base, base); err != nil {
			return fmt.Errorf("schedule: Integrate: %w", err)
		}
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	r.token = hex.EncodeToString(b[:])
	return nil
}

// depBranches lists the branches of job i's dependencies, direct or not,
// that left work, in graph order.
func (r *runState) depBranches(i int) []string {
	seen := make([]bool, len(r.jobs))
	var visit func(k int)
	visit = func(k int) {
		for _, d := range r.jobs[k].deps {
			if !seen[d] {
				seen[d] = true
				visit(d)
			}
		}
	}
	visit(i)
	var out []string
	for k, ok := range seen {
		if w := r.jobs[k].res.Worktree; ok && w != nil && w.Kept && w.Branch != "" {
			out = append(out, w.Branch)
		}
	}
	return out
}

// enterWorktree gives job id's task t its worktree: active, when it has
// one already (it resumes after its provider's rate limit), else a new one
// at the graph's base with branches merged in. With a nil worktree, either
// conflict says why the work does not merge (the job is blocked) or err is
// pilot's own failure.
func (r *runState) enterWorktree(ctx context.Context, id string, t *pilot.Task, active *pilot.WorktreeInfo, branches []string) (wt *pilot.WorktreeInfo, conflict string, err error) {
	if active == nil {
		dir := t.Workdir
		if dir == "" {
			dir = r.workdir
		}
		start, err := r.s.Worktrees.Merge(ctx, dir, r.base, branches)
		var c *worktrees.Conflict
		if errors.As(err, &c) {
			c.Onto = "the base " + c.Onto[:min(len(c.Onto), 12)]
			return nil, "its dependencies' work does not merge: " + c.Error(), nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("worktree: merging its dependencies' work: %w", err)
		}
		info, err := r.s.Worktrees.CreateAt(ctx, dir, "schedule-"+id+"-"+r.token, start)
		if err != nil {
			return nil, "", fmt.Errorf("worktree: %w", err)
		}
		active = &info
	}
	t.Workdir = active.Path
	return active, "", nil
}

// A salvager takes over a worktree a dead pilot's run left: see
// worktrees.Git's Salvage. A Scheduler's Worktrees that is one (as
// *worktrees.Git is) lets a job taken over from a dead pilot start from
// that pilot's work.
type salvager interface {
	Salvage(ctx context.Context, name, job string) (pilot.WorktreeInfo, error)
}

// salvage takes over worktree name, which a dead owner's run of job jb
// left, and returns branches with its branch added when it holds work:
// the job's new worktree starts from it. What it could not do is said in
// an event; the job then starts without it.
func (r *runState) salvage(ctx context.Context, jb *job, name string, branches []string) []string {
	sv, ok := r.s.Worktrees.(salvager)
	if !ok {
		return branches
	}
	info, err := sv.Salvage(ctx, name, jb.label()+", taken over from a dead pilot")
	switch {
	case err != nil:
		r.emit(Event{Type: EventSalvaged, Job: jb.ID, Provider: jb.Task.Provider,
			Reason: "the worktree its dead owner left was not taken over: " + err.Error()})
	case info.Kept:
		r.emit(Event{Type: EventSalvaged, Job: jb.ID, Provider: jb.Task.Provider,
			Reason: "starts from the work its dead owner left, committed on " + info.Branch})
		return append(branches, info.Branch)
	}
	return branches
}

// label names job jb in its worktree's commit: "api (glm:code)".
func (jb *job) label() string {
	return jb.ID + " (" + jb.Task.Provider + ":" + string(jb.Task.Mode) + ")"
}

// leaveWorktree ends job jb's use of its worktree after the run runID:
// Result.Worktree says what was kept.
func (r *runState) leaveWorktree(jb *job, runID string) error {
	info := *jb.active
	jb.active = nil
	info.Job, info.TaskFile = jb.label(), jb.Task.TaskFile
	fin, err := r.s.Worktrees.Finish(context.Background(), info, runID)
	if err != nil {
		info.Kept = true
		jb.res.Worktree = &info
		return fmt.Errorf("worktree %s: %w", info.Name, err)
	}
	jb.res.Worktree = &fin
	return nil
}

// integrate merges every complete worktree job's branch into
// Scheduler.Integrate, in graph order, once the graph is over.
func (r *runState) integrate(ctx context.Context) {
	into := r.s.Integrate
	if into == "" {
		return
	}
	for _, jb := range r.jobs {
		w := jb.res.Worktree
		if jb.res.Status != StatusComplete || w == nil || !w.Kept || w.Branch == "" {
			continue
		}
		in := &Integration{Branch: into}
		jb.res.Integration = in
		if ctx.Err() != nil {
			in.Error = "not integrated: the run was interrupted"
		} else if _, err := r.s.Worktrees.Advance(ctx, r.workdir, into, r.base, w.Branch); err != nil {
			var c *worktrees.Conflict
			if errors.As(err, &c) {
				in.Conflict = c.Paths
			}
			in.Error = err.Error()
		} else {
			in.Merged = true
		}
		reason := "merged " + w.Branch + " into " + into
		if !in.Merged {
			reason = in.Error
		}
		r.emit(Event{Type: EventIntegrated, Job: jb.ID, Reason: reason, Provider: jb.Task.Provider})
	}
}

// definition is a digest of what job j is: its provider, mode, task (the
// task file's content), dependencies, write set, worktree and sandbox. A
// job whose definition changed since it completed is not complete any
// more. A task file that cannot be read makes it "": the run says why.
func definition(j Job) string {
	task := j.Task.Prompt
	if j.Task.TaskFile != "" {
		data, err := os.ReadFile(j.Task.TaskFile)
		if err != nil {
			return ""
		}
		task = string(data)
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode([]any{j.Task.Provider, j.Task.Mode, task, j.Deps, j.WriteSet, j.Worktree, j.Task.Sandbox})
	return hex.EncodeToString(h.Sum(nil)[:12])
}
