// Package worktree creates per-job git worktrees and keeps an inventory of which run owns which.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Entry is one worktree in the inventory.
type Entry struct {
	Name   string `json:"name"`   // unique; also the branch suffix and directory name
	Repo   string `json:"repo"`   // the repository's top-level directory
	Path   string `json:"path"`   // the worktree directory
	Branch string `json:"branch"` // "pilot/<name>"
	Base   string `json:"base"`   // the commit it was created from (full sha)
	RunID  string `json:"run_id,omitempty"`
	// OwnerPID and OwnerStart identify the pilot process that created the
	// worktree; OwnerStart is that process's start time (field 22 of
	// /proc/PID/stat), so a reused pid is not mistaken for the owner.
	OwnerPID   int       `json:"owner_pid"`
	OwnerStart uint64    `json:"owner_start"`
	Created    time.Time `json:"created"`
	State      string    `json:"state"` // StateActive, StateKept or StateRemoved
	Changed    bool      `json:"changed,omitempty"`
}

// The states of an Entry.
const (
	StateActive  = "active"  // its run is going on (or its owner died before Finish)
	StateKept    = "kept"    // its run is over and left changes; worktree and branch are kept
	StateRemoved = "removed" // its run is over and left no changes; worktree and branch are gone
)

// Errors of CheckRepo and Create, matched with errors.Is.
var (
	ErrNotRepo   = errors.New("not a git repository")
	ErrNoCommits = errors.New("no commits")
	ErrExists    = errors.New("already exists")
	ErrBadName   = errors.New("invalid worktree name")
)

// Manager creates worktrees under Dir and records them in the inventory file
// Inventory (JSON). Both are required. A Manager is safe for concurrent use
// by goroutines of one process and by several pilot processes on one machine
// sharing the inventory: every read-modify-write of the inventory holds an
// advisory lock (flock on "<Inventory>.lock", which is never removed), and
// the inventory is replaced atomically, so List needs no lock. Only Prune
// holds the lock while it runs git; the others hold it to read and write the
// file.
//
// An entry stays in the inventory after Finish, as "kept" or "removed",
// until Prune drops it (a removed one, or one whose directory is gone).
// Finish and Prune act only on entries whose path is Dir/<name> and whose
// branch is pilot/<name>, so an edited inventory cannot make them remove
// another worktree or branch.
type Manager struct {
	Dir       string
	Inventory string
}

// maxName bounds a name so that the directory and the branch's ref file stay
// within file name limits.
const maxName = 200

// CheckRepo returns the top-level directory of the git repository holding
// dir ("" means the current directory). Its errors say what is wrong and how
// to fix it: dir is not a git repository (ErrNotRepo), or the repository has
// no commit yet to start a worktree from (ErrNoCommits).
func CheckRepo(ctx context.Context, dir string) (string, error) {
	top, _, err := checkRepo(ctx, dir)
	return top, err
}

// checkRepo returns the top-level directory of the repository holding dir
// and the commit its HEAD names.
func checkRepo(ctx context.Context, dir string) (top, head string, err error) {
	if dir == "" {
		dir = "."
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("workdir %s does not exist: worktree jobs need a git repository there", dir)
	}
	if err != nil {
		return "", "", fmt.Errorf("workdir %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("workdir %s is not a directory: worktree jobs need a git repository", dir)
	}
	out, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return "", "", fmt.Errorf("workdir %s is %w: worktree jobs need one (run git init there, or drop \"worktree\": true)", dir, ErrNotRepo)
		}
		return "", "", fmt.Errorf("workdir %s: %w", dir, err)
	}
	top = strings.TrimSuffix(out, "\n")
	if top == "" {
		return "", "", fmt.Errorf("workdir %s is inside a git directory, not a work tree: worktree jobs need a work tree", dir)
	}
	head, ok, err := revParse(ctx, top, "HEAD")
	if err != nil {
		return "", "", fmt.Errorf("workdir %s: %w", dir, err)
	}
	if !ok {
		return "", "", fmt.Errorf("workdir %s is in a git repository (%s) with %w: a worktree needs a commit to start from (commit something first, e.g. git commit --allow-empty -m init)", dir, top, ErrNoCommits)
	}
	return top, head, nil
}

// revParse returns the commit rev names in the repository at dir, and false
// when rev does not exist.
func revParse(ctx context.Context, dir, rev string) (string, bool, error) {
	out, err := git(ctx, dir, "rev-parse", "-q", "--verify", rev+"^{commit}")
	var ge *GitError
	var ee *exec.ExitError
	if errors.As(err, &ge) && ge.Stderr == "" && errors.As(err, &ee) && ee.ExitCode() == 1 {
		return "", false, nil // -q: a missing rev fails silently
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSuffix(out, "\n"), true, nil
}

// validName reports whether name can be a directory name and a branch
// component: letters, digits, '.', '_' and '-', starting with a letter or a
// digit, and none of the sequences git refuses in a ref ("..", a trailing
// ".lock" or '.').
func validName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: it %s; use only letters, digits, '.', '_' and '-', starting with a letter or digit", ErrBadName, name, why)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return bad(fmt.Sprintf("contains %q", r))
		}
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > maxName:
		return bad(fmt.Sprintf("is longer than %d bytes", maxName))
	case name[0] == '.' || name[0] == '-' || name[0] == '_':
		return bad(fmt.Sprintf("starts with %q", name[0]))
	case strings.Contains(name, ".."):
		return bad(`contains ".."`)
	case strings.HasSuffix(name, ".lock"), strings.HasSuffix(name, "."):
		return bad(`ends with ".lock" or "."`)
	}
	return nil
}

// inventoryPath checks the Manager's configuration and returns the
// inventory's absolute path.
func (m *Manager) inventoryPath() (string, error) {
	if m.Dir == "" {
		return "", errors.New("Manager.Dir is empty: set it to the directory that holds the worktrees")
	}
	if m.Inventory == "" {
		return "", errors.New("Manager.Inventory is empty: set it to the inventory file's path")
	}
	return filepath.Abs(m.Inventory)
}

// dir creates Dir if need be and returns it absolute, with symlinks resolved
// as git reports paths.
func (m *Manager) dir() (string, error) {
	if _, err := m.inventoryPath(); err != nil {
		return "", err
	}
	dir, err := filepath.Abs(m.Dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the worktrees directory: %w", err)
	}
	return filepath.EvalSymlinks(dir)
}

// Create makes a new worktree of the repository holding repoDir, at
// Dir/<name>, on a new branch pilot/<name> starting at the repository's
// HEAD, and records it as active, owned by this process. name must be a
// valid branch component (see ErrBadName's message). An existing entry of
// that name (other than a removed one), path or branch is an ErrExists
// error: pilot never reuses or overwrites a worktree or a branch.
//
// The entry is recorded before git creates anything, so a crash leaves an
// entry Prune settles, never an unrecorded worktree. When git fails, or ctx
// ends, Create removes what it made and the entry, and returns the error.
func (m *Manager) Create(ctx context.Context, repoDir, name string) (*Entry, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	dir, err := m.dir()
	if err != nil {
		return nil, err
	}
	me, err := self()
	if err != nil {
		return nil, err
	}
	top, base, err := checkRepo(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	e := Entry{
		Name:       name,
		Repo:       top,
		Path:       filepath.Join(dir, name),
		Branch:     "pilot/" + name,
		Base:       base,
		OwnerPID:   me.pid,
		OwnerStart: me.start,
		State:      StateActive,
	}
	err = m.update(func(inv *inventory) error {
		if i := inv.find(name); i >= 0 {
			if old := inv.Entries[i]; old.State != StateRemoved {
				return fmt.Errorf("worktree %s %w in the inventory %s (state %s, at %s): pick another name", name, ErrExists, m.Inventory, old.State, old.Path)
			}
			inv.Entries = slices.Delete(inv.Entries, i, i+1)
		}
		if _, err := os.Lstat(e.Path); err == nil {
			return fmt.Errorf("path %s %w: pilot never reuses or overwrites a directory; pick another name, or remove it", e.Path, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		e.Created = time.Now().UTC()
		inv.Entries = append(inv.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := m.add(ctx, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// add creates e's branch and worktree; on failure it undoes what it did and
// drops e from the inventory.
func (m *Manager) add(ctx context.Context, e *Entry) (err error) {
	ref := "refs/heads/" + e.Branch
	branchMade := false
	defer func() {
		if err == nil {
			return
		}
		// Clean up even when ctx is done: that is a common reason to be here.
		ctx := context.WithoutCancel(ctx)
		var errs []error
		if listed, lerr := registered(ctx, e.Repo, e.Path); lerr != nil {
			errs = append(errs, lerr)
		} else if listed {
			// The path was free when the name was reserved and the
			// branch is ours: nothing of anyone else's is in it.
			if _, rerr := gitWorktree(ctx, e.Repo, "remove", "--force", "--force", e.Path); rerr != nil {
				errs = append(errs, rerr)
			}
		}
		if branchMade {
			if derr := deleteBranchAt(ctx, e.Repo, e.Branch, e.Base); derr != nil {
				errs = append(errs, derr)
			}
		}
		if uerr := m.update(func(inv *inventory) error {
			if i := inv.find(e.Name); i >= 0 {
				inv.Entries = slices.Delete(inv.Entries, i, i+1)
			}
			return nil
		}); uerr != nil {
			errs = append(errs, uerr)
		}
		if len(errs) > 0 {
			err = fmt.Errorf("%w (cleaning up also failed: %w)", err, errors.Join(errs...))
		}
	}()
	// An empty old value makes update-ref fail if the branch exists, so an
	// existing branch is never taken over, even one made a moment ago.
	if _, err := git(ctx, e.Repo, "update-ref", "-m", "pilot: worktree "+e.Name, ref, e.Base, ""); err != nil {
		if _, exists, _ := revParse(ctx, e.Repo, ref); exists {
			return fmt.Errorf("branch %s %w in %s: pilot never reuses a branch; pick another name, or delete the branch", e.Branch, ErrExists, e.Repo)
		}
		return err
	}
	branchMade = true
	if _, err := gitWorktree(ctx, e.Repo, "add", e.Path, e.Branch); err != nil {
		return err
	}
	return nil
}

// registered reports whether git lists path as a worktree of repo.
func registered(ctx context.Context, repo, path string) (bool, error) {
	out, err := gitWorktree(ctx, repo, "list", "--porcelain")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(out, "\n") {
		p, ok := strings.CutPrefix(line, "worktree ")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(p); err == nil {
			p = uq // a path with unusual characters is C-quoted
		}
		if p == path {
			return true, nil
		}
	}
	return false, nil
}

// Finish ends e's use by the run runID. If the worktree has no changes
// compared with its base (no uncommitted changes, no untracked files that
// .gitignore does not ignore, HEAD still at the base and no new commits on
// its branch), it removes the worktree (git worktree remove, without
// --force) and deletes the branch, and records state "removed"; otherwise it
// keeps both and records state "kept" with Changed true. It updates *e to
// match and returns whether it kept the worktree.
//
// A worktree whose directory was deleted by hand counts as changed only if
// its branch moved. On error nothing is deleted that was not clean, the
// entry stays as it was, and kept is true unless the worktree itself was
// already removed; Prune settles the entry once this process has exited.
func (m *Manager) Finish(ctx context.Context, e *Entry, runID string) (kept bool, err error) {
	if e == nil {
		return false, errors.New("Finish: the entry is nil")
	}
	dir, err := m.dir()
	if err != nil {
		return true, err
	}
	if err := owns(dir, *e); err != nil {
		return true, err
	}
	changed, err := changes(ctx, *e)
	if err != nil {
		return true, fmt.Errorf("worktree %s: %w", e.Name, err)
	}
	if changed {
		return true, m.record(e, runID, StateKept, true)
	}
	if removed, err := remove(ctx, *e); err != nil {
		return !removed, fmt.Errorf("worktree %s: %w", e.Name, err)
	}
	return false, m.record(e, runID, StateRemoved, false)
}

// owns reports an error unless e is a worktree a Manager with the resolved
// Dir dir would have made.
func owns(dir string, e Entry) error {
	if validName(e.Name) != nil || e.Path != filepath.Join(dir, e.Name) || e.Branch != "pilot/"+e.Name {
		return fmt.Errorf("worktree entry %q (path %s, branch %s) was not made by this Manager (worktrees in %s): left alone", e.Name, e.Path, e.Branch, dir)
	}
	return nil
}

// record sets e's run, state and Changed, in *e and in the inventory. A
// kept entry missing from the inventory is added back.
func (m *Manager) record(e *Entry, runID, state string, changed bool) error {
	return m.update(func(inv *inventory) error {
		e.RunID, e.State, e.Changed = runID, state, changed
		i := inv.find(e.Name)
		switch {
		case i >= 0:
			inv.Entries[i].RunID, inv.Entries[i].State, inv.Entries[i].Changed = runID, state, changed
		case state == StateKept:
			inv.Entries = append(inv.Entries, *e)
		}
		return nil
	})
}

// changes reports whether e's worktree or branch differs from its base.
func changes(ctx context.Context, e Entry) (bool, error) {
	tip, ok, err := revParse(ctx, e.Repo, "refs/heads/"+e.Branch)
	if err != nil {
		return false, err
	}
	if ok && tip != e.Base {
		return true, nil
	}
	if _, err := os.Lstat(e.Path); errors.Is(err, fs.ErrNotExist) {
		return false, nil // only the branch could hold changes
	} else if err != nil {
		return false, err
	}
	// Make sure git sees e.Path as a worktree and not as a plain
	// directory inside some other repository.
	out, err := git(ctx, e.Path, "rev-parse", "--show-toplevel")
	if err != nil {
		return false, err
	}
	if top := strings.TrimSuffix(out, "\n"); top != e.Path {
		return false, fmt.Errorf("%s is no longer a git worktree (git finds the work tree %s there): look at it and remove it by hand", e.Path, top)
	}
	head, ok, err := revParse(ctx, e.Path, "HEAD")
	if err != nil {
		return false, err
	}
	if !ok || head != e.Base {
		return true, nil // an orphan branch, or commits made elsewhere
	}
	out, err = git(ctx, e.Path, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) != "", nil
}

// remove removes e's worktree and its branch if the branch is still at the
// base. It reports whether the worktree is gone. git worktree remove without
// --force refuses a worktree with changes, so one made after changes looked
// is not lost.
func remove(ctx context.Context, e Entry) (bool, error) {
	if _, err := os.Lstat(e.Path); err == nil {
		if _, err := gitWorktree(ctx, e.Repo, "remove", e.Path); err != nil {
			return false, err
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		if _, err := gitWorktree(ctx, e.Repo, "prune"); err != nil {
			return true, err
		}
	} else {
		return false, err
	}
	return true, deleteBranchAt(ctx, e.Repo, e.Branch, e.Base)
}

// deleteBranchAt deletes branch if it points at base; a branch that moved
// holds work and stays. update-ref checks the old value itself, so a commit
// made meanwhile is not lost either.
func deleteBranchAt(ctx context.Context, repo, branch, base string) error {
	ref := "refs/heads/" + branch
	tip, ok, err := revParse(ctx, repo, ref)
	if err != nil || !ok || tip != base {
		return err
	}
	_, err = git(ctx, repo, "update-ref", "-m", "pilot: worktree done", "-d", ref, base)
	return err
}

// List returns the inventory's entries, oldest first.
func (m *Manager) List() ([]Entry, error) {
	path, err := m.inventoryPath()
	if err != nil {
		return nil, err
	}
	inv, err := readInventory(path)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(inv.Entries, func(a, b Entry) int { return a.Created.Compare(b.Created) })
	return inv.Entries, nil
}

// Prune removes the worktrees whose runs are over and which are clean, and
// returns them (with State "removed"). Exactly these are removed: entries in
// state "active" whose owner process is gone (no process with that pid, or
// one with another start time) and which have no changes (as Finish judges
// them). An "active" entry of a dead owner that has changes becomes "kept".
//
// A worktree in use is never touched: an "active" entry whose owner is alive
// is left alone entirely, even when its directory is missing (it may be
// being created), and so is a "kept" one, which has changes. This is what
// keeps Prune from deleting worktrees still in use, the failure users of
// similar tools report.
//
// Entries whose directory no longer exists, and "removed" ones, are dropped
// from the inventory after git worktree prune in their repository; their
// branches are deleted if still at their base. Prune goes on past errors and
// returns them joined; the entries concerned stay.
func (m *Manager) Prune(ctx context.Context) ([]Entry, error) {
	dir, err := m.dir()
	if err != nil {
		return nil, err
	}
	path, err := m.inventoryPath()
	if err != nil {
		return nil, err
	}
	// Prune holds the lock throughout so two Prunes never race on one
	// worktree; Create and Finish only touch entries of live owners.
	l, err := lock(path)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	inv, err := readInventory(path)
	if err != nil {
		return nil, err
	}
	var removed, stay, dropped []Entry
	var errs []error
	for _, e := range inv.Entries {
		if e.State == StateActive && ownerAlive(e.OwnerPID, e.OwnerStart) {
			stay = append(stay, e)
			continue
		}
		if err := owns(dir, e); err != nil {
			errs = append(errs, err)
			stay = append(stay, e)
			continue
		}
		if e.State == StateRemoved {
			dropped = append(dropped, e)
			continue
		}
		if _, err := os.Lstat(e.Path); errors.Is(err, fs.ErrNotExist) {
			dropped = append(dropped, e)
			continue
		}
		if e.State != StateActive {
			stay = append(stay, e)
			continue
		}
		changed, err := changes(ctx, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", e.Name, err))
			stay = append(stay, e)
			continue
		}
		if changed {
			e.State, e.Changed = StateKept, true
			stay = append(stay, e)
			continue
		}
		if gone, err := remove(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", e.Name, err))
			if !gone {
				stay = append(stay, e)
				continue
			}
		}
		e.State = StateRemoved
		removed = append(removed, e)
	}
	pruned := map[string]bool{}
	for _, e := range dropped {
		if _, err := os.Stat(e.Repo); err != nil {
			continue // the repository is gone too
		}
		if !pruned[e.Repo] {
			pruned[e.Repo] = true
			if _, err := gitWorktree(ctx, e.Repo, "prune"); err != nil {
				errs = append(errs, err)
			}
		}
		if err := deleteBranchAt(ctx, e.Repo, e.Branch, e.Base); err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", e.Name, err))
		}
	}
	inv.Entries = stay
	if err := writeInventory(path, inv); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}
