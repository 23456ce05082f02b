package pilot

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/internal/worktree"
)

// DefaultWorktrees returns the Worktrees a Fanout uses when it has none:
// git worktrees in <worktreeDir>/<name>, on branches pilot/<name>, made and removed
// with the git CLI, with their inventory in
// <runDir>/.worktrees/inventory.json; a name's characters other than ASCII
// letters, digits, '-', '_' and '.' become '-'. Without worktreeDir, a
// directory beside each repository's main work tree: <repo>.pilot-worktrees
// for the repository in <repo> (out of the repository's own work tree, and
// out of the state directory where a person would not look for work to
// review). Directories are made with mode 0700. The worktrees package lists,
// diffs, removes and prunes them.
//
// CheckRepo also makes the worktrees directory, so that a problem with it
// shows before any job runs. Finish removes a worktree the job left as it
// found it, with its branch; otherwise it commits on the branch everything
// the job left uncommitted (untracked files included, .gitignore
// respected), as "pilot <pilot@localhost>" with the message "pilot: job
// <wt.Job>, run <runID>", without the repository's hooks, and keeps both,
// so that git log, git diff and git merge see the work.
//
// An empty runDir means DefaultRunDir(). worktreeDir, optional, is where
// the worktrees go; without it (or when it is ""), the default above.
func DefaultWorktrees(runDir string, worktreeDir ...string) Worktrees {
	if runDir == "" {
		runDir = DefaultRunDir()
	}
	dir := ""
	if len(worktreeDir) > 0 {
		dir = worktreeDir[0]
	}
	m := &worktree.Manager{Dir: dir, Inventory: filepath.Join(runDir, ".worktrees", "inventory.json")}
	return &gitWorktrees{m: m, entries: map[string]*worktree.Entry{}}
}

type gitWorktrees struct {
	m       *worktree.Manager
	mu      sync.Mutex
	entries map[string]*worktree.Entry
}

func (g *gitWorktrees) CheckRepo(ctx context.Context, dir string) error {
	_, err := g.m.Prepare(ctx, dir)
	return err
}

func (g *gitWorktrees) Create(ctx context.Context, dir, name string) (WorktreeInfo, error) {
	e, err := g.m.Create(ctx, dir, text.SafeName(name, '-'))
	if err != nil {
		return WorktreeInfo{}, err
	}
	g.mu.Lock()
	g.entries[e.Name] = e
	g.mu.Unlock()
	return WorktreeInfo{Name: e.Name, Path: e.Path, Branch: e.Branch, Repo: e.Repo, Base: e.Base}, nil
}

func (g *gitWorktrees) Finish(ctx context.Context, wt WorktreeInfo, runID string) (WorktreeInfo, error) {
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
