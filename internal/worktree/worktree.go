// Package worktree creates per-job git worktrees and keeps an inventory of which run owns which.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	OwnerPID   int    `json:"owner_pid"`
	OwnerStart uint64 `json:"owner_start"`
	// OwnerBoot, OwnerPidNamespace and OwnerHost are the boot, pid
	// namespace and host the owner ran in (procfs.Identity): an owner of
	// another namespace or host is not known dead, so its worktree is
	// never pruned from here; one of an earlier boot is dead. An entry
	// from before they were written has none.
	OwnerBoot         string    `json:"owner_boot_id,omitempty"`
	OwnerPidNamespace string    `json:"owner_pid_namespace,omitempty"`
	OwnerHost         string    `json:"owner_host,omitempty"`
	Created           time.Time `json:"created"`
	State             string    `json:"state"` // StateActive, StateKept or StateRemoved
	Changed           bool      `json:"changed,omitempty"`
	// Job and TaskFile say which job ran in the worktree (Run.Job and
	// Run.TaskFile), and Commit is the commit Finish made of what it
	// changed, on Branch; all three are set by Finish.
	Job      string `json:"job,omitempty"`
	TaskFile string `json:"task_file,omitempty"`
	Commit   string `json:"commit,omitempty"`
}

// Run says which run of which job Finish ends; its commit and the
// inventory name them.
type Run struct {
	ID       string // the run id
	Job      string // the job, as "fix-login.md (glm:code)"
	TaskFile string // the job's task file
}

// The identity of the commits Finish makes: pilot's own, so that a commit
// never passes for the user's and needs no user.name configured.
const (
	CommitName  = "pilot"
	CommitEmail = "pilot@localhost"
)

// DirSuffix ends the name of the directory beside a repository that holds
// its worktrees when Manager.Dir is empty (see BesideDir).
const DirSuffix = ".pilot-worktrees"

// The states of an Entry.
const (
	StateActive  = "active"  // its run is going on (or its owner died before Finish)
	StateKept    = "kept"    // its run is over and left changes; worktree and branch are kept
	StateRemoved = "removed" // its run is over and left no changes; worktree and branch are gone
	// StateMissing is what List and Prune say of an entry whose directory
	// is gone (removed by hand) while no live run owns it: Prune drops it
	// (deleting its branch unless that holds work), Remove removes its
	// branch. The inventory never stores it.
	StateMissing = "missing"
)

// Errors of CheckRepo, Create, Lookup and Remove, matched with errors.Is.
var (
	ErrNotRepo   = errors.New("not a git repository")
	ErrNoCommits = errors.New("no commits")
	ErrExists    = errors.New("already exists")
	ErrBadName   = errors.New("invalid worktree name")
	ErrNotFound  = errors.New("no such worktree")
	ErrInUse     = errors.New("in use")
	ErrUnmerged  = errors.New("holds work found nowhere else")
)

// Manager creates worktrees under Dir and records them in the inventory file
// Inventory (JSON). Inventory is required; an empty Dir means the directory
// BesideDir names for each repository. A Manager is safe for concurrent use
// by goroutines of one process and by several pilot processes on one machine
// sharing the inventory: every read-modify-write of the inventory holds an
// advisory lock (flock on "<Inventory>.lock", which is never removed), and
// the inventory is replaced atomically, so List needs no lock. Only Prune
// holds the lock while it runs git; the others hold it to read and write the
// file.
//
// An entry stays in the inventory after Finish, as "kept" or "removed",
// until Prune or Remove drops it. Finish, Prune and Remove act only on
// entries whose directory is named <name> (in Dir, when Dir is set) and
// whose branch is pilot/<name>, and remove a worktree only while it is
// checked out on that branch, so an edited inventory cannot make them
// remove another worktree or branch.
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
			return "", "", fmt.Errorf("workdir %s is %w: worktree jobs need one (give a workdir inside a git repository, or run git init there)", dir, ErrNotRepo)
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
	if m.Inventory == "" {
		return "", errors.New("Manager.Inventory is empty: set it to the inventory file's path")
	}
	return filepath.Abs(m.Inventory)
}

// BesideDir returns the directory that holds the worktrees of the
// repository whose work tree is top when Manager.Dir is empty:
// <main>.pilot-worktrees beside the repository's main work tree <main> (the
// one holding its .git directory; top itself for a repository whose git
// directory lives elsewhere). It is out of the repository's own work tree,
// where the repository's tools, builds, searches and file watchers would
// take the worktrees for part of the project; out of pilot's state
// directory, where a person would not look for work to review; and not
// inside .git, which agent CLIs guard (Claude Code's protected paths refuse
// edits there without an explicit grant, even with permissions bypassed).
func BesideDir(ctx context.Context, top string) (string, error) {
	out, err := git(ctx, top, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	common := strings.TrimSuffix(out, "\n")
	if !filepath.IsAbs(common) {
		common = filepath.Join(top, common)
	}
	main := top
	if filepath.Base(common) == ".git" {
		main = filepath.Dir(common)
	}
	main = filepath.Clean(main)
	return filepath.Join(filepath.Dir(main), filepath.Base(main)+DirSuffix), nil
}

// worktreesDir creates the directory that holds the worktrees of the
// repository whose work tree is top, if need be (0700: worktrees are as
// private as run directories), and returns it absolute, with symlinks
// resolved as git reports paths.
func (m *Manager) worktreesDir(ctx context.Context, top string) (string, error) {
	if _, err := m.inventoryPath(); err != nil {
		return "", err
	}
	dir := m.Dir
	if dir == "" {
		var err error
		if dir, err = BesideDir(ctx, top); err != nil {
			return "", err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the worktrees directory: %w", err)
	}
	return filepath.EvalSymlinks(dir)
}

// Prepare checks that repoDir is in a git repository with a commit (as
// CheckRepo does) and creates the directory its worktrees go in, so that a
// problem with either shows before any job runs. It returns that
// directory.
func (m *Manager) Prepare(ctx context.Context, repoDir string) (string, error) {
	top, err := CheckRepo(ctx, repoDir)
	if err != nil {
		return "", err
	}
	return m.worktreesDir(ctx, top)
}

// Create makes a new worktree of the repository holding repoDir, at
// Dir/<name> (a directory of mode 0700), on a new branch pilot/<name>
// starting at the repository's HEAD, and records it as active, owned by
// this process. name must be a
// valid branch component (see ErrBadName's message). An existing entry of
// that name (other than a removed one), path or branch is an ErrExists
// error: pilot never reuses or overwrites a worktree or a branch.
//
// The entry is recorded before git creates anything, so a crash leaves an
// entry Prune settles, never an unrecorded worktree. When git fails, or ctx
// ends, Create removes what it made and the entry, and returns the error.
func (m *Manager) Create(ctx context.Context, repoDir, name string) (*Entry, error) {
	return m.CreateAt(ctx, repoDir, name, "")
}

// CreateAt is Create with the branch starting at commit base (a commit or
// ref of the repository) rather than HEAD; "" means HEAD. The entry's Base
// is that commit, so that its diff is the job's own work.
func (m *Manager) CreateAt(ctx context.Context, repoDir, name, base string) (*Entry, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if _, err := m.inventoryPath(); err != nil {
		return nil, err
	}
	me, err := self()
	if err != nil {
		return nil, err
	}
	top, head, err := checkRepo(ctx, repoDir)
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = head
	} else if c, ok, err := revParse(ctx, top, base); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("worktree %s: no commit %s in %s", name, base, top)
	} else {
		base = c
	}
	dir, err := m.worktreesDir(ctx, top)
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
		OwnerBoot:  me.id.BootID, OwnerPidNamespace: me.id.PidNamespace, OwnerHost: me.id.Host,
		State: StateActive,
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
	branchMade, dirMade := false, false
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
		} else if dirMade {
			os.Remove(e.Path) // empty: git did not get to fill it
		}
		if branchMade {
			if derr := deleteBranchIf(ctx, e.Repo, e.Branch, e.Base); derr != nil {
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
	// git worktree add fills an empty directory: made here, it is 0700
	// from the start.
	if err := os.Mkdir(e.Path, 0o700); err != nil {
		return err
	}
	dirMade = true
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

// Finish ends e's use by run. If the worktree has no changes compared with
// its base (no uncommitted changes, no untracked files that .gitignore does
// not ignore, HEAD still on its branch at the base), it removes the worktree
// (git worktree remove, without --force) and deletes the branch, and records
// state "removed". Otherwise it keeps both: it commits what is uncommitted
// in the worktree on the branch (git add -A: changed, deleted and untracked
// files, .gitignore respected), as CommitName <CommitEmail> with a message
// naming run.Job and run.ID and without the repository's hooks, and records
// state "kept" with Changed, the commit, the job and the task file. It
// updates *e to match and returns whether it kept the worktree.
//
// Commits the worker made itself stay, below pilot's. A worktree whose HEAD
// is no longer on its branch (a detached HEAD, another branch checked out)
// is kept as it is, with nothing committed: a commit there would not be on
// the branch. When the commit fails, the worktree is kept with its changes
// uncommitted, recorded as kept, and the error returned.
//
// A worktree whose directory was deleted by hand counts as changed only if
// its branch moved. On any other error nothing is deleted that was not
// clean, the entry stays as it was, and kept is true unless the worktree
// itself was already removed; Prune settles the entry once this process has
// exited.
func (m *Manager) Finish(ctx context.Context, e *Entry, run Run) (kept bool, err error) {
	if e == nil {
		return false, errors.New("Finish: the entry is nil")
	}
	if _, err := m.inventoryPath(); err != nil {
		return true, err
	}
	if err := m.owns(*e); err != nil {
		return true, err
	}
	changed, err := changes(ctx, *e)
	if err != nil {
		return true, fmt.Errorf("worktree %s: %w", e.Name, err)
	}
	if !changed {
		if removed, err := remove(ctx, *e); err != nil {
			return !removed, fmt.Errorf("worktree %s: %w", e.Name, err)
		}
		return false, m.record(e, run, StateRemoved, false, "")
	}
	commit, cerr := commitChanges(ctx, *e, run)
	if cerr != nil {
		cerr = fmt.Errorf("worktree %s: committing the job's changes: %w (they are left uncommitted in %s)", e.Name, cerr, e.Path)
	}
	if err := m.record(e, run, StateKept, true, commit); err != nil {
		return true, errors.Join(cerr, err)
	}
	return true, cerr
}

// commitChanges commits what is uncommitted in e's worktree on its branch
// (see Finish) and returns the commit, or "" when there was nothing to
// commit there.
func commitChanges(ctx context.Context, e Entry, run Run) (string, error) {
	if _, err := os.Lstat(e.Path); errors.Is(err, fs.ErrNotExist) {
		return "", nil // only the branch can hold anything
	} else if err != nil {
		return "", err
	}
	if on, err := onBranch(ctx, e); err != nil || !on {
		return "", err
	}
	out, err := git(ctx, e.Path, "status", "--porcelain", "--untracked-files=all")
	if err != nil || strings.TrimSpace(out) == "" {
		return "", err
	}
	if _, err := git(ctx, e.Path, "add", "-A"); err != nil {
		return "", err
	}
	// Only a change git cannot stage (inside a submodule) leaves nothing
	// staged; diff --quiet exits 1 when something is.
	if _, err := git(ctx, e.Path, "diff", "--cached", "--quiet"); err == nil {
		return "", nil
	} else if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return "", err
	}
	subject, body := commitMessage(e, run)
	// The repository's hooks are not run: a pre-commit hook (a linter, a
	// formatter) must not refuse or rewrite the record of what the worker
	// did; nor is the commit signed, or git's housekeeping started in the
	// background while other jobs use the repository.
	_, err = gitEnvArgs(ctx, e.Path, []string{
		"GIT_AUTHOR_NAME=" + CommitName, "GIT_AUTHOR_EMAIL=" + CommitEmail,
		"GIT_COMMITTER_NAME=" + CommitName, "GIT_COMMITTER_EMAIL=" + CommitEmail,
	}, "-c", "core.hooksPath="+os.DevNull, "-c", "commit.gpgSign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
		"commit", "-q", "--no-verify", "-m", subject, "-m", body)
	if err != nil {
		return "", err
	}
	head, ok, err := revParse(ctx, e.Path, "HEAD")
	if err != nil || !ok {
		return "", err
	}
	return head, nil
}

// commitMessage is the subject and body of the commit Finish makes:
// "pilot: job fix-login.md (glm:code), run <run id>".
func commitMessage(e Entry, run Run) (subject, body string) {
	var what []string
	if run.Job != "" {
		what = append(what, "job "+run.Job)
	}
	if run.ID != "" {
		what = append(what, "run "+run.ID)
	}
	if len(what) == 0 {
		what = append(what, "worktree "+e.Name)
	}
	subject = "pilot: " + strings.Join(what, ", ")
	body = "What the worker changed in pilot's worktree " + e.Name + ", committed by pilot when the job ended\n" +
		"(untracked files included, .gitignore respected)."
	var trailers []string
	if run.TaskFile != "" {
		trailers = append(trailers, "Pilot-Task-File: "+run.TaskFile)
	}
	if run.ID != "" {
		trailers = append(trailers, "Pilot-Run: "+run.ID)
	}
	if len(trailers) > 0 {
		body += "\n\n" + strings.Join(trailers, "\n")
	}
	return subject, body
}

// owns reports an error unless e is a worktree this Manager would have
// made: its name valid, its branch pilot/<name>, its directory <name> (in
// Dir, when Dir is set).
func (m *Manager) owns(e Entry) error {
	ok := validName(e.Name) == nil && e.Branch == "pilot/"+e.Name && filepath.IsAbs(e.Path) && filepath.Base(e.Path) == e.Name
	where := "worktrees named after their branch"
	if ok && m.Dir != "" {
		dir, err := filepath.Abs(m.Dir)
		if err == nil {
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
		}
		ok, where = filepath.Dir(e.Path) == dir, "worktrees in "+dir
	}
	if !ok {
		return fmt.Errorf("worktree entry %q (path %s, branch %s) was not made by this Manager (%s, on branches pilot/<name>): left alone", e.Name, e.Path, e.Branch, where)
	}
	return nil
}

// record sets e's run, state, Changed and commit, in *e and in the
// inventory. A kept entry missing from the inventory is added back.
func (m *Manager) record(e *Entry, run Run, state string, changed bool, commit string) error {
	set := func(x *Entry) {
		x.RunID, x.State, x.Changed = run.ID, state, changed
		x.Job, x.TaskFile, x.Commit = run.Job, run.TaskFile, commit
	}
	return m.update(func(inv *inventory) error {
		set(e)
		i := inv.find(e.Name)
		switch {
		case i >= 0:
			set(&inv.Entries[i])
		case state == StateKept:
			inv.Entries = append(inv.Entries, *e)
		}
		return nil
	})
}

// isWorktree reports an error unless git sees e.Path as the top of a work
// tree, and not as a plain directory inside some other repository.
func isWorktree(ctx context.Context, e Entry) error {
	out, err := git(ctx, e.Path, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if top := strings.TrimSuffix(out, "\n"); top != e.Path {
		return fmt.Errorf("%s is no longer a git worktree (git finds the work tree %s there): look at it and remove it by hand", e.Path, top)
	}
	return nil
}

// onBranch reports whether e's worktree has its branch checked out.
func onBranch(ctx context.Context, e Entry) (bool, error) {
	out, err := git(ctx, e.Path, "symbolic-ref", "-q", "HEAD")
	var ge *GitError
	var ee *exec.ExitError
	if errors.As(err, &ge) && ge.Stderr == "" && errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil // -q: a detached HEAD fails silently
	}
	if err != nil {
		return false, err
	}
	return strings.TrimSuffix(out, "\n") == "refs/heads/"+e.Branch, nil
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
	if err := isWorktree(ctx, e); err != nil {
		return false, err
	}
	if on, err := onBranch(ctx, e); err != nil || !on {
		return true, err // HEAD moved elsewhere: not pilot's to judge
	}
	head, ok, err := revParse(ctx, e.Path, "HEAD")
	if err != nil {
		return false, err
	}
	if !ok || head != e.Base {
		return true, nil // an orphan branch, or commits made elsewhere
	}
	out, err := git(ctx, e.Path, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) != "", nil
}

// work says what of e's is found nowhere else: uncommitted changes in its
// worktree, a HEAD moved off its branch, or commits of its branch that no
// other branch, remote-tracking branch or tag holds. "" means none: the
// worktree and its branch can go without losing anything.
func work(ctx context.Context, e Entry) (string, error) {
	if _, err := os.Lstat(e.Path); err == nil {
		if err := isWorktree(ctx, e); err != nil {
			return "", err
		}
		if on, err := onBranch(ctx, e); err != nil {
			return "", err
		} else if !on {
			return fmt.Sprintf("its worktree %s no longer has %s checked out", e.Path, e.Branch), nil
		}
		out, err := git(ctx, e.Path, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=none")
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Sprintf("its worktree %s has uncommitted changes", e.Path), nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tip, ok, err := revParse(ctx, e.Repo, "refs/heads/"+e.Branch)
	if err != nil || !ok || tip == e.Base {
		return "", err
	}
	n, err := unmerged(ctx, e.Repo, e.Branch)
	if err != nil || n == 0 {
		return "", err
	}
	return fmt.Sprintf("its branch %s has %d commit(s) on no other branch, remote-tracking branch or tag", e.Branch, n), nil
}

// Uncommitted counts the files with uncommitted changes, untracked ones
// too (ignored ones aside), in the work tree of the repository holding
// dir.
func Uncommitted(ctx context.Context, dir string) (int, error) {
	out, err := git(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "\n"), nil
}

// unmerged counts the commits of branch that no other branch,
// remote-tracking branch or tag of repo holds.
func unmerged(ctx context.Context, repo, branch string) (int, error) {
	out, err := git(ctx, repo, "rev-list", "--count", "refs/heads/"+branch, "--not", "--exclude="+branch, "--branches", "--remotes", "--tags")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// remove removes e's worktree, and its branch if that holds no work (see
// deleteBranchIf). It reports whether the worktree is gone. git worktree
// remove without --force refuses a worktree with changes, so one made after
// changes looked is not lost.
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
	return true, deleteBranchIf(ctx, e.Repo, e.Branch, e.Base)
}

// deleteBranchIf deletes branch if it holds no work: it points at base, or
// every commit of it is on another branch, remote-tracking branch or tag. A
// branch with work stays. update-ref checks the tip itself, so a commit made
// meanwhile is not lost either.
func deleteBranchIf(ctx context.Context, repo, branch, base string) error {
	ref := "refs/heads/" + branch
	tip, ok, err := revParse(ctx, repo, ref)
	if err != nil || !ok {
		return err
	}
	if tip != base {
		if n, err := unmerged(ctx, repo, branch); err != nil || n > 0 {
			return err
		}
	}
	_, err = git(ctx, repo, "update-ref", "-m", "pilot: worktree done", "-d", ref, tip)
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
	for i, e := range inv.Entries {
		if missing(e) {
			inv.Entries[i].State = StateMissing
		}
	}
	return inv.Entries, nil
}

// missing reports whether e's directory is gone while no live run owns it.
func missing(e Entry) bool {
	if e.State == StateRemoved || e.State == StateActive && e.ownerAlive() {
		return false
	}
	_, err := os.Lstat(e.Path)
	return errors.Is(err, fs.ErrNotExist)
}

// Lookup returns the entry named name: its exact name, its branch
// (pilot/<name>), or a prefix of exactly one entry's name.
func (m *Manager) Lookup(name string) (Entry, error) {
	path, err := m.inventoryPath()
	if err != nil {
		return Entry{}, err
	}
	inv, err := readInventory(path)
	if err != nil {
		return Entry{}, err
	}
	i, err := lookup(inv, name)
	if err != nil {
		return Entry{}, err
	}
	return inv.Entries[i], nil
}

// lookup is Lookup in inv; it returns the entry's index.
func lookup(inv *inventory, name string) (int, error) {
	name = strings.TrimPrefix(name, "pilot/")
	if i := inv.find(name); i >= 0 {
		return i, nil
	}
	var found []int
	if name != "" {
		for i, e := range inv.Entries {
			if strings.HasPrefix(e.Name, name) {
				found = append(found, i)
			}
		}
	}
	switch len(found) {
	case 0:
		return -1, fmt.Errorf("%w named %q in the inventory", ErrNotFound, name)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for k, i := range found {
		names[k] = inv.Entries[i].Name
	}
	return -1, fmt.Errorf("%w named %q: it is the start of %d names (%s); give more of it", ErrNotFound, name, len(found), strings.Join(names, ", "))
}

// Diff writes to w the diff of e's branch against the commit it started
// from (git diff <base> <branch>), as git prints it.
func Diff(ctx context.Context, e Entry, w io.Writer) error {
	ref := "refs/heads/" + e.Branch
	if _, ok, err := revParse(ctx, e.Repo, ref); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("worktree %s: its branch %s no longer exists in %s", e.Name, e.Branch, e.Repo)
	}
	return gitTo(ctx, e.Repo, w, nil, "--no-pager", "diff", e.Base, ref, "--")
}

// Remove removes the worktree named name (as Lookup finds it) and its
// branch, drops its entry from the inventory, and returns the entry with
// State "removed". It refuses a worktree whose run is going on (ErrInUse:
// state active, its pilot alive), and, unless force is set, one that holds
// work found nowhere else (ErrUnmerged: uncommitted changes, a HEAD moved
// off its branch, or commits of its branch that no other branch,
// remote-tracking branch or tag holds); force removes the worktree with
// its changes and deletes the branch with its commits. A worktree is
// removed only while git lists it as a worktree of its repository on its
// branch (or a detached HEAD).
func (m *Manager) Remove(ctx context.Context, name string, force bool) (Entry, error) {
	path, err := m.inventoryPath()
	if err != nil {
		return Entry{}, err
	}
	// Remove holds the lock throughout, as Prune does.
	l, err := lock(path)
	if err != nil {
		return Entry{}, err
	}
	defer l.Close()
	inv, err := readInventory(path)
	if err != nil {
		return Entry{}, err
	}
	i, err := lookup(inv, name)
	if err != nil {
		return Entry{}, err
	}
	e := inv.Entries[i]
	if err := m.owns(e); err != nil {
		return e, err
	}
	if e.State == StateActive && e.ownerAlive() {
		return e, fmt.Errorf("worktree %s is %w: its run is going on (pilot pid %d); when it ends the worktree is removed, or kept if the job changed something", e.Name, ErrInUse, e.OwnerPID)
	}
	if !force {
		why, err := work(ctx, e)
		if err != nil {
			return e, fmt.Errorf("worktree %s: %w", e.Name, err)
		}
		if why != "" {
			return e, fmt.Errorf("worktree %s %w: %s; merge its branch %s first (git merge %s), or force the removal", e.Name, ErrUnmerged, why, e.Branch, e.Branch)
		}
	}
	repoGone := false
	if _, err := os.Stat(e.Repo); errors.Is(err, fs.ErrNotExist) {
		repoGone = true
	}
	if _, err := os.Lstat(e.Path); err == nil {
		if repoGone {
			return e, fmt.Errorf("worktree %s: its repository %s is gone; remove %s by hand", e.Name, e.Repo, e.Path)
		}
		listed, branch, err := worktreeBranch(ctx, e.Repo, e.Path)
		if err != nil {
			return e, err
		}
		if !listed || (branch != "" && branch != "refs/heads/"+e.Branch) {
			return e, fmt.Errorf("worktree %s: git does not list %s as a worktree of %s on %s: left alone", e.Name, e.Path, e.Repo, e.Branch)
		}
		args := []string{"remove"}
		if force {
			args = append(args, "--force", "--force")
		}
		if _, err := gitWorktree(ctx, e.Repo, append(args, e.Path)...); err != nil {
			return e, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return e, err
	} else if !repoGone {
		if _, err := gitWorktree(ctx, e.Repo, "prune"); err != nil {
			return e, err
		}
	}
	if !repoGone {
		ref := "refs/heads/" + e.Branch
		tip, ok, err := revParse(ctx, e.Repo, ref)
		if err != nil {
			return e, err
		}
		if ok {
			if _, err := git(ctx, e.Repo, "update-ref", "-m", "pilot: worktree removed", "-d", ref, tip); err != nil {
				return e, err
			}
		}
	}
	inv.Entries = slices.Delete(inv.Entries, i, i+1)
	if err := writeInventory(path, inv); err != nil {
		return e, err
	}
	e.State = StateRemoved
	return e, nil
}

// worktreeBranch reports whether git lists path as a worktree of repo, and
// the branch it has checked out ("" for a detached HEAD).
func worktreeBranch(ctx context.Context, repo, path string) (listed bool, branch string, err error) {
	out, err := gitWorktree(ctx, repo, "list", "--porcelain")
	if err != nil {
		return false, "", err
	}
	for _, block := range strings.Split(out, "\n\n") {
		var p, b string
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "worktree "); ok {
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				}
				p = v
			}
			if v, ok := strings.CutPrefix(line, "branch "); ok {
				b = v
			}
		}
		if p == path {
			return true, b, nil
		}
	}
	return false, "", nil
}

// Prune removes the worktrees whose runs are over and which hold no work
// found nowhere else, with their branches, and returns them (with State
// "removed"), then the entries it dropped because their directory was gone
// (State "missing"). Exactly these are removed: entries in state "active" whose
// owner process is gone (no process with that pid, or one with another
// start time), and entries in state "kept", that have no uncommitted
// changes, still have their branch checked out, and whose branch holds no
// commit that another branch, remote-tracking branch or tag does not: a
// kept worktree goes once its branch is merged. An "active" entry of a dead
// owner that holds work becomes "kept".
//
// A worktree in use is never touched: an "active" entry whose owner is alive
// is left alone entirely, even when its directory is missing (it may be
// being created). This is what keeps Prune from deleting worktrees still in
// use, the failure users of similar tools report.
//
// Entries whose directory no longer exists, and "removed" ones, are dropped
// from the inventory after git worktree prune in their repository; their
// branches are deleted if they hold no work. Prune goes on past errors and
// returns them joined; the entries concerned stay.
func (m *Manager) Prune(ctx context.Context) ([]Entry, error) {
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
		if e.State == StateActive && e.ownerAlive() {
			stay = append(stay, e)
			continue
		}
		if err := m.owns(e); err != nil {
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
		why, err := work(ctx, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", e.Name, err))
			stay = append(stay, e)
			continue
		}
		if why != "" {
			if e.State == StateActive {
				e.State, e.Changed = StateKept, true
			}
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
		if err := deleteBranchIf(ctx, e.Repo, e.Branch, e.Base); err != nil {
			errs = append(errs, fmt.Errorf("worktree %s: %w", e.Name, err))
		}
	}
	for _, e := range dropped {
		if e.State != StateRemoved {
			e.State = StateMissing
			removed = append(removed, e)
		}
	}
	inv.Entries = stay
	if err := writeInventory(path, inv); err != nil {
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// Salvage takes over the worktree name, "active" but left by an owner
// that is dead (a pilot SIGKILLed while its job ran), for a pilot that
// runs the job again: what the dead run changed is committed on the
// worktree's branch, as Finish would have done, and the entry is kept
// (kept is true: build on its branch); a worktree the dead run left
// clean is removed (kept is false). An entry already finished is
// returned as it is, kept when its state is. A worktree whose owner may
// still run (alive here, or of another pid namespace or host: not known
// dead) is left alone: an error says so.
func (m *Manager) Salvage(ctx context.Context, name string, run Run) (e Entry, kept bool, err error) {
	path, err := m.inventoryPath()
	if err != nil {
		return Entry{}, false, err
	}
	// The lock is held throughout, as Prune holds it: no Prune or other
	// Salvage acts on the entry meanwhile.
	l, err := lock(path)
	if err != nil {
		return Entry{}, false, err
	}
	defer l.Close()
	inv, err := readInventory(path)
	if err != nil {
		return Entry{}, false, err
	}
	i := inv.find(name)
	if i < 0 {
		return Entry{}, false, fmt.Errorf("worktree %s: %w in the inventory %s", name, ErrNotFound, path)
	}
	e = inv.Entries[i]
	switch {
	case e.State != StateActive:
		return e, e.State == StateKept, nil
	case e.ownerAlive():
		return e, false, fmt.Errorf("worktree %s: its owner, pilot pid %d, is not known dead: left alone", name, e.OwnerPID)
	}
	if err := m.owns(e); err != nil {
		return e, false, err
	}
	changed, err := changes(ctx, e)
	if err != nil {
		return e, false, fmt.Errorf("worktree %s: %w", name, err)
	}
	if changed {
		commit, err := commitChanges(ctx, e, run)
		if err != nil {
			return e, false, fmt.Errorf("worktree %s: committing the dead run's changes: %w (they are left in %s)", name, err, e.Path)
		}
		e.State, e.Changed, e.Commit, e.RunID, e.Job, e.TaskFile = StateKept, true, commit, run.ID, run.Job, run.TaskFile
	} else {
		if _, err := remove(ctx, e); err != nil {
			return e, false, fmt.Errorf("worktree %s: %w", name, err)
		}
		e.State = StateRemoved
	}
	inv.Entries[i] = e
	if err := writeInventory(path, inv); err != nil {
		return e, false, err
	}
	return e, e.State == StateKept, nil
}
