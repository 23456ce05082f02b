package worktrees

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/internal/worktree"
)

// New returns the Worktrees of a Fanout as the git CLI makes them: git
// worktrees in <dir>/<name>, on branches pilot/<name>, with their inventory
// in <runDir>/.worktrees/inventory.json ("" means pilot.DefaultRunDir()).
// Without dir, they go beside each repository's main work tree, in
// <repo>.pilot-worktrees: out of the work tree, and out of the state
// directory where nobody looks for work to review. A name's characters
// other than ASCII letters, digits, '-', '_' and '.' become '-';
// directories are made with mode 0700.
//
// CheckRepo also makes the worktrees directory, so that a problem with it
// shows before any job runs. Finish removes a worktree the job left as it
// found it, with its branch; otherwise it commits on the branch everything
// the job left uncommitted (untracked files included, .gitignore
// respected), as "pilot <pilot@localhost>" with the message "pilot: job
// <wt.Job>, run <runID>", without the repository's hooks, and keeps both,
// so that git log, git diff and git merge see the work.
func New(runDir, dir string) *Git {
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	m := &worktree.Manager{Dir: dir, Inventory: filepath.Join(runDir, ".worktrees", "inventory.json")}
	return &Git{m: m, entries: map[string]*worktree.Entry{}}
}

// Git is the worktrees New makes: a pilot.Worktrees for a Fanout, and for
// a schedule.Scheduler, which also starts a job at its dependencies' work
// (CreateAt, Merge) and merges finished work into a branch (Advance).
type Git struct {
	m       *worktree.Manager
	mu      sync.Mutex
	entries map[string]*worktree.Entry
}

func (g *Git) CheckRepo(ctx context.Context, dir string) error {
	_, err := g.m.Prepare(ctx, dir)
	return err
}

// Uncommitted counts the files with uncommitted changes (untracked ones
// too) in the work tree of the repository holding dir: a job's worktree
// starts from HEAD and sees none of them.
func (g *Git) Uncommitted(ctx context.Context, dir string) (int, error) {
	return worktree.Uncommitted(ctx, dir)
}

func (g *Git) Create(ctx context.Context, dir, name string) (pilot.WorktreeInfo, error) {
	return g.CreateAt(ctx, dir, name, "")
}

// CreateAt is Create with the branch starting at commit base (as Merge
// returns it) rather than HEAD; "" means HEAD. The info's Base is that
// commit, so that git diff Base Branch is still the job's own work.
func (g *Git) CreateAt(ctx context.Context, dir, name, base string) (pilot.WorktreeInfo, error) {
	e, err := g.m.CreateAt(ctx, dir, text.SafeName(name, '-'), base)
	if err != nil {
		return pilot.WorktreeInfo{}, err
	}
	g.mu.Lock()
	g.entries[e.Name] = e
	g.mu.Unlock()
	return pilot.WorktreeInfo{Name: e.Name, Path: e.Path, Branch: e.Branch, Repo: e.Repo, Base: e.Base}, nil
}

func (g *Git) Finish(ctx context.Context, wt pilot.WorktreeInfo, runID string) (pilot.WorktreeInfo, error) {
	g.mu.Lock()
	e := g.entries[wt.Name]
	delete(g.entries, wt.Name)
	g.mu.Unlock()
	if e == nil {
		return wt, fmt.Errorf("pilot: worktree %s was not created here", wt.Name)
	}
	kept, err := g.m.Finish(ctx, e, worktree.Run{ID: runID, Job: wt.Job, TaskFile: wt.TaskFile})
	wt.Kept, wt.Commit = kept, e.Commit
	return wt, err
}

// Salvage takes over worktree name, which a pilot that died while its job
// ran left active, for the job's next run: what the dead run changed is
// committed on its branch (as Finish commits, with the message "pilot: job
// <job>"), and the result is Kept with that Branch, for the next run to
// start from; a worktree it left clean is removed (not Kept). A worktree
// whose owner is alive, or not known dead (of another pid namespace or
// host), is left alone: an error says so.
func (g *Git) Salvage(ctx context.Context, name, job string) (pilot.WorktreeInfo, error) {
	e, kept, err := g.m.Salvage(ctx, name, worktree.Run{Job: job})
	info := pilot.WorktreeInfo{Name: e.Name, Path: e.Path, Branch: e.Branch, Repo: e.Repo, Base: e.Base, Kept: kept, Commit: e.Commit}
	if err != nil {
		return info, fmt.Errorf("pilot: %w", err)
	}
	return info, nil
}

// Merge returns a commit of onto (a commit or ref of the repository holding
// dir) with each of branches merged in, in order, without touching any work
// tree, index or branch: git merge-tree computes each merge. A branch onto
// holds already adds nothing. A conflict is a *Conflict.
func (g *Git) Merge(ctx context.Context, dir, onto string, branches []string) (string, error) {
	return worktree.Merge(ctx, dir, onto, branches)
}

// Advance merges branch from into branch into (created at base when
// missing) as Merge does, and moves into by a compare-and-swap of its ref,
// returning its new tip. A conflict (a *Conflict) leaves into as it was. It
// refuses an into that is checked out in any work tree.
func (g *Git) Advance(ctx context.Context, dir, into, base, from string) (string, error) {
	return worktree.Advance(ctx, dir, into, base, from)
}
