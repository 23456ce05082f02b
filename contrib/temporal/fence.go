package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/worktrees"
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
	// WorkBranchPrefix + job name + "/g" + generation is the branch
	// checked out in that generation's worktree, where its agent commits;
	// the next generation starts from it.
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
	// Lease counts the running generation's renewals of the fence (one
	// each heartbeat interval, each a compare-and-swap, so every renewal
	// is a new record); LeaseMS is how long after a renewal its agent may
	// run without the next one. An owner that cannot renew ends its
	// agent's tree well inside it; a generation that would take the job
	// over from another host waits, on its own clock, LeaseMS and a
	// quarter more from the last renewal it saw. No wall clock is
	// compared across hosts.
	Lease   int64 `json:"lease,omitempty"`
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Base is the commit the job's first generation started from (Job.Base
	// resolved): what a published commit must descend from.
	Base string `json:"base,omitempty"`
}

// lease is o's lease, or def for a record that names none.
func (o Owner) lease(def time.Duration) time.Duration {
	if o.LeaseMS > 0 {
		return time.Duration(o.LeaseMS) * time.Millisecond
	}
	return def
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

// A fence is one job's fence ref in one repository. The repository is
// repo itself, or, when remote is set, the git remote at that URL, of which
// repo is this host's clone (the clone cache): objects are written and
// read there, refs moved on the remote by atomic pushes.
type fence struct {
	repo   string
	job    string
	remote string
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
	if f.remote != "" {
		oid, err = f.fetchFence(ctx)
	} else {
		oid, err = f.refAt(ctx, f.ref())
	}
	if err != nil || oid == "" {
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

// refAt returns the object id ref names in the repository; empty when
// there is no such ref.
func (f fence) refAt(ctx context.Context, ref string) (string, error) {
	if f.remote != "" {
		return f.remoteRefAt(ctx, ref)
	}
	oid, err := git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", ref)
	var ge *gitError
	if errors.As(err, &ge) && ge.stderr == "" {
		return "", nil // no such ref
	}
	return oid, err
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
	if err := f.transaction(ctx, old, []refUpdate{{f.ref(), oid, old}}); err != nil {
		return "", err
	}
	f.saw(ctx, oid)
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
	tx := []refUpdate{{f.ref(), oid, old}, {f.branch(), commit, ""}}
	if err := f.transaction(ctx, old, tx); err != nil {
		return "", err
	}
	f.saw(ctx, oid)
	return oid, nil
}

// branch is the job's branch, as a full ref name.
func (f fence) branch() string { return "refs/heads/" + BranchPrefix + f.job }

// A refUpdate moves ref from old (empty: the ref must not exist) to new.
type refUpdate struct{ ref, new, old string }

// updateRefInput is the update-ref --stdin commands of tx.
func updateRefInput(tx []refUpdate) []byte {
	var b strings.Builder
	for _, u := range tx {
		if u.old == "" {
			fmt.Fprintf(&b, "create %s %s\n", u.ref, u.new)
		} else {
			fmt.Fprintf(&b, "update %s %s %s\n", u.ref, u.new, u.old)
		}
	}
	return []byte(b.String())
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
func (f fence) transaction(ctx context.Context, old string, tx []refUpdate) error {
	var err error
	if f.remote != "" {
		return f.pushRetrying(ctx, old, tx)
	} else {
		_, err = git(ctx, f.repo, updateRefInput(tx), "update-ref", "--stdin")
		if err != nil && f.clearStaleRefLocks(ctx, time.Now()) {
			_, err = git(ctx, f.repo, updateRefInput(tx), "update-ref", "--stdin")
		}
	}
	if err == nil {
		return nil
	}
	if now, rerr := f.refAt(ctx, f.ref()); rerr == nil && now != old {
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
	ref := f.branch()
	at, err := f.refAt(ctx, ref)
	if err != nil {
		return err
	}
	if at != "" {
		if at != commit {
			return fmt.Errorf("temporal: job %s's branch %s is at %s, but its fence published %s: something other than the fence moved it", f.job, ref, at, commit)
		}
		return nil
	}
	// Created only if still absent; a stale lock is cleared once.
	create := []refUpdate{{ref, commit, ""}}
	if f.remote != "" {
		err = f.push(ctx, create)
	} else {
		_, err = git(ctx, f.repo, updateRefInput(create), "update-ref", "--stdin")
		if err != nil && f.clearStaleRefLocks(ctx, time.Now()) {
			_, err = git(ctx, f.repo, updateRefInput(create), "update-ref", "--stdin")
		}
	}
	if err != nil {
		// Another delivery may have repaired it meanwhile.
		if at, rerr := f.refAt(ctx, ref); rerr == nil && at == commit {
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

// workBranch is generation gen's work branch.
func (f fence) workBranch(gen int) string {
	return fmt.Sprintf("%s%s/g%d", WorkBranchPrefix, f.job, gen)
}

// worktree makes generation gen's worktree, dir/job/g<gen>, on the
// generation's own work branch, from start. Only the generation holding
// the fence makes it, and a generation holds the fence once, so whatever
// is at that path is a leftover of this generation's own earlier try
// (a crash inside git worktree add) and is replaced. Nothing else is
// touched: no other generation's worktree, no global prune.
func (f fence) worktree(ctx context.Context, dir string, gen int, start string) (string, error) {
	wt := filepath.Join(dir, f.job, fmt.Sprintf("g%d", gen))
	if err := os.RemoveAll(wt); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(wt), 0o755); err != nil {
		return "", err
	}
	_, err := git(ctx, f.repo, nil, "worktree", "add", "-q", "-f", "-B", f.workBranch(gen), wt, start)
	return wt, err
}

// continueIn moves generation prev's worktree under dir, if it is on this
// host, to generation gen's work branch, keeping its files as they are,
// and returns it; "" when there is none. Only for a prev that is done:
// its agent is gone, and nothing else uses the worktree. The git locks a
// worker ended mid-command left (its index, its HEAD) are removed first.
func (f fence) continueIn(ctx context.Context, dir string, prev, gen int) (string, error) {
	wt := filepath.Join(dir, f.job, fmt.Sprintf("g%d", prev))
	if _, err := os.Stat(filepath.Join(wt, ".git")); err != nil {
		return "", nil
	}
	gitDir, err := git(ctx, wt, nil, "rev-parse", "--path-format=absolute", "--git-dir")
	if err != nil {
		return "", err
	}
	for _, lock := range []string{"index.lock", "HEAD.lock"} {
		if err := os.Remove(filepath.Join(gitDir, lock)); err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	_, err = git(ctx, wt, nil, "checkout", "-q", "-B", f.workBranch(gen))
	return wt, err
}

// startOf is where generation prev+1's work starts: the commits of the
// latest generation up to prev that has a work branch, else base.
func (f fence) startOf(ctx context.Context, prev int, base string) string {
	// A generation that never made its worktree (superseded, or its
	// host gone, before it did) has no work branch: it would have
	// started from the one before it, so the next one does. Stopping at
	// it would drop the commits of a generation before it, such as one
	// whose agent finished its work after its pilot died.
	for g := prev; g > 0; g-- {
		if c, err := git(ctx, f.repo, nil, "rev-parse", "-q", "--verify", "refs/heads/"+f.workBranch(g)+"^{commit}"); err == nil {
			return c
		}
		if c, err := f.fetchWork(ctx, g); err == nil && c != "" {
			return c // another host's generation, as it pushed its work
		}
	}
	return base
}

// mergeJobs returns base with the published branches of jobs merged in,
// in order (worktrees.Git.Merge: no work tree touched, a conflict a
// *worktrees.Conflict). On a remote the branches are fetched first.
func (f fence) mergeJobs(ctx context.Context, base string, jobs []string) (string, error) {
	var refs []string
	branchOf := map[string]string{} // the clone's ref -> the job's branch
	for _, j := range jobs {
		ref := "refs/heads/" + BranchPrefix + j
		if f.remote != "" {
			seen := "refs/pilot/seen/dep/" + j
			if _, err := git(ctx, f.repo, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", f.remote, "+"+ref+":"+seen); err != nil {
				return "", fmt.Errorf("temporal: job %s starts from job %s's work, whose branch %s cannot be fetched: %w", f.job, j, ref, err)
			}
			branchOf[seen] = ref
			ref = seen
		}
		refs = append(refs, ref)
	}
	c, err := worktrees.New(os.TempDir(), "").Merge(ctx, f.repo, base, refs)
	if err != nil {
		var conflict *worktrees.Conflict
		if errors.As(err, &conflict) {
			if b, ok := branchOf[conflict.Branch]; ok {
				conflict.Branch = b
			}
			for i, m := range conflict.Merged {
				if b, ok := branchOf[m]; ok {
					conflict.Merged[i] = b
				}
			}
		}
		return "", fmt.Errorf("temporal: job %s starts from its dependencies' work: %w", f.job, err)
	}
	return c, nil
}

// publishable checks that the worktree wt holds the generation's whole
// work, committed, on top of base: a clean tree (untracked files count)
// whose HEAD descends from base. It returns HEAD.
func publishable(ctx context.Context, wt, base string) (string, error) {
	head, err := git(ctx, wt, nil, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if _, err := git(ctx, wt, nil, "merge-base", "--is-ancestor", base, head); err != nil {
		return "", fmt.Errorf("temporal: the worktree's HEAD %s does not descend from the job's base %s (%v): the job's branch publishes work done on its base only", head, base, err)
	}
	dirty, err := git(ctx, wt, nil, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return "", err
	}
	if dirty != "" {
		lines := strings.Split(dirty, "\n")
		n := len(lines)
		if len(lines) > 5 {
			lines = append(lines[:5], "…")
		}
		return "", fmt.Errorf("temporal: the worker succeeded but left %d uncommitted changes in its worktree %s (%s): the job's branch publishes commits only, so have the task commit its work", n, wt, strings.Join(lines, "; "))
	}
	return head, nil
}
