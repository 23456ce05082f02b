package temporal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

// gitServer is a real git server on 127.0.0.1: git daemon, one process
// per connection (inetd mode) on a listener of the test's, so it serves
// from the moment it is returned. It serves the bare repositories under
// its dir, pushes included.
type gitServer struct {
	dir  string
	addr string

	mu    sync.Mutex
	ln    net.Listener
	procs map[*exec.Cmd]bool
	wg    sync.WaitGroup
}

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &gitServer{dir: t.TempDir(), addr: ln.Addr().String(), procs: map[*exec.Cmd]bool{}}
	s.serve(ln)
	t.Cleanup(func() {
		s.mu.Lock()
		s.ln.Close()
		s.mu.Unlock()
		s.wg.Wait() // every daemon process reaped
	})
	return s
}

func (s *gitServer) serve(ln net.Listener) {
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmd := exec.Command("git", "daemon", "--inetd", "--export-all", "--enable=receive-pack", "--base-path="+s.dir, s.dir)
			cmd.Stdin, cmd.Stdout = c, c
			s.mu.Lock()
			err = cmd.Start()
			if err == nil {
				s.procs[cmd] = true
			}
			s.mu.Unlock()
			if err != nil {
				c.Close()
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_ = cmd.Wait()
				c.Close()
				s.mu.Lock()
				delete(s.procs, cmd)
				s.mu.Unlock()
			}()
		}
	}()
}

// restart stops the server as a crash would (its listener closed, every
// daemon process SIGKILLed mid-request) and starts it again on its address.
func (s *gitServer) restart() error {
	s.mu.Lock()
	s.ln.Close()
	for cmd := range s.procs {
		cmd.Process.Kill()
	}
	s.mu.Unlock()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serve(ln)
	return nil
}

// repo makes a bare repository name.git on the server holding one commit
// on main, and returns its URL.
func (s *gitServer) repo(t *testing.T, name string) string {
	t.Helper()
	src := pilottest.GitRepo(t)
	bare := filepath.Join(s.dir, name+".git")
	mustGit(t, s.dir, "clone", "-q", "--bare", src, bare)
	return "git://" + s.addr + "/" + name + ".git"
}

// hostClone is one host's clone of url, as RunJob makes it.
func hostClone(t *testing.T, url string) string {
	t.Helper()
	c, err := clone(context.Background(), t.TempDir(), url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two hosts that take generation 1 of a job at once: the server lets
// exactly one swap in, and the other learns it was fenced. Then a stale
// generation's publish is refused by the server, which keeps the newer
// generation's fence and no branch.
func TestRemoteFenceIsACompareAndSwapOnTheServer(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	ctx := context.Background()
	a, b := hostClone(t, url), hostClone(t, url)
	for i := range 5 {
		job := fmt.Sprintf("race-%d", i)
		fa, fb := fence{repo: a, job: job, remote: url}, fence{repo: b, job: job, remote: url}
		var wg sync.WaitGroup
		var wins atomic.Int32
		errs := make([]error, 2)
		for k, f := range []fence{fa, fb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := f.swap(ctx, "", Owner{Job: job, Generation: 1, State: stateRunning, Host: fmt.Sprintf("host-%d", k)})
				errs[k] = err
				if err == nil {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%s: %d contenders won generation 1 (errors %v); want exactly one", job, wins.Load(), errs)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, ErrFenced) {
				t.Errorf("%s: the loser's error %v; want ErrFenced", job, err)
			}
		}
	}

	// A stale generation: host a holds generation 1, host b takes 2.
	fa, fb := fence{repo: a, job: "stale", remote: url}, fence{repo: b, job: "stale", remote: url}
	g1, err := fa.swap(ctx, "", Owner{Job: "stale", Generation: 1, State: stateRunning, Host: "a"})
	if err != nil {
		t.Fatal(err)
	}
	seen, o, err := fb.read(ctx)
	if err != nil || seen != g1 || o.Generation != 1 || o.Host != "a" {
		t.Fatalf("host b reads the fence as %s %+v, %v; want host a's generation 1 at %s", seen, o, err, g1)
	}
	g2, err := fb.swap(ctx, g1, Owner{Job: "stale", Generation: 2, State: stateRunning, Host: "b"})
	if err != nil {
		t.Fatal(err)
	}
	work, err := fa.resolveBase(ctx, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.publish(ctx, g1, Owner{Job: "stale", Generation: 1, State: stateDone}, work); !errors.Is(err, ErrFenced) {
		t.Errorf("the stale generation's publish: %v; want ErrFenced", err)
	}
	if now, o, err := fa.read(ctx); err != nil || now != g2 || o.Generation != 2 {
		t.Errorf("the fence after the stale publish: %s %+v, %v; want generation 2 at %s", now, o, err, g2)
	}
	if at, err := fa.refAt(ctx, fa.branch()); err != nil || at != "" {
		t.Errorf("the job's branch on the server: %q, %v; want none", at, err)
	}
}

// A job whose repository is a URL runs in a clone of the host's own and is
// published on the server; delivered again to another host, with a clone
// of its own, it gets the verdict and launches nothing.
func TestRunJobOnARemoteRepository(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	var calls atomic.Int32
	hostA := &Activities{Dispatcher: committing(&calls), CacheDir: t.TempDir(), Host: "host-a", WorktreeDir: t.TempDir()}
	j := testJob(url, "remote-1")
	res, err := runJob(t, activityEnv(t, hostA), j)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Verdict.Verdict != pilot.Completed || res.Generation != 1 || res.Commit == "" {
		t.Fatalf("RunJob = %+v; want a completed verdict of generation 1 with its commit", res)
	}
	bare := filepath.Join(srv.dir, "r.git")
	if got := mustGit(t, bare, "rev-parse", BranchPrefix+j.Name); got != res.Commit {
		t.Errorf("the job's branch on the server is at %s; want the published commit %s", got, res.Commit)
	}
	if got := mustGit(t, bare, "log", "--format=%s", "-1", BranchPrefix+j.Name); got != "work of remote-1" {
		t.Errorf("the published commit is %q; want the worker's", got)
	}
	hostB := &Activities{Dispatcher: committing(&calls), CacheDir: t.TempDir(), Host: "host-b", WorktreeDir: t.TempDir()}
	res2, err := runJob(t, activityEnv(t, hostB), j)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Commit != res.Commit || res2.Generation != 1 || res2.Verdict.Verdict.Verdict != pilot.Completed {
		t.Errorf("host b's delivery = %+v; want host a's verdict", res2)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the worker ran %d times; want once", n)
	}
}

// A generation that failed on one host pushed its commits; the next, on
// another host with a clone of its own, starts from them, and the job's
// branch holds both hosts' work.
func TestRunJobOnARemoteStartsFromAnotherHostsGeneration(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	j := testJob(url, "handover")
	hostA := &Activities{CacheDir: t.TempDir(), Host: "host-a", WorktreeDir: t.TempDir(),
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
			return verdict(task, pilot.Failed, pilot.FailProviderRateLimit), commitIn(task)
		})}
	if _, err := runJob(t, activityEnv(t, hostA), j); err == nil {
		t.Fatal("host a's generation succeeded; want its rate limit")
	}
	var sawA bool
	hostB := &Activities{CacheDir: t.TempDir(), Host: "host-b", WorktreeDir: t.TempDir(),
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
			_, err := os.Stat(filepath.Join(task.Workdir, task.Label+".txt"))
			sawA = err == nil
			task.Label += "-b"
			return verdict(task, pilot.Completed, ""), commitIn(task)
		})}
	res, err := runJob(t, activityEnv(t, hostB), j)
	if err != nil {
		t.Fatal(err)
	}
	if !sawA {
		t.Error("host b's worktree lacks host a's work")
	}
	if res.Generation != 2 {
		t.Errorf("host b ran generation %d; want 2", res.Generation)
	}
	log := mustGit(t, filepath.Join(srv.dir, "r.git"), "log", "--format=%s", BranchPrefix+j.Name)
	if log != "work of handover-b\nwork of handover\nstart" {
		t.Errorf("the job's branch on the server:\n%s\nwant both hosts' work on the start", log)
	}
}

// A server that offers no atomic push cannot hold a fence: refused, with
// the reason, and nothing launched.
func TestRunJobRefusesAServerWithoutAtomicPush(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	mustGit(t, filepath.Join(srv.dir, "r.git"), "config", "receive.advertiseAtomic", "false")
	var calls atomic.Int32
	a := &Activities{Dispatcher: committing(&calls), CacheDir: t.TempDir(), WorktreeDir: t.TempDir()}
	_, err := runJob(t, activityEnv(t, a), testJob(url, "no-atomic"))
	if err == nil || !strings.Contains(err.Error(), "does not offer atomic pushes") {
		t.Errorf("RunJob: %v; want the server's missing atomic push named", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the worker ran %d times; want never", n)
	}
}

// A generation that takes a job over on a host whose clone has never seen
// the base the first generation chose, and that left no pushed work,
// fetches the base by its id.
func TestRunJobOnARemoteFetchesTheBaseAnotherHostChose(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	bare := filepath.Join(srv.dir, "r.git")
	base := mustGit(t, bare, "rev-parse", "HEAD")
	// Host a's generation 1 chose the base and failed before it pushed
	// any work; the server's HEAD has moved on since.
	a := hostClone(t, url)
	f := fence{repo: a, job: "j", remote: url}
	failed := pilot.Verdict{Type: "worker_runner.verdict", Verdict: pilot.Failed, Failure: pilot.Failure{FailureClass: pilot.FailProviderRateLimit}}
	if _, err := f.swap(context.Background(), "", Owner{Job: "j", Generation: 1, State: stateDone, Host: "a", Base: base, Verdict: &failed}); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	mustGit(t, src, "clone", "-q", bare, ".")
	mustGit(t, src, "-c", "user.name=u", "-c", "user.email=u@example.invalid", "commit", "-q", "--allow-empty", "-m", "later")
	mustGit(t, src, "push", "-q", "origin", "HEAD")
	var calls atomic.Int32
	hostB := &Activities{Dispatcher: committing(&calls), CacheDir: t.TempDir(), Host: "b", WorktreeDir: t.TempDir()}
	res, err := runJob(t, activityEnv(t, hostB), testJob(url, "j"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != 2 || calls.Load() != 1 {
		t.Fatalf("host b: generation %d, %d launches; want generation 2 launched once", res.Generation, calls.Load())
	}
	if got := mustGit(t, bare, "rev-parse", res.Commit+"^"); got != base {
		t.Errorf("the published work stands on %s; want the base generation 1 chose, %s", got, base)
	}
}

// Another attempt on the same host writing the clone's record of the
// fence holds git's lock on it for a moment: a read of the fence waits
// for the lock instead of failing the job (CI's scenario lost a job to
// "cannot lock ref 'refs/pilot/seen/fence/job-15'" after its host was
// stopped and resumed).
func TestRemoteFenceReadWaitsForAHeldRefLock(t *testing.T) {
	srv := startGitServer(t)
	url := srv.repo(t, "r")
	ctx := context.Background()
	a, b := hostClone(t, url), hostClone(t, url)
	fa, fb := fence{repo: a, job: "locked", remote: url}, fence{repo: b, job: "locked", remote: url}
	g1, err := fa.swap(ctx, "", Owner{Job: "locked", Generation: 1, State: stateRunning, Host: "a"})
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(mustGit(t, b, "rev-parse", "--absolute-git-dir"), filepath.FromSlash(fb.seenFence())+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The other writer lets go after a moment (a timer, not a wait for
	// a process: the lock is this test's).
	released := time.AfterFunc(time.Second, func() { os.Remove(lock) })
	defer released.Stop()
	if oid, o, err := fb.read(ctx); err != nil || oid != g1 || o.Generation != 1 {
		t.Errorf("reading the fence while its record was locked: %s %+v, %v; want generation 1 at %s", oid, o, err, g1)
	}
}
