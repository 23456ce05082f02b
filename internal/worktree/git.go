package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A GitError is a git command that failed. Its message holds the command and
// what git said on stderr.
type GitError struct {
	Dir    string   // the directory given to git with -C
	Args   []string // the arguments after -C Dir
	Stderr string   // git's standard error, trimmed; its last 4 KiB at most
	Err    error    // why the command failed: an *exec.ExitError, or why git could not start
}

func (e *GitError) Error() string {
	cmd := "git -C " + e.Dir + " " + strings.Join(e.Args, " ")
	if e.Stderr == "" {
		return cmd + ": " + e.Err.Error()
	}
	return cmd + ": " + e.Stderr + " (" + e.Err.Error() + ")"
}

func (e *GitError) Unwrap() error { return e.Err }

// stderrLimit bounds how much of git's stderr an error keeps. Hooks (such as
// post-checkout) can write a lot; git's own "fatal:" line comes last.
const stderrLimit = 4 << 10

// waitDelay bounds how long a git command that was cancelled, or that left a
// hook holding its pipes, is waited for.
const waitDelay = 5 * time.Second

// git runs git -C dir args... and returns its standard output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	return gitEnvArgs(ctx, dir, nil, args...)
}

// gitEnvArgs is git with env added to git's environment (over what
// gitEnv keeps).
func gitEnvArgs(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	var stdout bytes.Buffer
	err := gitTo(ctx, dir, &stdout, env, args...)
	return stdout.String(), err
}

// gitTo runs git -C dir args... with its standard output going to stdout
// and env added to its environment.
func gitTo(ctx context.Context, dir string, stdout io.Writer, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	// Later duplicates win: env overrides what gitEnv keeps.
	cmd.Env = append(gitEnv(os.Environ()), env...)
	stderr := &tailBuffer{max: stderrLimit}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	// git may run hooks; on cancellation end them with it.
	killGroupOnCancel(cmd)
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			err = fmt.Errorf("%w: worktree jobs need the git CLI (install git, or drop \"worktree\": true)", err)
		}
		return &GitError{Dir: dir, Args: args, Stderr: stderr.String(), Err: err}
	}
	return nil
}

// gitWorktree runs git -C repo worktree args... holding repo's worktree
// lock. Every git worktree command reads the administrative files of all the
// repository's worktrees, and git writes them without a lock of its own: a
// concurrent git worktree add can make another fail ("failed to read
// .git/worktrees/x/commondir"), and a git worktree prune can even delete a
// worktree being added. So pilot runs its own git worktree commands in one
// repository one at a time, across processes, under an flock on
// pilot-worktree.lock in the repository's git directory. Commands
// not run by pilot are not covered.
func gitWorktree(ctx context.Context, repo string, args ...string) (string, error) {
	out, err := git(ctx, repo, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	common := strings.TrimSuffix(out, "\n")
	if !filepath.IsAbs(common) {
		common = filepath.Join(repo, common)
	}
	l, err := lockFile(filepath.Join(common, "pilot-worktree.lock"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return git(ctx, repo, append([]string{"worktree"}, args...)...)
}

// gitEnv is env without the variables that would point git at another
// repository, index or configuration than the one -C names: a pilot started
// from a git hook inherits GIT_DIR and GIT_INDEX_FILE, for one. Messages are
// in the C locale (CheckRepo reads one), git never prompts, and read-only
// commands such as git status take no optional locks, so they do not collide
// with concurrent commands in the same repository.
func gitEnv(env []string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if dropEnv[name] || strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

var dropEnv = map[string]bool{
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_INDEX_FILE":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_COMMON_DIR":                   true,
	"GIT_NAMESPACE":                    true,
	"GIT_PREFIX":                       true,
	"GIT_CEILING_DIRECTORIES":          true,
	"GIT_DISCOVERY_ACROSS_FILESYSTEM":  true,
	"GIT_QUARANTINE_PATH":              true,
	"GIT_CONFIG":                       true,
	"GIT_CONFIG_PARAMETERS":            true,
	"GIT_CONFIG_COUNT":                 true,
	"GIT_TERMINAL_PROMPT":              true,
	"GIT_OPTIONAL_LOCKS":               true,
	"LC_ALL":                           true,
	"LANGUAGE":                         true,
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = b.buf[:copy(b.buf, b.buf[over:])]
		b.cut = true
	}
	return len(p), nil
}

// String is the kept text, trimmed, marked with "…" when its start was cut.
func (b *tailBuffer) String() string {
	s := strings.TrimSpace(string(b.buf))
	if b.cut {
		s = "…" + s
	}
	return s
}
