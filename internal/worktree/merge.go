package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// A Conflict is a merge git cannot make without a person: Branch merged
// onto Onto (a branch or commit) with the branches Merged before it changes
// Paths on both sides.
type Conflict struct {
	Branch string
	Onto   string
	Merged []string
	Paths  []string
}

func (c *Conflict) Error() string {
	onto := c.Onto
	if len(c.Merged) > 0 {
		onto += " with " + strings.Join(c.Merged, ", ")
	}
	return fmt.Sprintf("merging %s onto %s: conflict in %s", c.Branch, onto, strings.Join(c.Paths, ", "))
}

// commitEnv is the identity of the commits pilot makes.
var commitEnv = []string{
	"GIT_AUTHOR_NAME=" + CommitName, "GIT_AUTHOR_EMAIL=" + CommitEmail,
	"GIT_COMMITTER_NAME=" + CommitName, "GIT_COMMITTER_EMAIL=" + CommitEmail,
}

// Merge returns a commit of onto (a commit or ref of the repository holding
// dir) with each of branches merged in, in order. It touches no work tree,
// index or ref: git merge-tree computes each merge and git commit-tree
// records it, so a conflict leaves nothing half merged anywhere. A branch
// onto already holds adds nothing, and one that holds onto is taken as it
// is (a fast-forward); with no branch to add it returns onto's commit. A
// conflict is a *Conflict naming the branch, the ones merged before it, and
// the paths.
func Merge(ctx context.Context, dir, onto string, branches []string) (string, error) {
	cur, ok, err := revParse(ctx, dir, onto)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("merging onto %s: no such commit in %s", onto, dir)
	}
	var merged []string
	for _, b := range branches {
		next, err := mergeOne(ctx, dir, cur, b)
		if err != nil {
			var c *Conflict
			if errors.As(err, &c) {
				c.Onto, c.Merged = onto, merged
			}
			return "", err
		}
		if next != cur {
			merged = append(merged, b)
		}
		cur = next
	}
	return cur, nil
}

// mergeOne returns the commit of cur with branch merged in.
func mergeOne(ctx context.Context, dir, cur, branch string) (string, error) {
	tip, ok, err := revParse(ctx, dir, branch)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("merging %s: no such branch in %s", branch, dir)
	}
	if holds, err := isAncestor(ctx, dir, tip, cur); err != nil || holds {
		return cur, err
	}
	if ff, err := isAncestor(ctx, dir, cur, tip); err != nil || ff {
		return tip, err
	}
	out, err := git(ctx, dir, "merge-tree", "--write-tree", "--name-only", "--no-messages", cur, tip)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			var ge *GitError
			if errors.As(err, &ge) && strings.Contains(ge.Stderr, "write-tree") {
				err = fmt.Errorf("%w: merging dependencies' work needs git 2.38 or newer (git merge-tree --write-tree)", err)
			}
			return "", err
		}
		return "", &Conflict{Branch: branch, Paths: conflictPaths(out)}
	}
	tree, _, _ := strings.Cut(out, "\n")
	out, err = gitEnvArgs(ctx, dir, commitEnv, "commit-tree", tree, "-p", cur, "-p", tip, "-m", "pilot: merge "+branch)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// conflictPaths reads the conflicted file names git merge-tree --name-only
// prints after the tree's id, up to the blank line that ends them.
func conflictPaths(out string) []string {
	lines := strings.Split(out, "\n")
	seen := map[string]bool{}
	var paths []string
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		if !seen[l] {
			seen[l] = true
			paths = append(paths, l)
		}
	}
	sort.Strings(paths)
	return paths
}

// isAncestor reports whether commit a is an ancestor of (or is) commit b.
func isAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := git(ctx, dir, "merge-base", "--is-ancestor", a, b)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// Advance merges branch from into branch into (of the repository holding
// dir), creating into at base when it does not exist yet, and returns into's
// new tip. The merge is Merge's, in no work tree, and into moves by a
// compare-and-swap of its ref: a change to it meanwhile fails the move
// rather than being lost, and a conflict (a *Conflict) leaves it as it was.
// It refuses an into checked out in any work tree of the repository, whose
// files would no longer match it.
func Advance(ctx context.Context, dir, into, base, from string) (string, error) {
	ref := "refs/heads/" + into
	if _, err := git(ctx, dir, "check-ref-format", ref); err != nil {
		return "", fmt.Errorf("integration branch %q is not a valid branch name", into)
	}
	if where, err := checkedOut(ctx, dir, ref); err != nil {
		return "", err
	} else if where != "" {
		return "", fmt.Errorf("integration branch %s is checked out in %s: pilot never moves a checked-out branch; name a branch that is not checked out (pilot creates it)", into, where)
	}
	old, exists, err := revParse(ctx, dir, ref)
	if err != nil {
		return "", err
	}
	onto := ref
	if !exists {
		onto = base
	}
	tip, err := Merge(ctx, dir, onto, []string{from})
	if err != nil {
		var c *Conflict
		if errors.As(err, &c) {
			c.Onto = into
		}
		return "", err
	}
	if exists && tip == old {
		return tip, nil
	}
	if _, err := git(ctx, dir, "update-ref", "-m", "pilot: integrate "+from, ref, tip, old); err != nil {
		return "", fmt.Errorf("moving %s: %w (it changed meanwhile; run again to merge onto its new tip)", into, err)
	}
	return tip, nil
}

// checkedOut is the work tree in which ref is checked out, or "".
func checkedOut(ctx context.Context, dir, ref string) (string, error) {
	out, err := git(ctx, dir, "worktree", "list", "--porcelain")
	if err != nil {
		return "", err
	}
	path := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "worktree "):
			path = strings.TrimPrefix(l, "worktree ")
		case l == "branch "+ref:
			if _, err := os.Stat(path); err == nil {
				return path, nil
			}
		}
	}
	return "", nil
}
