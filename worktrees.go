package pilot

import (
	"context"
	"errors"
)

// DefaultWorktrees returns the Worktrees a Fanout uses when it has none.
func DefaultWorktrees(runDir string) Worktrees { return noWorktrees{} }

type noWorktrees struct{}

var errNoWorktrees = errors.New("pilot: worktree jobs are not supported yet")

func (noWorktrees) CheckRepo(context.Context, string) error { return errNoWorktrees }
func (noWorktrees) Create(context.Context, string, string) (WorktreeInfo, error) {
	return WorktreeInfo{}, errNoWorktrees
}
func (noWorktrees) Finish(_ context.Context, wt WorktreeInfo, _ string) (WorktreeInfo, error) {
	return wt, errNoWorktrees
}
