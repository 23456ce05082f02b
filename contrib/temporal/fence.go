package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
)

// Refs of a job in its repository.
const (
	// FenceRefPrefix + job name is the job's fence: a ref to a blob
	// holding the current generation's ownership record (JSON). Every
	// change to it is a compare-and-swap (git update-ref with the old
	// value).
	FenceRefPrefix = "refs/pilot/fence/"
	// BranchPrefix + job name is the job's branch: its work, published
	// once, by the generation that holds the fence, in the same ref
	// transaction that closes the fence.
	BranchPrefix = "pilot/job/"
	// WorkBranchPrefix + job name is the branch checked out in the
	// job's worktree, where its agent commits.
	WorkBranchPrefix = "pilot/work/"
)

// Fence states.
const (
	stateRunning = "running"
	stateDone    = "done"
)

// ErrFenced means a newer generation holds the job's fence: this one may
// no longer run or commit the job's work.
var ErrFenced = errors.New("temporal: a newer generation holds the job's fence")

// Owner is the ownership record a job's fence ref points to.
type Owner struct {
	Job string `json:"job"`
	// Generation counts the launches of the job: a replacement commits
	// Generation+1 before it launches anything.
	Generation int `json:"generation"`
	// State is "running" while the generation runs and "done" once its
	// verdict is in Verdict.
	State string `json:"state"`
	// Host, Pid and PidStart name the process that owns the generation
	// (its start time, in clock ticks since boot on Linux, tells a
	// reused pid apart); Attempt is the Temporal activity attempt.
	Host     string `json:"host"`
	Pid      int    `json:"pid"`
	PidStart uint64 `json:"pid_start,omitempty"`
	// Boot is the host's boot id when the generation launched (Linux):
	// after a reboot a pid and start time may come again, and no process
	// of the recorded boot lives.
	Boot    string `json:"boot,omitempty"`
	Attempt int32  `json:"attempt,omitempty"`
	// RunID, Record, AgentPid and AgentStart name the generation's pilot
	// run and its worker once it started.
	RunID      string `json:"run_id,omitempty"`
	Record     string `json:"record,omitempty"`
	AgentPid   int    `json:"agent_pid,omitempty"`
	AgentStart uint64 `json:"agent_start,omitempty"`
	// Verdict is the generation's verdict once State is "done"; Commit
	// is the commit published on the job's branch with it, if any.
	Verdict *pilot.Verdict `json:"verdict,omitempty"`
	Commit  string         `json:"commit,omitempty"`
	// Error is set instead of Verdict when pilot itself failed.
	Error string `json:"error,omitempty"`
}

// jobName is what a job name may be: it names refs and a directory.
var jobName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// checkJobName refuses a job name that cannot name a ref and a directory.
func checkJobName(name string) error {
	if name == "" {
		return errors.New("temporal: job has no name: set Job.Name (letters, digits, '.', '_', '-')")
	}
	if !jobName.MatchString(name) || strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") {
		return fmt.Errorf("temporal: job name %q cannot name a git ref and a directory: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit, without \"..\" or a \".lock\" suffix", name)
	}
	return nil
}

// A fence is one job's fence ref in one repository.
type fence struct {
	repo string
	job  string
}

func (f fence) ref() string { return FenceRefPrefix + f.job }

// git runs git in the repository and returns its trimmed stdout.
func git(ctx context.Context, dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", &gitError{args: args, err: err, stderr: strings.TrimSpace(errb.String())}
	}
	return strings.TrimSpace(out.String()), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, e.stderr)
}

func (e *gitError) Unwrap() error { return e.err }

// read returns the fence's object id and owner; oid is empty when the job
// has no fence yet.
func (f fence) read(ctx context.Context) (oid string, o Owner, err error) {
	oid, err = git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", f.ref())
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && ge.stderr == "" {
			return "", Owner{}, nil // no such ref
		}
		return "", Owner{}, err
	}
	data, err := git(ctx, f.repo, nil, "cat-file", "blob", oid)
	if err != nil {
		return "", Owner{}, err
	}
	if err := json.Unmarshal([]byte(data), &o); err != nil {
		return "", Owner{}, fmt.Errorf("temporal: fence %s of %s holds no ownership record: %w", f.ref(), f.repo, err)
	}
	return oid, o, nil
}

// blob stores o as a blob and returns its id.
func (f fence) blob(ctx context.Context, o Owner) (string, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return "", err
	}
	return git(ctx, f.repo, data, "hash-object", "-w", "--stdin")
}

// swap moves the fence from old (empty: no fence yet) to o and returns
// the new id; ErrFenced when the fence is no longer old.
func (f fence) swap(ctx context.Context, old string, o Owner) (string, error) {
	oid, err := f.blob(ctx, o)
	if err != nil {
		return "", err
	}
	if err := f.transaction(ctx, old, f.move(oid, old)); err != nil {
		return "", err
	}
	return oid, nil
}

// publish closes the fence (old → done) and creates the job's branch at
// commit, in one ref transaction: both happen or neither. The branch must
// not exist yet, so a job's work is published at most once.
func (f fence) publish(ctx context.Context, old string, done Owner, commit string) (string, error) {
	oid, err := f.blob(ctx, done)
	if err != nil {
		return "", err
	}
	tx := f.move(oid, old) + fmt.Sprintf("create refs/heads/%s%s %s\n", BranchPrefix, f.job, commit)
	if err := f.transaction(ctx, old, tx); err != nil {
		return "", err
	}
	return oid, nil
}

// move is the update-ref command that moves the fence from old (empty:
// absent) to oid.
func (f fence) move(oid, old string) string {
	if old == "" {
		return fmt.Sprintf("create %s %s\n", f.ref(), oid)
	}
	return fmt.Sprintf("update %s %s %s\n", f.ref(), oid, old)
}

// StaleLockAge is how old a lock file of a job's refs must be before a
// fence change takes it for one a crashed git left: git holds a ref's lock
// only while it writes the ref, for milliseconds, so one older than this
// wedges the job forever if nobody removes it. The age is the lock's mtime
// against this host's clock.
const StaleLockAge = time.Minute

// transaction applies the update-ref commands atomically, the fence's
// expected value being old; ErrFenced when the fence moved on. A lock
// file of the fence or the job's branch older than StaleLockAge is
// removed, and the transaction tried again, once.
func (f fence) transaction(ctx context.Context, old, tx string) error {
	_, err := git(ctx, f.repo, []byte(tx), "update-ref", "--stdin")
	if err != nil && f.clearStaleRefLocks(ctx, time.Now()) {
		_, err = git(ctx, f.repo, []byte(tx), "update-ref", "--stdin")
	}
	if err == nil {
		return nil
	}
	if now, _, rerr := f.read(ctx); rerr == nil && now != old {
		return fmt.Errorf("%w (%s is %s, not %s)", ErrFenced, f.ref(), orNone(now), orNone(old))
	}
	return err
}

// clearStaleRefLocks removes the lock files of the job's fence and branch
// that are older than StaleLockAge at now, and says whether it removed
// any. (A repository with the reftable backend has no such files.)
func (f fence) clearStaleRefLocks(ctx context.Context, now time.Time) bool {
	common, err := git(ctx, f.repo, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return false
	}
	removed := false
	for _, ref := range []string{f.ref(), "refs/heads/" + BranchPrefix + f.job} {
		lock := filepath.Join(common, filepath.FromSlash(ref)+".lock")
		st, err := os.Stat(lock)
		if err != nil || now.Sub(st.ModTime()) < StaleLockAge {
			continue
		}
		if os.Remove(lock) == nil {
			removed = true
		}
	}
	return removed
}

// repairBranch makes sure a done generation's published commit is the
// job's branch. Git commits a ref transaction's refs one rename at a
// time: a crash between them can leave the fence done and the branch
// absent (its lock file left behind, which transaction's stale-lock
// recovery removes). A branch at another commit is an error: something
// other than the fence wrote it.
func (f fence) repairBranch(ctx context.Context, commit string) error {
	ref := "refs/heads/" + BranchPrefix + f.job
	if at, err := git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", ref); err == nil {
		if at != commit {
			return fmt.Errorf("temporal: job %s's branch %s is at %s, but its fence published %s: something other than the fence moved it", f.job, ref, at, commit)
		}
		return nil
	}
	// Created only if still absent; a stale lock is cleared once.
	create := []byte(fmt.Sprintf("create %s %s\n", ref, commit))
	_, err := git(ctx, f.repo, create, "update-ref", "--stdin")
	if err != nil && f.clearStaleRefLocks(ctx, time.Now()) {
		_, err = git(ctx, f.repo, create, "update-ref", "--stdin")
	}
	if err != nil {
		// Another delivery may have repaired it meanwhile.
		if at, rerr := git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", ref); rerr == nil && at == commit {
			return nil
		}
		return fmt.Errorf("temporal: job %s's fence published %s, but its branch %s cannot be created: %v", f.job, commit, ref, err)
	}
	return nil
}

func orNone(oid string) string {
	if oid == "" {
		return "absent"
	}
	return oid
}

// worktree returns the job's worktree under dir, making it (on the job's
// work branch, from base) when it is not there yet. A worktree a former
// generation left on this host is reused as it is.
func (f fence) worktree(ctx context.Context, dir, base string) (string, error) {
	wt := filepath.Join(dir, f.job)
	if _, err := os.Stat(filepath.Join(wt, ".git")); err == nil {
		return wt, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	branch := WorkBranchPrefix + f.job
	if _, err := git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err == nil {
		// The branch outlived its worktree directory.
		_, _ = git(ctx, f.repo, nil, "worktree", "prune")
		_, err = git(ctx, f.repo, nil, "worktree", "add", "-q", wt, branch)
		return wt, err
	}
	_, err := git(ctx, f.repo, nil, "worktree", "add", "-q", "-b", branch, wt, base)
	return wt, err
}

// clearStaleLocks removes the git lock files a worker ended mid-command
// (killed with its pilot, or cancelled) leaves in the job's worktree: its
// index, its HEAD and its work branch. Only the generation holding the
// fence calls it, once the former generation's processes on this host are
// gone, so no live git command of the job holds them.
func (f fence) clearStaleLocks(ctx context.Context, wt string) error {
	gitDir, err := git(ctx, wt, nil, "rev-parse", "--path-format=absolute", "--git-dir")
	if err != nil {
		return err
	}
	common, err := git(ctx, wt, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return err
	}
	for _, p := range []string{
		filepath.Join(gitDir, "index.lock"),
		filepath.Join(gitDir, "HEAD.lock"),
		filepath.Join(common, "refs", "heads", filepath.FromSlash(WorkBranchPrefix+f.job)+".lock"),
	} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
