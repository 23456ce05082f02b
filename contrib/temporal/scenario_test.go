//go:build unix

package temporal

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The Temporal server the integration tests use: .ci/run starts the dev
// server (contrib/temporal/devserver) and sets these. Without them the
// tests skip, unless EnvRequire is set.
const (
	EnvAddr      = "PILOT_TEMPORAL_ADDR"
	EnvNamespace = "PILOT_TEMPORAL_NAMESPACE"
	EnvRequire   = "PILOT_TEMPORAL_REQUIRE"
	// EnvCut is how long the scenario cuts a worker off the server (a
	// Go duration); a minute when unset.
	EnvCut = "PILOT_TEMPORAL_CUT"
)

// server returns the test server's address and namespace, or skips t.
func server(t *testing.T) (addr, ns string) {
	addr, ns = os.Getenv(EnvAddr), os.Getenv(EnvNamespace)
	if addr == "" {
		if os.Getenv(EnvRequire) != "" {
			t.Fatalf("%s is set but %s is not: start the dev server (see .ci/run) and set %s and %s", EnvRequire, EnvAddr, EnvAddr, EnvNamespace)
		}
		t.Skipf("no Temporal server: set %s and %s (see .ci/run)", EnvAddr, EnvNamespace)
	}
	if ns == "" {
		ns = "default"
	}
	return addr, ns
}

type scenarioWorkerProc struct {
	name     string
	cmd      *exec.Cmd
	stdin    interface{ Close() error }
	proxy    *proxy
	gitProxy *proxy // to the git server, when the scenario has one
	done     chan error
}

// TestScenarioKilledAndCutOffWorkers runs 30 jobs on 3 worker processes,
// each a host of its own in the fences (host-A, host-B, host-C), each
// behind a TCP proxy to the server. The worker running job-05's first
// generation is killed with SIGKILL while its agent works on; the worker
// running job-10's next run is cut off the server for a minute (EnvCut)
// while its agent works on. A retry elsewhere is a takeover from another
// host of a generation that may live. Every job must get exactly one
// final verdict, a success, and its work must be done once: one "work of"
// commit on its branch, one done line in the ledger; every job but the
// victims is launched once; and no two generations' agents of a job run
// at once (their [start, end] intervals in the ledger never overlap).
func TestScenarioKilledAndCutOffWorkers(t *testing.T) {
	runScenario(t, nil)
}

// TestScenarioWorkersThatShareNothing is the scenario with a job
// repository that is a git server on 127.0.0.1 (git daemon), which each
// worker reaches through a proxy of its own: the workers share no
// directory (each its own HOME, temp dir, clone cache, worktrees and run
// directory), their fences and branches live on the server, the cut
// worker is cut off from both servers, and the git server is restarted
// (its processes killed mid-request) when the third fault strikes.
func TestScenarioWorkersThatShareNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	runScenario(t, startGitServer(t))
}

// runScenario runs the scenario on a repository on this host, or on srv.
func runScenario(t *testing.T, srv *gitServer) {
	addr, ns := server(t)
	cutFor := time.Minute
	if s := os.Getenv(EnvCut); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v (want a Go duration such as 1m)", EnvCut, s, err)
		}
		cutFor = d
	}
	// The pause outlasts the heartbeat timeout (3 s) and the retry's
	// start, not the lease a taker waits out (3 s and a quarter, from
	// when it first reads the fence).
	const pauseFor = 4500 * time.Millisecond
	repo := pilottest.GitRepo(t)
	jobRepo := repo // what the jobs name: a path, or the server's URL
	if srv != nil {
		jobRepo = srv.repo(t, "scenario")
		repo = filepath.Join(srv.dir, "scenario.git")
	}
	base := mustGit(t, repo, "rev-parse", "HEAD")
	marks := t.TempDir()
	ledger := filepath.Join(marks, "ledger")
	events, err := net.Listen("unix", filepath.Join(marks, eventsSock))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	mids := make(chan string, 16)
	go func() {
		for {
			c, err := events.Accept()
			if err != nil {
				close(mids)
				return
			}
			for l := range readLines(c) {
				mids <- l
			}
			c.Close()
		}
	}()

	queue := fmt.Sprintf("pilot-scenario-%d", time.Now().UnixNano())
	var workers []*scenarioWorkerProc
	var killed, cutOff, paused *scenarioWorkerProc
	for _, name := range []string{"A", "B", "C"} {
		p, err := newProxy(addr)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			envScenarioWorker+"="+queue,
			envWorkerAddr+"="+p.addr(), envWorkerNS+"="+ns,
			envWorkerRunDir+"="+filepath.Join(marks, "runs-"+name),
			envWorkerHost+"=host-"+name,
			envLedger+"="+ledger, envMarks+"="+marks)
		var gp *proxy
		if srv != nil {
			// A machine of its own: its HOME (whose git config sends
			// the server's URL through its proxy), temp dir, clone
			// cache and worktrees.
			if gp, err = newProxy(srv.addr); err != nil {
				t.Fatal(err)
			}
			home := filepath.Join(marks, "home-"+name)
			for _, d := range []string{home, filepath.Join(marks, "tmp-"+name)} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			conf := fmt.Sprintf("[url \"git://%s/\"]\n\tinsteadOf = git://%s/\n", gp.addr(), srv.addr)
			if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
				"TMPDIR="+filepath.Join(marks, "tmp-"+name),
				envWorkerCache+"="+filepath.Join(marks, "cache-"+name),
				envWorkerWorktrees+"="+filepath.Join(marks, "worktrees-"+name))
		}
		logf, err := os.Create(filepath.Join(marks, "worker-"+name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = logf
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w := &scenarioWorkerProc{name: name, cmd: cmd, stdin: stdin, proxy: p, gitProxy: gp, done: make(chan error, 1)}
		lines := readLines(stdout)
		if l := <-lines; l != "ready" {
			t.Fatalf("worker %s said %q, not ready (its log: %s)", name, l, logf.Name())
		}
		go func() {
			for range lines {
			}
			w.done <- cmd.Wait()
			logf.Close()
		}()
		workers = append(workers, w)
	}
	defer func() {
		for _, w := range workers {
			w.cmd.Process.Signal(syscall.SIGCONT)
			w.proxy.restore()
			w.stdin.Close()
			if err := <-w.done; err != nil && w != killed {
				t.Errorf("worker %s: %v (log in %s)", w.name, err, marks)
			}
			w.proxy.close()
			if w.gitProxy != nil {
				w.gitProxy.close()
			}
		}
		if t.Failed() {
			for _, w := range workers {
				data, _ := os.ReadFile(filepath.Join(marks, "worker-"+w.name+".log"))
				t.Logf("worker %s's log (tail):\n%s", w.name, tail(string(data), 3000))
			}
		}
	}()
	byPid := func(pid int) *scenarioWorkerProc {
		for _, w := range workers {
			if w.cmd.Process.Pid == pid {
				return w
			}
		}
		return nil
	}

	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var jobs []Job
	for i := 1; i <= 30; i++ {
		j := Job{Name: fmt.Sprintf("job-%02d", i), Repo: jobRepo, Provider: "ledger", Mode: pilot.ModeCode, Prompt: fmt.Sprintf("job-%02d", i)}
		if srv != nil {
			// Four areas, each written by every fourth job: theirs
			// never run at once, on any machine.
			j.Writes = []string{fmt.Sprintf("area-%d/notes.md", i%4)}
		}
		jobs = append(jobs, j)
	}
	writes := map[string][]string{}
	for _, j := range jobs {
		writes[j.Name] = j.Writes
	}
	if data, err := json.Marshal(writes); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(marks, writesFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, WorkflowName, Input{
		Jobs: jobs, Limit: 9, Queue: queue, HeartbeatTimeout: 3 * time.Second, RetryInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	// The faults, as the victims' agents report their runs.
	var restored sync.WaitGroup
	ownerOf := func(job string) Owner {
		_, o, err := fence{repo: repo, job: job}.read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for killed == nil || cutOff == nil || paused == nil {
		var l string
		select {
		case l = <-mids:
		case <-ctx.Done():
			t.Fatalf("the victims never reported their runs (killed %v, cut %v, paused %v)", killed != nil, cutOff != nil, paused != nil)
		}
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		o := ownerOf(f[1])
		w := byPid(o.Pid)
		switch {
		case f[1] == victimKill && killed == nil && w != nil:
			if err := w.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = w
			fault(t, ledger, "kill", o.Host)
			t.Logf("killed worker %s (pid %d) running %s generation %s", w.name, o.Pid, f[1], f[2])
			writeMark(t, marks, markKillDone)
		case f[1] == victimCut && cutOff == nil && w != nil && w != killed:
			w.proxy.cut()
			if w.gitProxy != nil {
				w.gitProxy.cut()
			}
			cutOff = w
			fault(t, ledger, "cut", o.Host)
			t.Logf("cut worker %s off the server for %v while it runs %s generation %s", w.name, cutFor, f[1], f[2])
			writeMark(t, marks, markCutDone)
			restored.Add(1)
			time.AfterFunc(cutFor, func() {
				w.proxy.restore()
				if w.gitProxy != nil {
					w.gitProxy.restore()
				}
				fault(t, ledger, "cut-end", o.Host)
				restored.Done()
			})
		case f[1] == victimPause && paused == nil && w != nil && w != killed:
			// Stopped past the heartbeat timeout, so Temporal runs the job
			// elsewhere, while its agent works on; resumed inside the
			// lease the taker waits out, the owner ends its agent itself.
			if err := w.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused = w
			fault(t, ledger, "pause", o.Host)
			if srv != nil {
				if err := srv.restart(); err != nil {
					t.Fatalf("restarting the git server: %v", err)
				}
				t.Logf("restarted the git server")
			}
			t.Logf("stopped worker %s for %v while it runs %s generation %s", w.name, pauseFor, f[1], f[2])
			writeMark(t, marks, markPauseDone)
			restored.Add(1)
			time.AfterFunc(pauseFor, func() {
				w.cmd.Process.Signal(syscall.SIGCONT)
				fault(t, ledger, "pause-end", o.Host)
				restored.Done()
			})
		}
	}

	var results []Result
	if err := run.Get(ctx, &results); err != nil {
		t.Fatalf("the workflow: %v", err)
	}
	restored.Wait() // the minute is the scenario's: it ends before the checks

	if len(results) != len(jobs) {
		t.Fatalf("%d results for %d jobs", len(results), len(jobs))
	}
	ledgerData, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ledgerData)), "\n")
	works, starts := map[string]int{}, map[string]int{}
	victims := faulted(lines)
	for _, err := range checkIntervals(lines) {
		t.Error(err)
	}
	for _, err := range checkWriteSets(lines, jobs) {
		t.Error(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("the ledger:\n%s", ledgerData)
		}
	}()
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "done", "recovered":
			works[f[1]]++
		case "start":
			starts[f[1]]++
		}
	}
	gens := map[string]int{}
	var attached []string
	for i, r := range results {
		j := jobs[i]
		if r.Job != j.Name {
			t.Errorf("result %d is job %s's; want %s's (job order)", i, r.Job, j.Name)
		}
		if r.Verdict.Verdict.Verdict != pilot.Completed {
			t.Errorf("job %s: %s %s (%s) %s; want completed", j.Name, r.Verdict.Verdict.Verdict, r.Verdict.FailureClass, r.Error, r.Verdict.EvidenceNote)
			continue
		}
		log := mustGit(t, repo, "log", "--format=%s", base+".."+BranchPrefix+j.Name)
		commits := strings.Count(log, "work of "+j.Name+" ")
		if commits != 1 || r.Commit != mustGit(t, repo, "rev-parse", BranchPrefix+j.Name) {
			t.Errorf("job %s's branch has %d commits of its work (want 1), at %s (result says %s):\n%s", j.Name, commits, mustGit(t, repo, "rev-parse", BranchPrefix+j.Name), r.Commit, log)
		}
		// With a git server, a generation whose host was cut off or
		// stopped may finish its work and not reach the server with it:
		// the next generation, elsewhere, does it again. Only the
		// published branch is fenced (one commit, checked above).
		if n := works[j.Name]; n != 1 && (srv == nil || !victims[j.Name] || n < 1) {
			t.Errorf("the ledger shows job %s's work %d times; want once", j.Name, n)
		}
		if n := starts[j.Name]; n != 1 && !victims[j.Name] {
			t.Errorf("job %s's agent was launched %d times; want once (it is no victim); its ledger:\n%s", j.Name, n, linesOf(lines, j.Name))
		}
		o := ownerOf(j.Name)
		if o.State != stateDone || o.Generation != r.Generation {
			t.Errorf("job %s's fence: %+v; want done at the result's generation %d", j.Name, o, r.Generation)
		}
		if r.Generation > 1 {
			gens[j.Name] = r.Generation
		}
		if r.Attached {
			attached = append(attached, j.Name)
		}
	}
	t.Logf("jobs that took more than one generation: %v; whose final attempt attached to a run first: %v; the faults' victims: %v; ledger lines: %d", gens, attached, victims, len(lines))
	for _, v := range []string{victimKill, victimCut, victimPause} {
		if gens[v] < 2 {
			t.Errorf("victim %s finished in generation %d; want a later one", v, results[indexOf(jobs, v)].Generation)
		}
	}
}

// checkIntervals reads the ledger's start and end lines, in the order
// they were appended, as each job's runs: a run's start while another
// run of the job has not ended is two generations' agents alive at once.
func checkIntervals(lines []string) []error {
	var errs []error
	open := map[string]string{} // job → the generation whose run is open
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		job, gen := f[1], f[2]
		switch f[0] {
		case "start":
			// An earlier generation without an end line ran on unless
			// this start found the job's lock free: then its agent was
			// dead (SIGKILLed before it could write its end).
			if g, ok := open[job]; ok && busyAt(f, "job:"+job) {
				errs = append(errs, fmt.Errorf("ledger line %d: job %s's generation %s started while generation %s's agent ran", i+1, job, gen, g))
			}
			open[job] = gen
		case "end":
			if g := open[job]; g != gen {
				errs = append(errs, fmt.Errorf("ledger line %d: job %s's generation %s ended, but generation %q's run is the open one", i+1, job, gen, g))
			}
			delete(open, job)
		case "work", "done", "recovered":
			if g := open[job]; g != gen {
				errs = append(errs, fmt.Errorf("ledger line %d: %q outside its run (open: generation %q)", i+1, l, g))
			}
		}
	}
	for job, g := range open {
		errs = append(errs, fmt.Errorf("job %s's generation %s never ended", job, g))
	}
	return errs
}

// checkWriteSets reads the ledger's start and end lines as checkIntervals
// does and reports every run that started while a run of another job
// whose Writes overlap its own had not ended.
func checkWriteSets(lines []string, jobs []Job) []error {
	writes := map[string][]string{}
	for _, j := range jobs {
		writes[j.Name] = j.Writes
	}
	var errs []error
	open := map[string]int{} // job -> its runs not yet ended
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		switch f[0] {
		case "start":
			for other, n := range open {
				if n == 0 || other == f[1] {
					continue
				}
				for _, w := range writes[f[1]] {
					if !slices.Contains(writes[other], w) {
						continue
					}
					if busyAt(f, "write:"+w) {
						errs = append(errs, fmt.Errorf("ledger line %d: job %s started while job %s, which also writes %s, ran", i+1, f[1], other, w))
					} else {
						open[other] = 0 // its agent died without an end line
					}
				}
			}
			open[f[1]]++
		case "end":
			open[f[1]]--
		}
	}
	return errs
}

// busyAt reports whether the start line f found the lock name held by a
// live agent (holdLocks); a start line without the field (none written
// so) counts as finding every lock held.
func busyAt(f []string, name string) bool {
	if len(f) < 6 {
		return true
	}
	return f[5] != "-" && slices.Contains(strings.Split(f[5], ","), name)
}

// fault appends "fault KIND HOST" to the ledger: the runs of HOST open
// at that line are the fault's victims.
func fault(t *testing.T, ledger, kind, host string) {
	t.Helper()
	if err := appendTo(ledger, fmt.Sprintf("fault %s %s\n", kind, host)); err != nil {
		t.Error(err) // from the faults' timers too: no Fatal
	}
}

// faulted returns the jobs with a run on a faulted host that started
// before the fault ended (its "-end" line; a killed host's never does):
// their owner may have been cut off or stopped before it published, an
// agent spawned just before the fault writes its start line after it, and
// their job may run again. A faulted host starts no job while the fault
// lasts, so what this excuses is what was in flight at the fault.
func faulted(lines []string) map[string]bool {
	victims := map[string]bool{}
	ran := map[string][]string{} // host → the jobs started there so far
	faults := map[string]bool{}  // hosts whose fault has not ended
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) >= 5 && f[0] == "start":
			ran[f[4]] = append(ran[f[4]], f[1])
			if faults[f[4]] {
				victims[f[1]] = true
			}
		case len(f) == 3 && f[0] == "fault" && strings.HasSuffix(f[1], "-end"):
			delete(faults, f[2])
		case len(f) == 3 && f[0] == "fault":
			faults[f[2]] = true
			for _, job := range ran[f[2]] {
				victims[job] = true
			}
		}
	}
	return victims
}

// linesOf returns the ledger's lines of job.
func linesOf(lines []string, job string) string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[1] == job {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func indexOf(jobs []Job, name string) int {
	for i, j := range jobs {
		if j.Name == name {
			return i
		}
	}
	return -1
}

func writeMark(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestRunJobsCancelWaitsForTheTree cancels a RunJobs workflow on the dev
// server while its one job's worker (a process tree: the fake agent and a
// setsid child) runs: the workflow returns only after the activity
// acknowledged, and by then nothing of the tree is left. (The SDK's test
// environment cannot show this: it resolves a cancelled activity at once,
// without cancelling the activity's context.)
func TestRunJobsCancelWaitsForTheTree(t *testing.T) {
	addr, ns := server(t)
	repo := pilottest.GitRepo(t)
	p := pilottest.FakeProvider(t, "fake", "spawn:setsid", "ready", "block", "end", "block")
	d := pilottest.Dispatcher(t, []pilot.Provider{p})
	runIDs := make(chan string, 1)
	d.Observer = func(e pilot.Event) {
		if e.Started != nil {
			runIDs <- e.Started.RunID
		}
	}
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := fmt.Sprintf("pilot-cancel-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	(&Activities{Dispatcher: d, Heartbeat: 50 * time.Millisecond}).Register(w)
	RegisterWorkflow(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, WorkflowName, Input{
		Jobs:  []Job{{Name: "cancelled", Repo: repo, Provider: "fake", Mode: pilot.ModeCode, Prompt: "x"}, {Name: "never", Repo: repo, Provider: "fake", Mode: pilot.ModeCode, Prompt: "x"}},
		Limit: 1, Queue: queue, HeartbeatTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runID string
	select {
	case runID = <-runIDs:
	case <-ctx.Done():
		t.Fatal("the job's worker never started")
	}
	if err := c.CancelWorkflow(ctx, run.GetID(), run.GetRunID()); err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := run.Get(ctx, &rs); err != nil {
		t.Fatalf("the cancelled workflow: %v", err)
	}
	if left := pilottest.Alive(runID); len(left) > 0 {
		t.Errorf("processes of the cancelled job outlived the workflow: %v", left)
	}
	if len(rs) != 2 || rs[0].Verdict.FailureClass != pilot.FailCancelled || rs[0].Verdict.Synthesized || rs[0].Verdict.RunID != runID ||
		rs[1].Verdict.FailureClass != pilot.FailCancelled || !rs[1].Verdict.Synthesized {
		t.Errorf("results %+v; want the first job's own cancelled verdict and the second's synthesized one", rs)
	}
}

// The interval check itself: overlapping runs, a run that never ended,
// and work outside a run are caught; runs one after another are not.
func TestCheckIntervals(t *testing.T) {
	ok := []string{"start j 1 10", "work j 1", "end j 1", "start j 2 11", "done j 2", "end j 2", "start k 1 12", "end k 1"}
	if errs := checkIntervals(ok); len(errs) != 0 {
		t.Errorf("sequential runs: %v; want no error", errs)
	}
	for name, lines := range map[string][]string{
		"overlap":   {"start j 1 10", "start j 2 11", "end j 2", "end j 1"},
		"unended":   {"start j 1 10", "work j 1"},
		"outside":   {"start j 1 10", "end j 1", "work j 1"},
		"other-gen": {"start j 2 11", "done j 1", "end j 2"},
	} {
		if errs := checkIntervals(lines); len(errs) == 0 {
			t.Errorf("%s: no error for %q", name, lines)
		}
	}
	// A SIGKILLed agent writes no end line: a later start that found the
	// job's lock free proves it dead; one that found it held, alive.
	killed := []string{"start j 1 10 h -", "work j 1", "start j 2 11 h -", "done j 2", "end j 2"}
	if errs := checkIntervals(killed); len(errs) != 0 {
		t.Errorf("after a SIGKILLed agent: %v; want no error", errs)
	}
	alive := []string{"start j 1 10 h -", "work j 1", "start j 2 11 h job:j", "end j 2", "end j 1"}
	if errs := checkIntervals(alive); len(errs) == 0 || !strings.Contains(errs[0].Error(), "started while generation 1's agent ran") {
		t.Errorf("beside a live agent: %v; want the overlap first", errs)
	}
}

func TestCheckWriteSets(t *testing.T) {
	jobs := []Job{{Name: "a", Writes: []string{"x"}}, {Name: "b", Writes: []string{"x"}}, {Name: "c", Writes: []string{"y"}}}
	ok := []string{"start a 1 1 h", "start c 1 2 h", "end a 1", "start b 1 3 h", "end b 1", "end c 1"}
	if errs := checkWriteSets(ok, jobs); len(errs) != 0 {
		t.Errorf("apart: %v", errs)
	}
	bad := []string{"start a 1 1 h", "start b 1 3 h", "end a 1", "end b 1"}
	if errs := checkWriteSets(bad, jobs); len(errs) != 1 {
		t.Errorf("b beside a: %v; want one error", errs)
	}
	// a was SIGKILLed (no end line): b found x's lock free.
	killed := []string{"start a 1 1 h -", "start b 1 3 h -", "end b 1", "start a 2 4 h -", "end a 2"}
	if errs := checkWriteSets(killed, jobs); len(errs) != 0 {
		t.Errorf("after a SIGKILLed agent: %v", errs)
	}
	held := []string{"start a 1 1 h -", "start b 1 3 h write:x", "end a 1", "end b 1"}
	if errs := checkWriteSets(held, jobs); len(errs) != 1 {
		t.Errorf("b beside a live a: %v; want one error", errs)
	}
}

// holdLocks finds a lock a live process holds, and frees it when that
// process dies by SIGKILL, which leaves it no chance to say so.
func TestHoldLocksOutliveNoAgent(t *testing.T) {
	marks := t.TempDir()
	if err := os.WriteFile(filepath.Join(marks, writesFile), []byte(`{"j":["area-0/notes.md"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(marks, "lock-job_j")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// Another process holds job j's lock: flock(1) in a child, alive
	// until it is killed.
	// -o: the command does not inherit the lock; flock itself holds it.
	holder := exec.Command("flock", "-x", "-o", path, "-c", "echo locked; exec sleep 600")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its sleep dies with it
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Skipf("flock(1): %v", err)
	}
	defer func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() }()
	if line := <-readLines(out); line != "locked" {
		t.Fatalf("the holder said %q", line)
	}
	defer f.Close()
	if got := holdLocks(marks, "j"); got != "job:j" {
		t.Errorf("with the job's lock held: %q, want job:j", got)
	}
	syscall.Kill(-holder.Process.Pid, syscall.SIGKILL)
	holder.Wait()
	for _, l := range heldLocks {
		l.Close() // this process's own, taken above: let go of them
	}
	heldLocks = nil
	if got := holdLocks(marks, "j"); got != "-" {
		t.Errorf("after the holder's SIGKILL: %q, want -", got)
	}
}

func TestFaulted(t *testing.T) {
	lines := []string{
		"start a 1 1 host-A", "end a 1",
		"fault pause host-A",
		"start b 1 2 host-A", // spawned just before the stop
		"start c 1 3 host-B",
		"fault pause-end host-A",
		"start d 1 4 host-A",
		"fault kill host-B",
		"start e 1 5 host-C",
	}
	got := faulted(lines)
	want := map[string]bool{"a": true, "b": true, "c": true}
	if len(got) != len(want) {
		t.Errorf("faulted = %v; want %v", got, want)
	}
	for j := range want {
		if !got[j] {
			t.Errorf("faulted = %v; want %v", got, want)
		}
	}
}
