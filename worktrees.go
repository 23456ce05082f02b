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
// worktrees in <runDir>/.worktrees/<name>, on branches pilot/<name>, with
// their inventory in <runDir>/.worktrees/inventory.json, created and
// removed with the git CLI; a name's characters other than ASCII letters,
// digits, '-', '_' and '.' become '-'. The worktrees package lists and
// prunes them.
//
// An empty runDir means DefaultRunDir().
func DefaultWorktrees(runDir string) Worktrees {
	if runDir == "" {
		runDir = DefaultRunDir()
	}
	return &gitWorktrees{m: worktreeManager(runDir), entries: map[string]*worktree.Entry{}}
}

func worktreeManager(runDir string) *worktree.Manager {
	dir := filepath.Join(runDir, ".worktrees")
	return &worktree.Manager{Dir: dir, Inventory: filepath.Join(dir, "inventory.json")}
}

type gitWorktrees struct {
	m       *worktree.Manager
	mu      sync.Mutex
	entries map[string]*worktree.Entry
}

func (g *gitWorktrees) CheckRepo(ctx context.Context, dir string) error {
	_, err := worktree.CheckRepo(ctx, dir)
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
	return WorktreeInfo{Name: e.Name, Path: e.Path, Branch: e.Branch}, nil
}

func (g *gitWorktrees) Finish(ctx context.Context, wt WorktreeInfo, runID string) (WorktreeInfo, error) {
	g.mu.Lock()
	e := g.entries[wt.Name]
	delete(g.entries, wt.Name)
	g.mu.Unlock()
	if e == nil {
		return wt, fmt.Errorf("pilot: worktree %s was not created here", wt.Name)
	}
	kept, err := g.m.Finish(ctx, e, runID)
	wt.Kept = kept
	return wt, err
}
