// Package worktrees is pilot's git worktrees layer: it makes the worktrees
// of a Fanout's jobs and of a schedule's worktree jobs ([New]), merges
// their work without touching any checkout, and lists, diffs, removes and
// prunes them through the inventory it keeps of them in the run directory.
package worktrees

import (
	"context"
	"io"
	"path/filepath"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/worktree"
)

// Entry is one worktree in the inventory pilot keeps of the worktrees it
// made: which repository, which branch and base commit, which job, task
// file and run, which process owns it, whether it was kept or removed, and
// the commit pilot made of the job's changes.
type Entry = worktree.Entry

// StateMissing is the state List and Prune give an entry whose directory
// was removed by hand (no live run owns it): Prune drops it, Remove
// removes its branch (when merged, or forced).
const StateMissing = worktree.StateMissing

// A Conflict is a merge that needs a person (Git.Merge, Git.Advance): the
// branch, what it was merged onto, and the paths both sides changed. Find
// it with errors.As.
type Conflict = worktree.Conflict

// Errors of Diff and Remove, matched with errors.Is: no worktree has the
// name given; the worktree's run is going on; the worktree holds work found
// nowhere else.
var (
	ErrNotFound = worktree.ErrNotFound
	ErrInUse    = worktree.ErrInUse
	ErrUnmerged = worktree.ErrUnmerged
)

// manager is the worktree manager of a run directory, as New makes it;
// its entries' worktrees may be in any directory.
func manager(runDir string) *worktree.Manager {
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	return &worktree.Manager{Inventory: filepath.Join(runDir, ".worktrees", "inventory.json")}
}

// List returns the inventory of the worktrees made for fanouts
// with run directory runDir ("" means pilot.DefaultRunDir()), oldest first.
func List(runDir string) ([]Entry, error) {
	return manager(runDir).List()
}

// Prune removes the worktrees whose runs are over and which hold no work
// found nowhere else, with their branches, and returns them, then the
// entries it dropped because their directory was gone (StateMissing). A worktree
// whose owning pilot still runs is never touched; one with uncommitted
// changes is kept, and so is one whose branch holds commits that no other
// branch, remote-tracking branch or tag holds (a kept worktree goes once
// its branch is merged).
func Prune(ctx context.Context, runDir string) ([]Entry, error) {
	return manager(runDir).Prune(ctx)
}

// Find returns the inventory's entry for name: a worktree's name, its
// branch (pilot/<name>), or the start of exactly one worktree's name.
func Find(runDir, name string) (Entry, error) {
	return manager(runDir).Lookup(name)
}

// Diff writes to w the diff of the branch of the worktree named name (see
// Find) against the commit it started from, as git diff prints it, and
// returns the worktree's entry.
func Diff(ctx context.Context, runDir, name string, w io.Writer) (Entry, error) {
	e, err := Find(runDir, name)
	if err != nil {
		return e, err
	}
	return e, worktree.Diff(ctx, e, w)
}

// Remove removes the worktree named name (see Find) and its branch, and
// drops it from the inventory. It refuses a worktree whose run is going on
// (ErrInUse), and, unless force is set, one that holds work found nowhere
// else (ErrUnmerged: uncommitted changes, or commits of its branch on no
// other branch, remote-tracking branch or tag); force removes it and its
// branch with that work.
func Remove(ctx context.Context, runDir, name string, force bool) (Entry, error) {
	return manager(runDir).Remove(ctx, name, force)
}
