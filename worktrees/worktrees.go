// Package worktrees lists and prunes the git worktrees pilot's Fanout made
// for its jobs ([pilot.DefaultWorktrees]).
package worktrees

import (
	"context"
	"path/filepath"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/worktree"
)

// Entry is one worktree in the inventory pilot keeps of the worktrees it
// made: which repository, which branch, which run and process own it, and
// whether it was kept or removed.
type Entry = worktree.Entry

// manager is the worktree manager of a run directory, as
// pilot.DefaultWorktrees makes it.
func manager(runDir string) *worktree.Manager {
	dir := filepath.Join(runDir, ".worktrees")
	return &worktree.Manager{Dir: dir, Inventory: filepath.Join(dir, "inventory.json")}
}

// List returns the inventory of the worktrees made for fanouts
// with run directory runDir ("" means pilot.DefaultRunDir()), oldest first.
func List(runDir string) ([]Entry, error) {
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	return manager(runDir).List()
}

// Prune removes the worktrees whose runs are over and which are
// clean, and returns them. A worktree whose owning pilot still runs is
// never touched, and one with changes is kept.
func Prune(ctx context.Context, runDir string) ([]Entry, error) {
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	return manager(runDir).Prune(ctx)
}
