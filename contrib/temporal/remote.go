package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// A job's repository may be a git remote (Job.Repo a URL): each worker
// then works in a clone of its own (Activities.CacheDir), and every change
// of the job's refs on the remote is one atomic push whose expected old
// values the server checks under its ref locks (git push --atomic
// --force-with-lease=REF:OLD): a compare-and-swap, as update-ref is on a
// local repository. A server that does not offer atomic pushes is refused.

// WorkRefPrefix + job name + "/g" + generation is where a generation that
// ends pushes its worktree's HEAD on a remote repository, so that the next
// generation, on any host, starts from its commits. Only that generation
// writes it; it is no part of the fence.
const WorkRefPrefix = "refs/pilot/work/"

// scpLike is git's user@host:path form of an ssh URL.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:`)

// isRemote reports whether repo names a git remote (a URL) rather than a
// path on this host.
func isRemote(repo string) bool {
	return strings.Contains(repo, "://") || scpLike.MatchString(repo)
}

// remoteRefAt returns the object id of ref on the remote; empty when it
// has none.
func (f fence) remoteRefAt(ctx context.Context, ref string) (string, error) {
	out, err := git(ctx, f.repo, nil, "ls-remote", f.remote, ref)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		oid, name, ok := strings.Cut(l, "\t")
		if ok && name == ref {
			return oid, nil
		}
	}
	return "", nil
}

// seenFence is where the clone keeps the fence as it last fetched it.
func (f fence) seenFence() string { return "refs/pilot/seen/fence/" + f.job }

// saw records in the clone that the fence is now oid (this host moved it
// there), so that the job's worktree reads the fence it runs under at
// refs/pilot/seen/fence/JOB; nothing without a remote.
func (f fence) saw(ctx context.Context, oid string) {
	if f.remote != "" {
		_, _ = git(ctx, f.repo, nil, "update-ref", f.seenFence(), oid)
	}
}

// fetchFence fetches the remote's fence into the clone and returns its id
// (empty: no fence yet). The blob and the id come from one fetch, so they
// agree even while the fence moves.
func (f fence) fetchFence(ctx context.Context) (string, error) {
	oid, err := f.remoteRefAt(ctx, f.ref())
	if err != nil || oid == "" {
		return "", err
	}
	if err := f.fetchSeen(ctx, f.ref(), f.seenFence()); err != nil {
		if now, rerr := f.remoteRefAt(ctx, f.ref()); rerr == nil && now == "" {
			return "", nil // gone since: no git deletes a fence, but say what is there
		}
		return "", err
	}
	return git(ctx, f.repo, nil, "rev-parse", "--verify", f.seenFence())
}

// fetchSeen fetches the remote's ref into the clone's seen, one of this
// host's own refs/pilot/seen/ refs. Another attempt on this host may be
// writing that ref at the same moment (a generation's renewal records
// the fence it moved, saw, while a new attempt of the job reads it), and
// git then refuses to lock it: the fetch is tried again, a few times, a
// tenth of a second and more apart, while ctx lasts.
func (f fence) fetchSeen(ctx context.Context, ref, seen string) error {
	var err error
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		_, err = git(ctx, f.repo, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", f.remote, "+"+ref+":"+seen)
		var ge *gitError
		if err == nil || !errors.As(err, &ge) || !strings.Contains(ge.stderr, "cannot lock ref") || wait > 3*time.Second {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// push applies tx to the remote in one atomic push: every ref moves from
// its old value (absent, when old is empty) to its new one, or none does.
func (f fence) push(ctx context.Context, tx []refUpdate) error {
	args := []string{"push", "-q", "--atomic", "--no-verify", "--porcelain"}
	var specs []string
	for _, u := range tx {
		args = append(args, "--force-with-lease="+u.ref+":"+u.old)
		specs = append(specs, u.new+":"+u.ref)
	}
	args = append(append(args, f.remote), specs...)
	_, err := git(ctx, f.repo, nil, args...)
	var ge *gitError
	if errors.As(err, &ge) && strings.Contains(ge.stderr, "does not support --atomic") {
		return fmt.Errorf("temporal: the git server of %s does not offer atomic pushes, which the job's fence needs (a compare-and-swap of several refs at once): use a server that does (git 2.4 or later's receive-pack)", f.remote)
	}
	return err
}

// pushRetrying applies tx, whose first update moves the fence from old,
// by push, and tries again when the server could not be reached or
// failed (a restart, a cut connection): a few times, a quarter, a half
// and a whole second apart, while ctx lasts. A push the server applied
// but whose answer was lost shows as the fence at tx's new value: done.
// ErrFenced when the fence moved elsewhere.
func (f fence) pushRetrying(ctx context.Context, old string, tx []refUpdate) error {
	var err error
	for wait := 250 * time.Millisecond; ; wait *= 2 {
		if err = f.push(ctx, tx); err == nil {
			return nil
		}
		now, rerr := f.remoteRefAt(ctx, f.ref())
		switch {
		case rerr == nil && now == tx[0].new:
			return nil // it landed
		case rerr == nil && now != old:
			return fmt.Errorf("%w (%s is %s, not %s)", ErrFenced, f.ref(), orNone(now), orNone(old))
		case rerr == nil && !retryablePush(err):
			return err // the server refused it for another reason
		case wait > time.Second:
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// retryablePush reports whether a failed push may pass when tried again:
// the server was not reached, or hung up, rather than refusing it.
func retryablePush(err error) bool {
	var ge *gitError
	if !errors.As(err, &ge) {
		return false
	}
	refused := strings.Contains(ge.stderr, "atomic push failed") || strings.Contains(ge.stderr, "[rejected]") ||
		strings.Contains(ge.stderr, "does not support --atomic")
	return !refused && strings.Contains(ge.stderr, "fatal:")
}

// workRef is generation gen's pushed work on the remote.
func (f fence) workRef(gen int) string { return fmt.Sprintf("%s%s/g%d", WorkRefPrefix, f.job, gen) }

// pushWork pushes generation gen's work (its worktree's HEAD) to the
// remote; nothing without a remote.
func (f fence) pushWork(ctx context.Context, wt string, gen int) error {
	if f.remote == "" || wt == "" {
		return nil
	}
	head, err := git(ctx, wt, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return err
	}
	_, err = git(ctx, f.repo, nil, "push", "-q", "--no-verify", "--force", f.remote, head+":"+f.workRef(gen))
	return err
}

// fetchWork fetches the work generation gen pushed and returns its commit;
// empty when it pushed none (or there is no remote).
func (f fence) fetchWork(ctx context.Context, gen int) (string, error) {
	if f.remote == "" {
		return "", nil
	}
	oid, err := f.remoteRefAt(ctx, f.workRef(gen))
	if err != nil || oid == "" {
		return "", err
	}
	seen := fmt.Sprintf("refs/pilot/seen/work/%s/g%d", f.job, gen)
	if err := f.fetchSeen(ctx, f.workRef(gen), seen); err != nil {
		return "", err
	}
	return git(ctx, f.repo, nil, "rev-parse", "--verify", seen+"^{commit}")
}

// resolveBase returns the commit base names in the repository, fetched
// into the clone when the repository is a remote.
func (f fence) resolveBase(ctx context.Context, base string) (string, error) {
	if f.remote == "" {
		return git(ctx, f.repo, nil, "rev-parse", "--verify", base+"^{commit}")
	}
	seen := "refs/pilot/seen/base/" + f.job
	if _, err := git(ctx, f.repo, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", f.remote, "+"+base+":"+seen); err != nil {
		// A commit id the server will not serve by name may be here.
		if c, lerr := git(ctx, f.repo, nil, "rev-parse", "--verify", base+"^{commit}"); lerr == nil {
			return c, nil
		}
		return "", err
	}
	return git(ctx, f.repo, nil, "rev-parse", "--verify", seen+"^{commit}")
}

// haveCommit makes sure commit c, which another host may have chosen (a
// job's base, recorded in its fence), is in the clone: fetched by its id
// when it is not. Nothing without a remote.
func (f fence) haveCommit(ctx context.Context, c string) error {
	if f.remote == "" {
		return nil
	}
	if _, err := git(ctx, f.repo, nil, "cat-file", "-e", c+"^{commit}"); err == nil {
		return nil
	}
	if _, err := git(ctx, f.repo, nil, "fetch", "-q", "--no-tags", "--no-write-fetch-head", f.remote, "+"+c+":refs/pilot/seen/base/"+f.job); err != nil {
		return fmt.Errorf("temporal: job %s's base %s is not in this host's clone of %s and cannot be fetched by its id (the server must serve reachable commits by id, as git's protocol v2 does): %w", f.job, c, f.remote, err)
	}
	return nil
}

// cloneLocks serializes the making of each clone in this process.
var cloneLocks sync.Map

// clone returns the path of this host's clone of the remote url under dir
// (a bare repository named by a hash of the URL), made on first use.
func clone(ctx context.Context, dir, url string) (string, error) {
	sum := sha256.Sum256([]byte(url))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".git")
	mu, _ := cloneLocks.LoadOrStore(path, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(filepath.Join(path, "HEAD")); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("temporal: making the clone cache %s: %w", dir, err)
	}
	// Made beside and renamed into place: a crash leaves no half clone
	// where the next call would take it for one.
	tmp, err := os.MkdirTemp(dir, ".clone-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if _, err := git(ctx, dir, nil, "init", "-q", "--bare", tmp); err != nil {
		return "", err
	}
	if _, err := git(ctx, tmp, nil, "config", "remote.origin.url", url); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}
