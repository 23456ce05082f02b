package temporal

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	name  string
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	proxy *proxy
	done  chan error
}

// TestScenarioKilledAndCutOffWorkers runs 30 jobs on 3 worker processes,
// each behind a TCP proxy to the server. The worker running job-05's first
// generation is killed with SIGKILL while its agent waits; the worker
// running job-10's next run is cut off the server for a minute (EnvCut).
// Every job must get exactly one final verdict, a success, and its work
// must be done once: one "work of" commit on its branch, one ledger line.
func TestScenarioKilledAndCutOffWorkers(t *testing.T) {
	addr, ns := server(t)
	cutFor := time.Minute
	if s := os.Getenv(EnvCut); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s=%q: %v (want a Go duration such as 1m)", EnvCut, s, err)
		}
		cutFor = d
	}
	repo := pilottest.GitRepo(t)
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
	var killed, cutOff *scenarioWorkerProc
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
			envLedger+"="+ledger, envMarks+"="+marks)
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
		w := &scenarioWorkerProc{name: name, cmd: cmd, stdin: stdin, proxy: p, done: make(chan error, 1)}
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
			w.proxy.restore()
			w.stdin.Close()
			if err := <-w.done; err != nil && w != killed {
				t.Errorf("worker %s: %v (log in %s)", w.name, err, marks)
			}
			w.proxy.close()
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
		jobs = append(jobs, Job{Name: fmt.Sprintf("job-%02d", i), Repo: repo, Provider: "ledger", Mode: pilot.ModeCode, Prompt: fmt.Sprintf("job-%02d", i)})
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
	for killed == nil || cutOff == nil {
		var l string
		select {
		case l = <-mids:
		case <-ctx.Done():
			t.Fatalf("the victims never reported their runs (killed %v, cut %v)", killed != nil, cutOff != nil)
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
			t.Logf("killed worker %s (pid %d) running %s generation %s", w.name, o.Pid, f[1], f[2])
			writeMark(t, marks, markKillDone)
		case f[1] == victimCut && cutOff == nil && w != nil && w != killed:
			w.proxy.cut()
			cutOff = w
			t.Logf("cut worker %s off the server for %v while it runs %s generation %s", w.name, cutFor, f[1], f[2])
			writeMark(t, marks, markCutDone)
			restored.Add(1)
			time.AfterFunc(cutFor, func() {
				w.proxy.restore()
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
	ledgerLines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(ledgerData)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			ledgerLines[f[0]]++
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
		works := strings.Count(log, "work of "+j.Name+" ")
		if works != 1 || r.Commit != mustGit(t, repo, "rev-parse", BranchPrefix+j.Name) {
			t.Errorf("job %s's branch has %d commits of its work (want 1), at %s (result says %s):\n%s", j.Name, works, mustGit(t, repo, "rev-parse", BranchPrefix+j.Name), r.Commit, log)
		}
		if n := ledgerLines[j.Name]; n != 1 {
			t.Errorf("the ledger shows job %s's work %d times; want once", j.Name, n)
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
	t.Logf("jobs that took more than one generation: %v; whose final attempt attached to a run first: %v; ledger lines: %d", gens, attached, len(strings.Split(strings.TrimSpace(string(ledgerData)), "\n")))
	for _, v := range []string{victimKill, victimCut} {
		if gens[v] < 2 {
			t.Errorf("victim %s finished in generation %d; want a later one", v, results[indexOf(jobs, v)].Generation)
		}
	}
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
