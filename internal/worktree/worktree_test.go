//go:build unix

package worktree

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/pilotworkers/pilot/internal/procfs"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMain runs the helper processes, and isolates git from the machine's
// configuration for the tests and every git they start.
func TestMain(m *testing.M) {
	switch os.Getenv("WORKTREE_TEST_HELPER") {
	case "create":
		os.Exit(helperCreate())
	case "wait":
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Exit(m.Run())
}

// helperCreate is a pilot process of its own: once its stdin closes, it
// creates WT_N worktrees named WT_PREFIX-<i> at once.
func helperCreate() int {
	io.Copy(io.Discard, os.Stdin)
	m := &Manager{Dir: os.Getenv("WT_DIR"), Inventory: os.Getenv("WT_INV")}
	n, _ := strconv.Atoi(os.Getenv("WT_N"))
	var wg sync.WaitGroup
	var failed sync.Once
	code := 0
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("%s-%d", os.Getenv("WT_PREFIX"), i)
			if _, err := m.Create(context.Background(), os.Getenv("WT_REPO"), name); err != nil {
				fmt.Fprintln(os.Stderr, err)
				failed.Do(func() { code = 1 })
			}
		})
	}
	wg.Wait()
	return code
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH: the worktree tests need the git CLI")
	}
}

// gitT runs git in dir as a user would, and returns its trimmed output.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=pilot test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=pilot test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git -C %s %s: %v\n%s", dir, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// initRepo makes a repository with one commit of README and a .gitignore
// that ignores *.log, and returns its directory as git reports it.
func initRepo(t *testing.T) string {
	t.Helper()
	needGit(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "README"), "hello\n")
	writeFile(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	gitT(t, dir, "add", ".")
	gitT(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func newManager(t *testing.T) *Manager {
	t.Helper()
	base := t.TempDir()
	return &Manager{Dir: filepath.Join(base, "worktrees"), Inventory: filepath.Join(base, "state", "worktrees.json")}
}

// worktrees lists the worktree paths git knows in repo, sorted.
func worktrees(t *testing.T, repo string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(gitT(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// branches lists repo's pilot/ branches, sorted.
func branches(t *testing.T, repo string) []string {
	t.Helper()
	out := gitT(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/pilot/")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func list(t *testing.T, m *Manager) []Entry {
	t.Helper()
	entries, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		return nil
	}
	return entries
}

// states maps each inventory entry's name to its state.
func states(t *testing.T, m *Manager) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range list(t, m) {
		out[e.Name] = e.State
	}
	return out
}

func create(t *testing.T, m *Manager, repo, name string) *Entry {
	t.Helper()
	e, err := m.Create(t.Context(), repo, name)
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	return e
}

// deadProcess returns the identity of a process that has exited and been
// reaped.
func deadProcess(t *testing.T) owner {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "WORKTREE_TEST_HELPER=wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, ok := procStart(cmd.Process.Pid)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("procStart(%d) failed for a running child", cmd.Process.Pid)
	}
	return owner{pid: cmd.Process.Pid, start: start}
}

// setOwner rewrites the owner of the entry named name.
func setOwner(t *testing.T, m *Manager, name string, o owner) {
	t.Helper()
	err := m.update(func(inv *inventory) error {
		i := inv.find(name)
		if i < 0 {
			return fmt.Errorf("no entry %s", name)
		}
		inv.Entries[i].OwnerPID, inv.Entries[i].OwnerStart = o.pid, o.start
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckRepo(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) (dir, top string)
		wantErr error
		wantMsg string // with DIR for the directory
	}{
		{
			name:  "top level",
			setup: func(t *testing.T) (string, string) { r := initRepo(t); return r, r },
		},
		{
			name: "subdirectory",
			setup: func(t *testing.T) (string, string) {
				r := initRepo(t)
				sub := filepath.Join(r, "a", "b")
				if err := os.MkdirAll(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				return sub, r
			},
		},
		{
			name:    "not a repository",
			setup:   func(t *testing.T) (string, string) { return t.TempDir(), "" },
			wantErr: ErrNotRepo,
			wantMsg: `workdir DIR is not a git repository: worktree jobs need one (give a workdir inside a git repository, or run git init there)`,
		},
		{
			name: "no commits",
			setup: func(t *testing.T) (string, string) {
				dir, err := filepath.EvalSymlinks(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				gitT(t, dir, "init", "-q")
				return dir, ""
			},
			wantErr: ErrNoCommits,
			wantMsg: "workdir DIR is in a git repository (DIR) with no commits: a worktree needs a commit to start from (commit something first, e.g. git commit --allow-empty -m init)",
		},
		{
			name:    "missing",
			setup:   func(t *testing.T) (string, string) { return filepath.Join(t.TempDir(), "nope"), "" },
			wantMsg: "workdir DIR does not exist: worktree jobs need a git repository there",
		},
		{
			name: "a file",
			setup: func(t *testing.T) (string, string) {
				p := filepath.Join(initRepo(t), "README")
				return p, ""
			},
			wantMsg: "workdir DIR is not a directory: worktree jobs need a git repository",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needGit(t)
			t.Parallel()
			dir, wantTop := tt.setup(t)
			top, err := CheckRepo(t.Context(), dir)
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("CheckRepo(%s): %v", dir, err)
				}
				if top != wantTop {
					t.Errorf("CheckRepo(%s) = %s, want %s", dir, top, wantTop)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckRepo(%s) = %s, want an error", dir, top)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("CheckRepo(%s) = %v, want errors.Is %v", dir, err, tt.wantErr)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.wantMsg, "DIR", dir), err.Error()); diff != "" {
				t.Errorf("error message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGitEnv checks that git ignores the variables a pilot started from a
// git hook would inherit.
func TestGitEnv(t *testing.T) {
	repo := initRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(t.TempDir(), "elsewhere.git"))
	t.Setenv("GIT_WORK_TREE", t.TempDir())
	t.Setenv("GIT_INDEX_FILE", filepath.Join(t.TempDir(), "index"))
	t.Setenv("LC_ALL", "de_DE.UTF-8")
	top, err := CheckRepo(t.Context(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if top != repo {
		t.Errorf("CheckRepo = %s, want %s", top, repo)
	}
	if _, err := CheckRepo(t.Context(), t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Errorf("CheckRepo(non-repository) = %v, want ErrNotRepo", err)
	}
}

func TestGitError(t *testing.T) {
	repo := initRepo(t)
	_, err := git(t.Context(), repo, "rev-parse", "--verify", "no-such-rev")
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("git error %v (%T) is not a *GitError", err, err)
	}
	want := "git -C " + repo + " rev-parse --verify no-such-rev: fatal: Needed a single revision (exit status 128)"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{"empty", 8, nil, ""},
		{"fits", 16, []string{" fatal: x\n"}, "fatal: x"},
		{"cut in one write", 4, []string{"abcdefgh"}, "…efgh"},
		{"cut across writes", 5, []string{"abc", "def", "gh"}, "…defgh"},
		{"exactly full", 3, []string{"ab", "c"}, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tailBuffer{max: tt.max}
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"job-1", true},
		{"20260101T120000.123456Z-fanout-0a1b2c3d-0-pi", true},
		{"A_b.c-9", true},
		{"", false},
		{"a/b", false},
		{"a b", false},
		{"a~1", false},
		{"a:b", false},
		{"ü", false},
		{".hidden", false},
		{"-flag", false},
		{"_x", false},
		{"a..b", false},
		{"a.lock", false},
		{"a.", false},
		{strings.Repeat("a", maxName), true},
		{strings.Repeat("a", maxName+1), false},
	}
	for _, tt := range tests {
		err := validName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("validName(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("validName(%q) = %v, want errors.Is ErrBadName", tt.name, err)
		}
	}
}

func TestCreateFinish(t *testing.T) {
	tests := []struct {
		name     string
		change   func(t *testing.T, e *Entry)
		wantKept bool
		dirGone  bool // change deletes the directory
		// wantDiff is git diff --name-status of the branch against its
		// base after Finish, when Finish commits the changes.
		wantDiff string
	}{
		{name: "untouched"},
		{
			name:   "ignored file only",
			change: func(t *testing.T, e *Entry) { writeFile(t, filepath.Join(e.Path, "build", "out.log"), "noise\n") },
		},
		{
			name:     "tracked file modified",
			change:   func(t *testing.T, e *Entry) { writeFile(t, filepath.Join(e.Path, "README"), "changed\n") },
			wantKept: true,
			wantDiff: "M\tREADME",
		},
		{
			name:     "tracked file deleted",
			change:   func(t *testing.T, e *Entry) { os.Remove(filepath.Join(e.Path, "README")) },
			wantKept: true,
			wantDiff: "D\tREADME",
		},
		{
			name: "untracked file, beside an ignored one",
			change: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "new", "file.go"), "package x\n")
				writeFile(t, filepath.Join(e.Path, "new", "debug.log"), "ignored\n")
			},
			wantKept: true,
			wantDiff: "A\tnew/file.go",
		},
		{
			name: "staged file",
			change: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "staged"), "x\n")
				gitT(t, e.Path, "add", "staged")
			},
			wantKept: true,
			wantDiff: "A\tstaged",
		},
		{
			name: "commit on the branch, then more changes",
			change: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "README"), "committed\n")
				gitT(t, e.Path, "commit", "-q", "-am", "the worker's own")
				writeFile(t, filepath.Join(e.Path, "later"), "x\n")
			},
			wantKept: true,
			wantDiff: "M\tREADME\nA\tlater",
		},
		{
			name: "commit on the branch",
			change: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "README"), "committed\n")
				gitT(t, e.Path, "commit", "-q", "-am", "work")
			},
			wantKept: true,
		},
		{
			name: "commit on a detached HEAD",
			change: func(t *testing.T, e *Entry) {
				gitT(t, e.Path, "checkout", "-q", "--detach")
				gitT(t, e.Path, "commit", "-q", "--allow-empty", "-m", "detached work")
			},
			wantKept: true,
		},
		{
			name: "directory deleted by hand",
			change: func(t *testing.T, e *Entry) {
				if err := os.RemoveAll(e.Path); err != nil {
					t.Fatal(err)
				}
			},
			dirGone: true,
		},
		{
			name: "commit, then directory deleted by hand",
			change: func(t *testing.T, e *Entry) {
				gitT(t, e.Path, "commit", "-q", "--allow-empty", "-m", "work")
				if err := os.RemoveAll(e.Path); err != nil {
					t.Fatal(err)
				}
			},
			wantKept: true,
			dirGone:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := initRepo(t)
			t.Parallel()
			m := newManager(t)
			e := create(t, m, repo, "job-1")

			dir, err := filepath.EvalSymlinks(m.Dir)
			if err != nil {
				t.Fatal(err)
			}
			me, err := self()
			if err != nil {
				t.Fatal(err)
			}
			want := Entry{
				Name: "job-1", Repo: repo, Path: filepath.Join(dir, "job-1"), Branch: "pilot/job-1",
				Base: gitT(t, repo, "rev-parse", "HEAD"), OwnerPID: os.Getpid(), OwnerStart: me.start,
				OwnerBoot: me.id.BootID, OwnerPidNamespace: me.id.PidNamespace, OwnerHost: me.id.Host,
				Created: e.Created, State: StateActive,
			}
			if diff := cmp.Diff(want, *e); diff != "" {
				t.Fatalf("Create (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]Entry{want}, list(t, m)); diff != "" {
				t.Errorf("inventory after Create (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sorted([]string{e.Path, repo}), worktrees(t, repo)); diff != "" {
				t.Errorf("git worktree list after Create (-want +got):\n%s", diff)
			}
			if got := gitT(t, e.Path, "symbolic-ref", "--short", "HEAD"); got != "pilot/job-1" {
				t.Errorf("the worktree is on %s, want pilot/job-1", got)
			}

			if tt.change != nil {
				tt.change(t, e)
			}
			run := Run{ID: "run-1", Job: "fix.md (glm:code)", TaskFile: "/tasks/fix.md"}
			kept, err := m.Finish(t.Context(), e, run)
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if kept != tt.wantKept {
				t.Errorf("Finish kept = %v, want %v", kept, tt.wantKept)
			}
			want.RunID, want.State, want.Changed = "run-1", StateRemoved, false
			want.Job, want.TaskFile = run.Job, run.TaskFile
			if tt.wantKept {
				want.State, want.Changed = StateKept, true
			}
			if tt.wantDiff != "" {
				// Finish committed everything on the branch: the worktree
				// is clean, and the branch holds the work.
				want.Commit = gitT(t, repo, "rev-parse", "pilot/job-1")
				if got := gitT(t, e.Path, "status", "--porcelain", "--untracked-files=all"); got != "" {
					t.Errorf("the worktree after Finish is not clean:\n%s", got)
				}
				if got := gitT(t, repo, "diff", "--name-status", want.Base, "pilot/job-1"); got != tt.wantDiff {
					t.Errorf("git diff --name-status base pilot/job-1 = %q, want %q", got, tt.wantDiff)
				}
				got := gitT(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%(trailers:only,unfold)", "pilot/job-1")
				wantLog := "pilot <pilot@localhost>|pilot <pilot@localhost>|pilot: job fix.md (glm:code), run run-1|" +
					"Pilot-Task-File: /tasks/fix.md\nPilot-Run: run-1"
				if got != wantLog {
					t.Errorf("pilot's commit (author|committer|subject|trailers):\n got %q\nwant %q", got, wantLog)
				}
			}
			if diff := cmp.Diff(want, *e); diff != "" {
				t.Errorf("entry after Finish (-want +got):\n%s", diff)
			}
			listed := want
			if tt.dirGone && want.State == StateKept {
				listed.State = StateMissing // List tells the directory gone
			}
			if diff := cmp.Diff([]Entry{listed}, list(t, m)); diff != "" {
				t.Errorf("inventory after Finish (-want +got):\n%s", diff)
			}
			if got := exists(t, e.Path); got != (tt.wantKept && !tt.dirGone) {
				t.Errorf("%s exists = %v after Finish", e.Path, got)
			}
			// A kept worktree stays registered with git, even one whose
			// directory was deleted by hand; a removed one leaves no record.
			wantTrees := []string{repo}
			if tt.wantKept {
				wantTrees = append(wantTrees, e.Path)
			}
			if diff := cmp.Diff(sorted(wantTrees), worktrees(t, repo)); diff != "" {
				t.Errorf("git worktree list after Finish (-want +got):\n%s", diff)
			}
			var wantBranches []string
			if tt.wantKept {
				wantBranches = []string{"pilot/job-1"}
			}
			if diff := cmp.Diff(wantBranches, branches(t, repo)); diff != "" {
				t.Errorf("branches after Finish (-want +got):\n%s", diff)
			}
		})
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// TestFinishRemovedLeavesNoRecord checks that a removed worktree leaves no
// git record behind even without a git worktree prune.
func TestFinishRemovedLeavesNoRecord(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	e := create(t, m, repo, "clean")
	if kept, err := m.Finish(t.Context(), e, Run{ID: "run-1"}); kept || err != nil {
		t.Fatalf("Finish = %v, %v, want false, nil", kept, err)
	}
	if diff := cmp.Diff([]string{repo}, worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list (-want +got):\n%s", diff)
	}
	if got := gitT(t, repo, "worktree", "prune", "--dry-run", "-v"); got != "" {
		t.Errorf("git worktree prune would still prune: %s", got)
	}
	// A removed entry's name can be used again.
	e2 := create(t, m, repo, "clean")
	if diff := cmp.Diff(map[string]string{"clean": StateActive}, states(t, m)); diff != "" {
		t.Errorf("inventory after re-Create (-want +got):\n%s", diff)
	}
	if _, err := m.Finish(t.Context(), e2, Run{ID: "run-2"}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, m *Manager, repo string) (repoDir string)
		create  string
		wantErr error
	}{
		{
			name:    "bad name",
			create:  "a/b",
			wantErr: ErrBadName,
		},
		{
			name:    "name in the inventory",
			setup:   func(t *testing.T, m *Manager, repo string) string { create(t, m, repo, "dup"); return repo },
			create:  "dup",
			wantErr: ErrExists,
		},
		{
			name: "name in the inventory, kept",
			setup: func(t *testing.T, m *Manager, repo string) string {
				e := create(t, m, repo, "dup")
				writeFile(t, filepath.Join(e.Path, "x"), "x")
				if kept, err := m.Finish(t.Context(), e, Run{ID: "r"}); !kept || err != nil {
					t.Fatalf("Finish = %v, %v", kept, err)
				}
				return repo
			},
			create:  "dup",
			wantErr: ErrExists,
		},
		{
			name: "existing path",
			setup: func(t *testing.T, m *Manager, repo string) string {
				writeFile(t, filepath.Join(m.Dir, "taken", "precious"), "mine\n")
				return repo
			},
			create:  "taken",
			wantErr: ErrExists,
		},
		{
			name: "existing branch",
			setup: func(t *testing.T, m *Manager, repo string) string {
				gitT(t, repo, "branch", "pilot/mine")
				return repo
			},
			create:  "mine",
			wantErr: ErrExists,
		},
		{
			name:    "not a repository",
			setup:   func(t *testing.T, m *Manager, repo string) string { return t.TempDir() },
			create:  "x",
			wantErr: ErrNotRepo,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := initRepo(t)
			t.Parallel()
			m := newManager(t)
			repoDir := repo
			if tt.setup != nil {
				repoDir = tt.setup(t, m, repo)
			}
			type snapshot struct {
				Inventory []Entry
				Trees     []string
				Branches  []string
				Dirs      []string
			}
			snap := func() snapshot {
				s := snapshot{Inventory: list(t, m), Trees: worktrees(t, repo), Branches: branches(t, repo)}
				ents, _ := os.ReadDir(m.Dir)
				for _, d := range ents {
					s.Dirs = append(s.Dirs, d.Name())
				}
				return s
			}
			before := snap()
			e, err := m.Create(t.Context(), repoDir, tt.create)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Create(%s) = %+v, %v, want errors.Is %v", tt.create, e, err, tt.wantErr)
			}
			if diff := cmp.Diff(before, snap()); diff != "" {
				t.Errorf("the failed Create changed things (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCreateCancelled cancels Create while git worktree add runs its
// post-checkout hook, and checks that nothing is left: no entry, branch,
// worktree or hook process.
func TestCreateCancelled(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	fifos := t.TempDir()
	ready, block := filepath.Join(fifos, "ready"), filepath.Join(fifos, "block")
	for _, p := range []string{ready, block} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := fmt.Sprintf("#!/bin/sh\necho ready > %q\nexec cat %q\n", ready, block)
	hookPath := filepath.Join(repo, ".git", "hooks", "post-checkout")
	writeFile(t, hookPath, hook)
	if err := os.Chmod(hookPath, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Create(ctx, repo, "cancelled")
		done <- err
	}()
	hookRan := make(chan error, 1)
	go func() {
		f, err := os.Open(ready) // blocks until the hook opens it to write
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		hookRan <- err
	}()
	select {
	case err := <-hookRan:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("Create returned %v before its hook ran", err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Create succeeded after its context was cancelled")
	}

	// The hook's cat was the only reader of block; it was killed with git.
	if f, err := os.OpenFile(block, os.O_WRONLY|syscall.O_NONBLOCK, 0); !errors.Is(err, syscall.ENXIO) {
		if err == nil {
			f.Close()
		}
		t.Errorf("opening the hook's fifo: %v, want ENXIO (no reader left)", err)
	}
	if got := list(t, m); len(got) != 0 {
		t.Errorf("inventory after a cancelled Create: %+v, want none", got)
	}
	if got := branches(t, repo); len(got) != 0 {
		t.Errorf("branches after a cancelled Create: %v, want none", got)
	}
	if diff := cmp.Diff([]string{repo}, worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list (-want +got):\n%s", diff)
	}
	if p := filepath.Join(m.Dir, "cancelled"); exists(t, p) {
		t.Errorf("%s is left after a cancelled Create", p)
	}
}

func TestConcurrentCreate(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	const n = 8
	entries := make([]*Entry, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			entries[i], errs[i] = m.Create(t.Context(), repo, fmt.Sprintf("w%d", i))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wantNames := make([]string, n)
	wantTrees := []string{repo}
	for i, e := range entries {
		wantNames[i] = fmt.Sprintf("w%d", i)
		wantTrees = append(wantTrees, e.Path)
	}
	var names []string
	for _, e := range list(t, m) {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff(wantNames, sorted(names)); diff != "" {
		t.Errorf("inventory names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(wantTrees), worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list (-want +got):\n%s", diff)
	}

	for i, e := range entries {
		wg.Go(func() {
			var kept bool
			kept, errs[i] = m.Finish(t.Context(), e, Run{ID: "run"})
			if kept {
				errs[i] = fmt.Errorf("Finish kept the untouched %s", e.Name)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, name := range wantNames {
		if got := states(t, m)[name]; got != StateRemoved {
			t.Errorf("%s is %q after Finish, want removed", name, got)
		}
	}
	if diff := cmp.Diff([]string{repo}, worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list after Finish (-want +got):\n%s", diff)
	}
	if got := branches(t, repo); len(got) != 0 {
		t.Errorf("branches after Finish: %v, want none", got)
	}
}

// TestTwoProcesses runs two pilot processes that create worktrees in one
// repository at once, recording them in one inventory; none is lost. Both
// processes have exited afterwards, so Prune removes every worktree.
func TestTwoProcesses(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	const perProcess = 4
	var cmds []*exec.Cmd
	var gates []io.Closer
	var stderr []*strings.Builder
	for _, prefix := range []string{"p0", "p1"} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "WORKTREE_TEST_HELPER=create", "WT_DIR="+m.Dir, "WT_INV="+m.Inventory,
			"WT_REPO="+repo, "WT_PREFIX="+prefix, "WT_N="+strconv.Itoa(perProcess))
		var buf strings.Builder
		cmd.Stderr = &buf
		gate, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, gates, stderr = append(cmds, cmd), append(gates, gate), append(stderr, &buf)
	}
	for _, g := range gates {
		g.Close() // both start creating
	}
	pids := map[int]bool{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v\n%s", i, err, stderr[i])
		}
		pids[cmd.Process.Pid] = true
	}
	if t.Failed() {
		t.FailNow()
	}

	var wantNames, names []string
	for _, p := range []string{"p0", "p1"} {
		for i := range perProcess {
			wantNames = append(wantNames, fmt.Sprintf("%s-%d", p, i))
		}
	}
	owners := map[int]bool{}
	for _, e := range list(t, m) {
		names = append(names, e.Name)
		owners[e.OwnerPID] = true
		if e.State != StateActive {
			t.Errorf("%s is %s, want active", e.Name, e.State)
		}
	}
	if diff := cmp.Diff(wantNames, sorted(names)); diff != "" {
		t.Errorf("inventory names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pids, owners); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	if got := len(worktrees(t, repo)); got != 1+len(wantNames) {
		t.Errorf("git lists %d worktrees, want %d", got, 1+len(wantNames))
	}

	removed, err := m.Prune(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != len(wantNames) {
		t.Errorf("Prune removed %d worktrees, want %d", len(removed), len(wantNames))
	}
	if got := list(t, m); len(got) != 0 {
		t.Errorf("inventory after Prune: %+v, want none", got)
	}
	if diff := cmp.Diff([]string{repo}, worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list after Prune (-want +got):\n%s", diff)
	}
	if got := branches(t, repo); len(got) != 0 {
		t.Errorf("branches after Prune: %v, want none", got)
	}
}

func TestPrune(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	me, err := self()
	if err != nil {
		t.Fatal(err)
	}
	dead := deadProcess(t)
	reused := owner{me.pid, me.start + 1, me.id} // this pid, but another process
	finish := func(t *testing.T, e *Entry) {
		t.Helper()
		if _, err := m.Finish(t.Context(), e, Run{ID: "run-" + e.Name}); err != nil {
			t.Fatal(err)
		}
	}
	rmDir := func(t *testing.T, e *Entry) {
		t.Helper()
		if err := os.RemoveAll(e.Path); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		setup       func(t *testing.T, e *Entry)
		wantState   string // "" when dropped from the inventory
		wantRemoved bool   // returned by Prune
		wantMissing bool   // returned by Prune as missing: its directory was gone
		wantDir     bool
		wantBranch  bool
	}{
		{
			name:        "dead-owner-clean",
			setup:       func(t *testing.T, e *Entry) { setOwner(t, m, e.Name, dead) },
			wantRemoved: true,
		},
		{
			name:        "reused-pid-clean",
			setup:       func(t *testing.T, e *Entry) { setOwner(t, m, e.Name, reused) },
			wantRemoved: true,
		},
		{
			name: "dead-owner-ignored-file",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "x.log"), "noise")
				setOwner(t, m, e.Name, dead)
			},
			wantRemoved: true,
		},
		{
			name: "dead-owner-changed",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "new"), "work")
				setOwner(t, m, e.Name, dead)
			},
			wantState: StateKept, wantDir: true, wantBranch: true,
		},
		{
			name: "dead-owner-committed",
			setup: func(t *testing.T, e *Entry) {
				gitT(t, e.Path, "commit", "-q", "--allow-empty", "-m", "work of "+e.Name)
				setOwner(t, m, e.Name, dead)
			},
			wantState: StateKept, wantDir: true, wantBranch: true,
		},
		{
			name:      "live-owner-clean",
			wantState: StateActive, wantDir: true, wantBranch: true,
		},
		{
			name:      "live-owner-changed",
			setup:     func(t *testing.T, e *Entry) { writeFile(t, filepath.Join(e.Path, "README"), "edit") },
			wantState: StateActive, wantDir: true, wantBranch: true,
		},
		{
			name:      "live-owner-directory-gone",
			setup:     rmDir,
			wantState: StateActive, wantBranch: true,
		},
		{
			name: "kept-dead-owner",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "README"), "edit")
				finish(t, e)
				setOwner(t, m, e.Name, dead)
			},
			wantState: StateKept, wantDir: true, wantBranch: true,
		},
		{
			name:        "dead-owner-directory-gone",
			wantMissing: true,
			setup: func(t *testing.T, e *Entry) {
				rmDir(t, e)
				setOwner(t, m, e.Name, dead)
			},
		},
		{
			name:        "kept-directory-gone-branch-committed",
			wantMissing: true,
			setup: func(t *testing.T, e *Entry) {
				gitT(t, e.Path, "commit", "-q", "--allow-empty", "-m", "work of "+e.Name)
				finish(t, e)
				rmDir(t, e)
			},
			wantBranch: true,
		},
		{
			name:  "removed",
			setup: finish,
		},
		{
			// Kept, then merged (the way a person takes the work):
			// nothing is left that is not elsewhere.
			name: "kept-then-merged",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "merged.txt"), "work\n")
				finish(t, e)
				gitT(t, repo, "merge", "-q", "--no-ff", "--no-edit", e.Branch)
			},
			wantRemoved: true,
		},
		{
			name: "kept-then-tagged",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "tagged.txt"), "work\n")
				finish(t, e)
				gitT(t, repo, "tag", "keep-"+e.Name, e.Branch)
			},
			wantRemoved: true,
		},
		{
			name: "kept-merged-then-changed",
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "merged2.txt"), "work\n")
				finish(t, e)
				gitT(t, repo, "branch", "copy-of-"+e.Name, e.Branch)
				writeFile(t, filepath.Join(e.Path, "more.txt"), "more work\n")
			},
			wantState: StateKept, wantDir: true, wantBranch: true,
		},
		{
			name:        "kept-directory-gone-branch-merged",
			wantMissing: true,
			setup: func(t *testing.T, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "merged3.txt"), "work\n")
				finish(t, e)
				gitT(t, repo, "branch", "copy-of-"+e.Name, e.Branch)
				rmDir(t, e)
			},
		},
	}
	entries := map[string]*Entry{}
	for _, tt := range tests {
		e := create(t, m, repo, tt.name)
		entries[tt.name] = e
		if tt.setup != nil {
			tt.setup(t, e)
		}
	}

	// List tells a directory removed by hand, unless a live run owns it.
	for _, e := range list(t, m) {
		want := e.State
		switch e.Name {
		case "dead-owner-directory-gone", "kept-directory-gone-branch-committed":
			want = StateMissing
		case "live-owner-directory-gone":
			want = StateActive
		}
		if e.State != want {
			t.Errorf("List: %s is %s, want %s", e.Name, e.State, want)
		}
	}
	removed, err := m.Prune(t.Context())
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}

	var gotRemoved, wantRemoved []string
	for _, e := range removed {
		gotRemoved = append(gotRemoved, e.Name+" "+e.State)
	}
	wantStates := map[string]string{}
	wantTrees := []string{repo}
	var wantBranches []string
	for _, tt := range tests {
		if tt.wantRemoved {
			wantRemoved = append(wantRemoved, tt.name+" "+StateRemoved)
		}
		if tt.wantMissing {
			wantRemoved = append(wantRemoved, tt.name+" "+StateMissing)
		}
		if tt.wantState != "" {
			wantStates[tt.name] = tt.wantState
		}
		if tt.wantDir {
			wantTrees = append(wantTrees, entries[tt.name].Path)
		}
		if tt.wantBranch {
			wantBranches = append(wantBranches, entries[tt.name].Branch)
		}
		if got := exists(t, entries[tt.name].Path); got != tt.wantDir {
			t.Errorf("%s: directory exists = %v, want %v", tt.name, got, tt.wantDir)
		}
	}
	if diff := cmp.Diff(sorted(wantRemoved), sorted(gotRemoved)); diff != "" {
		t.Errorf("Prune returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantStates, states(t, m)); diff != "" {
		t.Errorf("inventory states (-want +got):\n%s", diff)
	}
	for _, e := range list(t, m) {
		if want := e.State == StateKept; e.Changed != want {
			t.Errorf("%s: Changed = %v, want %v", e.Name, e.Changed, want)
		}
	}
	if diff := cmp.Diff(sorted(wantTrees), worktrees(t, repo)); diff != "" {
		t.Errorf("git worktree list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sorted(wantBranches), branches(t, repo)); diff != "" {
		t.Errorf("branches (-want +got):\n%s", diff)
	}

	// Nothing is left for a second Prune to do.
	before := list(t, m)
	again, err := m.Prune(t.Context())
	if err != nil || len(again) != 0 {
		t.Errorf("second Prune = %+v, %v, want nothing", again, err)
	}
	if diff := cmp.Diff(before, list(t, m)); diff != "" {
		t.Errorf("second Prune changed the inventory (-want +got):\n%s", diff)
	}
}

func TestOwnerAlive(t *testing.T) {
	me, err := self()
	if err != nil {
		t.Fatal(err)
	}
	dead := deadProcess(t)
	tests := []struct {
		name string
		o    owner
		want bool
	}{
		{"this process", me, true},
		{"this pid, another start time", owner{me.pid, me.start + 1, me.id}, false},
		{"an exited child", dead, false},
		{"pid 0", owner{}, false},
		{"negative pid", owner{pid: -1}, false},
	}
	for _, tt := range tests {
		if got := ownerAlive(tt.o.pid, tt.o.start); got != tt.want {
			t.Errorf("%s: ownerAlive(%d, %d) = %v, want %v", tt.name, tt.o.pid, tt.o.start, got, tt.want)
		}
	}

	// An owner of another pid namespace or host is not known dead, its
	// pid gone here or not; one of an earlier boot is dead, its pid
	// alive here or not.
	here := procfs.Self()
	for _, tt := range []struct {
		name string
		e    Entry
		want bool
	}{
		{"this system, gone", Entry{OwnerPID: dead.pid, OwnerStart: dead.start, OwnerBoot: here.BootID, OwnerPidNamespace: here.PidNamespace, OwnerHost: here.Host}, false},
		{"this system, alive", Entry{OwnerPID: me.pid, OwnerStart: me.start, OwnerBoot: here.BootID, OwnerPidNamespace: here.PidNamespace, OwnerHost: here.Host}, true},
		{"another namespace", Entry{OwnerPID: dead.pid, OwnerStart: dead.start, OwnerBoot: here.BootID, OwnerPidNamespace: "pid:[1]"}, true},
		{"another host", Entry{OwnerPID: dead.pid, OwnerStart: dead.start, OwnerHost: here.Host + "-other"}, true},
		{"an earlier boot", Entry{OwnerPID: me.pid, OwnerStart: me.start, OwnerBoot: "00000000-0000-0000-0000-000000000000"}, false},
		{"an old entry", Entry{OwnerPID: me.pid, OwnerStart: me.start}, true},
	} {
		if got := tt.e.ownerAlive(); got != tt.want {
			t.Errorf("%s: Entry.ownerAlive() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestInventoryFile(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	if got := list(t, m); len(got) != 0 {
		t.Errorf("List without an inventory file = %+v, want none", got)
	}
	writeFile(t, m.Inventory, "{not json")
	_, err := m.List()
	if err == nil || !strings.Contains(err.Error(), m.Inventory) || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("List of a corrupt inventory = %v, want an error naming %s and the fix", err, m.Inventory)
	}
	if _, err := m.Prune(t.Context()); err == nil {
		t.Error("Prune of a corrupt inventory succeeded")
	}
	data, err := os.ReadFile(m.Inventory)
	if err != nil || string(data) != "{not json" {
		t.Errorf("the corrupt inventory was changed: %q, %v", data, err)
	}
}

// TestInventoryFormat pins the inventory's JSON field names, which other
// tools (and older pilots) read.
func TestInventoryFormat(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	e := create(t, m, repo, "fmt")
	if _, err := m.Finish(t.Context(), e, Run{ID: "run-9"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(m.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, _, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			keys = append(keys, k)
		}
	}
	want := []string{`"entries"`, `"name"`, `"repo"`, `"path"`, `"branch"`, `"base"`, `"run_id"`,
		`"owner_pid"`, `"owner_start"`, `"owner_boot_id"`, `"owner_pid_namespace"`, `"owner_host"`, `"created"`, `"state"`}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("inventory keys (-want +got):\n%s", diff)
	}
}

func TestManagerConfig(t *testing.T) {
	e := &Entry{Name: "x"}
	tests := []struct {
		name string
		m    Manager
		want string
	}{
		{"no Inventory", Manager{Dir: "wt"}, "Manager.Inventory is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			_, cerr := m.Create(t.Context(), ".", "x")
			_, ferr := m.Finish(t.Context(), e, Run{ID: "r"})
			_, lerr := m.List()
			_, perr := m.Prune(t.Context())
			for op, err := range map[string]error{"Create": cerr, "Finish": ferr, "List": lerr, "Prune": perr} {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s = %v, want an error containing %q", op, err, tt.want)
				}
			}
		})
	}
}

// TestForeignEntry checks that an inventory entry naming a worktree and
// branch that pilot did not make (an edited inventory) is left alone, even
// though that worktree is clean and its owner is dead.
func TestForeignEntry(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	user := filepath.Join(t.TempDir(), "mine")
	gitT(t, repo, "worktree", "add", "-q", "-b", "user-branch", user)
	writeFile(t, filepath.Join(user, "secrets.log"), "ignored, but precious\n")
	dead := deadProcess(t)
	e := Entry{Name: "user", Repo: repo, Path: user, Branch: "user-branch", Base: gitT(t, repo, "rev-parse", "HEAD"),
		OwnerPID: dead.pid, OwnerStart: dead.start, State: StateActive}
	if err := m.update(func(inv *inventory) error { inv.Entries = append(inv.Entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	check := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "was not made by this Manager") {
			t.Errorf("%s = %v, want an error saying the entry was not made by this Manager", op, err)
		}
		if !exists(t, filepath.Join(user, "secrets.log")) {
			t.Fatalf("%s deleted the user's worktree", op)
		}
		if got := gitT(t, repo, "branch", "--list", "user-branch"); got == "" {
			t.Fatalf("%s deleted the user's branch", op)
		}
		if diff := cmp.Diff(map[string]string{"user": StateActive}, states(t, m)); diff != "" {
			t.Errorf("inventory after %s (-want +got):\n%s", op, diff)
		}
	}
	removed, err := m.Prune(t.Context())
	if len(removed) != 0 {
		t.Errorf("Prune removed %+v", removed)
	}
	check("Prune", err)
	_, err = m.Finish(t.Context(), &e, Run{ID: "run"})
	check("Finish", err)
}

// TestDefaultDir checks that a Manager without Dir puts a repository's
// worktrees beside its main work tree, in a directory of mode 0700, also
// when the repository is named from one of its linked worktrees.
func TestDefaultDir(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := &Manager{Inventory: filepath.Join(t.TempDir(), "inventory.json")}
	e := create(t, m, repo, "beside")
	want := filepath.Join(filepath.Dir(repo), filepath.Base(repo)+DirSuffix)
	if e.Path != filepath.Join(want, "beside") {
		t.Errorf("worktree at %s, want it in %s", e.Path, want)
	}
	for _, dir := range []string{want, e.Path} {
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode != 0o700 {
			t.Errorf("%s has mode %v, want 0700", dir, mode)
		}
	}
	// Asked from inside the worktree, a second one goes beside the
	// repository too, not beside the worktree.
	e2 := create(t, m, e.Path, "from-a-worktree")
	if filepath.Dir(e2.Path) != want {
		t.Errorf("a worktree of a worktree is at %s, want it in %s", e2.Path, want)
	}
	got, err := m.Prepare(t.Context(), repo)
	if err != nil || got != want {
		t.Errorf("Prepare = %q, %v; want %q", got, err, want)
	}
	if _, err := m.Prepare(t.Context(), t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Errorf("Prepare of a plain directory = %v, want ErrNotRepo", err)
	}
	for _, e := range []*Entry{e2, e} {
		if kept, err := m.Finish(t.Context(), e, Run{ID: "r"}); kept || err != nil {
			t.Errorf("Finish(%s) = %v, %v", e.Name, kept, err)
		}
	}
}

// TestExplicitDirMode checks the mode of a worktree made in a given Dir.
func TestExplicitDirMode(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	e := create(t, m, repo, "private")
	for _, dir := range []string{m.Dir, e.Path, filepath.Dir(m.Inventory)} {
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode != 0o700 {
			t.Errorf("%s has mode %v, want 0700", dir, mode)
		}
	}
}

// TestFinishCommitsAsPilot checks that pilot's commit is pilot's whatever
// the environment and the repository say: no hook runs (a pre-commit hook
// that fails, a commit-msg hook that rewrites the message), no signing, and
// the author and committer are pilot even with GIT_AUTHOR_* set.
func TestFinishCommitsAsPilot(t *testing.T) {
	repo := initRepo(t)
	t.Setenv("GIT_AUTHOR_NAME", "someone else")
	t.Setenv("GIT_COMMITTER_EMAIL", "else@example.com")
	hooks := filepath.Join(repo, ".git", "hooks")
	marker := filepath.Join(t.TempDir(), "hook-ran")
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"} {
		writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\necho "+h+" >> "+marker+"\nexit 1\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitT(t, repo, "config", "commit.gpgSign", "true")
	gitT(t, repo, "config", "gpg.program", "/nonexistent/gpg")
	m := newManager(t)
	e := create(t, m, repo, "hooked")
	writeFile(t, filepath.Join(e.Path, "work.txt"), "done\n")
	kept, err := m.Finish(t.Context(), e, Run{ID: "run-7"})
	if !kept || err != nil {
		t.Fatalf("Finish = %v, %v; want the worktree kept and its work committed", kept, err)
	}
	if e.Commit == "" || e.Commit != gitT(t, repo, "rev-parse", e.Branch) {
		t.Errorf("entry's commit %q is not the branch's tip", e.Commit)
	}
	if got := gitT(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", e.Branch); got != "pilot <pilot@localhost>|pilot <pilot@localhost>|pilot: run run-7" {
		t.Errorf("pilot's commit: %q", got)
	}
	if exists(t, marker) {
		data, _ := os.ReadFile(marker)
		t.Errorf("hooks ran: %s", data)
	}
}

// TestFinishCommitFails checks a commit git refuses: the worktree is kept
// with its changes uncommitted, and the error says so.
func TestFinishCommitFails(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	e := create(t, m, repo, "locked")
	writeFile(t, filepath.Join(e.Path, "work.txt"), "done\n")
	// Another git holds the worktree's index.
	gitDir := gitT(t, e.Path, "rev-parse", "--absolute-git-dir")
	writeFile(t, filepath.Join(gitDir, "index.lock"), "")
	kept, err := m.Finish(t.Context(), e, Run{ID: "run-8"})
	if !kept || err == nil || !strings.Contains(err.Error(), "left uncommitted in "+e.Path) {
		t.Fatalf("Finish = %v, %v; want the worktree kept and an error saying the changes are uncommitted", kept, err)
	}
	if diff := cmp.Diff(map[string]string{"locked": StateKept}, states(t, m)); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
	if !exists(t, filepath.Join(e.Path, "work.txt")) {
		t.Error("the work is gone")
	}
}

func TestDiff(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := newManager(t)
	e := create(t, m, repo, "diffed")
	writeFile(t, filepath.Join(e.Path, "README"), "hello\nand more\n")
	if _, err := m.Finish(t.Context(), e, Run{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	// The repository's HEAD moves on: the diff is still against the base.
	writeFile(t, filepath.Join(repo, "other"), "x\n")
	gitT(t, repo, "add", "other")
	gitT(t, repo, "commit", "-q", "-m", "meanwhile")
	found, err := m.Lookup("pilot/diffed")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Diff(t.Context(), found, &out); err != nil {
		t.Fatal(err)
	}
	if want := gitT(t, repo, "diff", e.Base, e.Branch); strings.TrimSpace(out.String()) != want || !strings.Contains(want, "+and more") {
		t.Errorf("Diff:\n%s\nwant:\n%s", out.String(), want)
	}
	gitT(t, repo, "update-ref", "-d", "refs/heads/"+e.Branch)
	if err := Diff(t.Context(), found, io.Discard); err == nil || !strings.Contains(err.Error(), "no longer exists") {
		t.Errorf("Diff of a deleted branch = %v", err)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	err := m.update(func(inv *inventory) error {
		for _, n := range []string{"fix-a1", "fix-a2", "test-b"} {
			inv.Entries = append(inv.Entries, Entry{Name: n})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, want, err string }{
		{"fix-a1", "fix-a1", ""},
		{"pilot/fix-a2", "fix-a2", ""},
		{"test", "test-b", ""},
		{"fix", "", "give more of it"},
		{"nope", "", "no such worktree"},
		{"", "", "no such worktree"},
	} {
		e, err := m.Lookup(tt.name)
		switch {
		case tt.err == "" && (err != nil || e.Name != tt.want):
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.name, e.Name, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrNotFound)):
			t.Errorf("Lookup(%q) = %q, %v; want an ErrNotFound saying %q", tt.name, e.Name, err, tt.err)
		}
	}
}

func TestRemove(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	dead := deadProcess(t)
	tests := []struct {
		name    string
		setup   func(t *testing.T, m *Manager, e *Entry)
		force   bool
		wantErr error // nil: removed
	}{
		{name: "clean", setup: func(t *testing.T, m *Manager, e *Entry) { setOwner(t, m, e.Name, dead) }},
		{
			name: "committed-unmerged",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "w"), "x\n")
				m.Finish(t.Context(), e, Run{ID: "r"})
			},
			wantErr: ErrUnmerged,
		},
		{
			name: "committed-unmerged-forced",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "w"), "y\n")
				m.Finish(t.Context(), e, Run{ID: "r"})
			},
			force: true,
		},
		{
			name: "committed-merged",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "w"), "z\n")
				m.Finish(t.Context(), e, Run{ID: "r"})
				gitT(t, repo, "branch", "taken-"+e.Name, e.Branch)
			},
		},
		{
			name: "uncommitted",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "w"), "x\n")
				setOwner(t, m, e.Name, dead)
			},
			wantErr: ErrUnmerged,
		},
		{
			name: "uncommitted-forced",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				writeFile(t, filepath.Join(e.Path, "w"), "x\n")
				setOwner(t, m, e.Name, dead)
			},
			force: true,
		},
		{name: "in-use", force: true, wantErr: ErrInUse},
		{
			name: "directory-gone",
			setup: func(t *testing.T, m *Manager, e *Entry) {
				os.RemoveAll(e.Path)
				setOwner(t, m, e.Name, dead)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t)
			e := create(t, m, repo, "rm-"+tt.name)
			if tt.setup != nil {
				tt.setup(t, m, e)
			}
			got, err := m.Remove(t.Context(), e.Name, tt.force)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Remove = %v, want %v", err, tt.wantErr)
				}
				if _, ok := states(t, m)[e.Name]; !ok {
					t.Error("the entry is gone from the inventory")
				}
				if !slices.Contains(branches(t, repo), e.Branch) {
					t.Error("the branch is gone")
				}
				if tt.name != "directory-gone" && !exists(t, e.Path) {
					t.Error("the worktree is gone")
				}
				return
			}
			if err != nil || got.State != StateRemoved {
				t.Fatalf("Remove = %+v, %v", got, err)
			}
			if exists(t, e.Path) || slices.Contains(worktrees(t, repo), e.Path) {
				t.Errorf("the worktree %s is still there", e.Path)
			}
			if slices.Contains(branches(t, repo), e.Branch) {
				t.Errorf("the branch %s is still there", e.Branch)
			}
			if _, ok := states(t, m)[e.Name]; ok {
				t.Error("the entry is still in the inventory")
			}
		})
	}
}

// TestRemoveLeavesAForeignWorktree checks that Remove, even forced, leaves
// a directory git does not list as the entry's worktree on its branch.
func TestRemoveLeavesAForeignWorktree(t *testing.T) {
	repo := initRepo(t)
	t.Parallel()
	m := &Manager{Inventory: filepath.Join(t.TempDir(), "inv.json")}
	user := filepath.Join(t.TempDir(), "mine")
	gitT(t, repo, "worktree", "add", "-q", "-b", "user-branch", user)
	dead := deadProcess(t)
	e := Entry{Name: "mine", Repo: repo, Path: user, Branch: "pilot/mine", Base: gitT(t, repo, "rev-parse", "HEAD"),
		OwnerPID: dead.pid, OwnerStart: dead.start, State: StateKept}
	if err := m.update(func(inv *inventory) error { inv.Entries = append(inv.Entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remove(t.Context(), "mine", true); err == nil || !strings.Contains(err.Error(), "left alone") {
		t.Errorf("Remove = %v, want it refused", err)
	}
	if !exists(t, user) {
		t.Fatal("Remove deleted the user's worktree")
	}
	if removed, err := m.Prune(t.Context()); len(removed) != 0 || err != nil {
		t.Errorf("Prune = %+v, %v; want nothing removed", removed, err)
	}
	if !exists(t, user) {
		t.Fatal("Prune deleted the user's worktree")
	}
}

// Salvage takes over a worktree its dead owner left: what it changed is
// committed on its branch and the entry kept; a clean one is removed. A
// worktree whose owner lives, or is not known dead (another pid
// namespace), is left alone, and so is one already finished.
func TestSalvage(t *testing.T) {
	repo := initRepo(t)
	m := newManager(t)
	dead := deadProcess(t)
	create := func(t *testing.T, name string) *Entry {
		t.Helper()
		e, err := m.Create(t.Context(), repo, name)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	run := Run{Job: "j (p:code), taken over"}

	e := create(t, "left-work")
	if err := os.WriteFile(filepath.Join(e.Path, "half.txt"), []byte("half done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Salvage(t.Context(), e.Name, run); err == nil || !strings.Contains(err.Error(), "not known dead") {
		t.Errorf("Salvage of a live owner's worktree: %v, want it left alone", err)
	}
	setOwner(t, m, e.Name, dead)
	got, kept, err := m.Salvage(t.Context(), e.Name, run)
	if err != nil || !kept || got.State != StateKept || got.Commit == "" {
		t.Fatalf("Salvage of a dead owner's worktree with work: %+v, kept %v, %v", got, kept, err)
	}
	if s := gitT(t, repo, "show", e.Branch+":half.txt"); s != "half done" {
		t.Errorf("half.txt on %s = %q", e.Branch, s)
	}
	if s := gitT(t, repo, "log", "-1", "--format=%s", e.Branch); s != "pilot: job "+run.Job {
		t.Errorf("the commit's subject %q", s)
	}
	if again, kept, err := m.Salvage(t.Context(), e.Name, run); err != nil || !kept || again.Commit != got.Commit {
		t.Errorf("Salvage again: %+v, kept %v, %v; want the kept entry as it is", again, kept, err)
	}

	clean := create(t, "left-clean")
	setOwner(t, m, clean.Name, dead)
	if got, kept, err := m.Salvage(t.Context(), clean.Name, run); err != nil || kept || got.State != StateRemoved {
		t.Errorf("Salvage of a clean worktree: %+v, kept %v, %v; want it removed", got, kept, err)
	}
	if _, err := os.Lstat(clean.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clean worktree's directory: %v, want it gone", err)
	}

	foreign := create(t, "foreign")
	err = m.update(func(inv *inventory) error {
		x := &inv.Entries[inv.find(foreign.Name)]
		x.OwnerPID, x.OwnerStart, x.OwnerPidNamespace = dead.pid, dead.start, "pid:[1]"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Salvage(t.Context(), foreign.Name, run); err == nil {
		t.Error("Salvage of another pid namespace's worktree succeeded; want it left alone")
	}
	if _, err := os.Lstat(foreign.Path); err != nil {
		t.Errorf("the foreign worktree: %v", err)
	}
	if _, _, err := m.Salvage(t.Context(), "no-such", run); !errors.Is(err, ErrNotFound) {
		t.Errorf("Salvage of no entry: %v, want ErrNotFound", err)
	}
}
