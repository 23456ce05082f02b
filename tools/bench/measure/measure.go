// Package measure holds the measurements of pilot's performance goals and
// of their baselines, shared by the harness (go run ./tools/bench) and
// the root package's go test -bench benchmarks.
package measure

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/supervise"
)

// TrivialArgv is the trivial worker of P1, P1b and P2.
var TrivialArgv = []string{"/bin/echo", "ok"}

// KeepSupervisor keeps pilot's supervisor process between jobs, as a
// long-running program does; the returned function stops it.
func KeepSupervisor() (stop func()) {
	supervise.SetLinger(time.Hour)
	return func() {
		supervise.SetLinger(0)
		supervise.Shutdown(context.Background())
	}
}

// Dispatcher returns a Dispatcher over ps writing its runs under runDir,
// with the given grace period, whose workers inherit only PATH.
func Dispatcher(runDir string, grace time.Duration, ps ...pilot.Provider) (*pilot.Dispatcher, error) {
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		return nil, err
	}
	return &pilot.Dispatcher{
		Runners:   agents.Runners(),
		Providers: reg,
		RunDir:    runDir,
		Grace:     grace,
		EnvAllow:  []string{"PATH"},
	}, nil
}

// FakeAgent is a command-runner provider running exe as the fake agent
// with script; exe must call fakeagent.Main when env var envFake is set.
func FakeAgent(name, exe, envFake string, script ...string) pilot.Provider {
	return pilot.Provider{
		Name:   name,
		Runner: "command",
		Argv:   append([]string{exe}, script...),
		Env:    map[string]string{envFake: "1", "GORACE": "atexit_sleep_ms=0"},
	}
}

// DispatchOK dispatches t and fails unless the worker completed.
func DispatchOK(ctx context.Context, d *pilot.Dispatcher, t pilot.Task) error {
	v, err := d.Dispatch(ctx, t)
	if err != nil {
		return err
	}
	if v.Verdict != pilot.Completed {
		return fmt.Errorf("verdict %s (%s): %s", v.Verdict, v.FailureClass, v.StderrTail)
	}
	return nil
}

// ExecOK runs argv with os/exec, both streams read, and checks that it
// printed "ok".
func ExecOK(argv []string) error {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v", argv[0], err)
	}
	if stdout.String() != "ok\n" {
		return fmt.Errorf("%s printed %q, want %q", argv[0], stdout.String(), "ok\n")
	}
	return nil
}

// Sequential runs f n times and returns the mean time per run.
func Sequential(n int, f func() error) (time.Duration, error) {
	start := time.Now()
	for range n {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return time.Since(start) / time.Duration(n), nil
}

// FanoutOK runs jobs through a Fanout with the given parallelism and fails
// unless every worker completed.
func FanoutOK(ctx context.Context, d *pilot.Dispatcher, jobs []pilot.Job, parallel int) error {
	vs, err := (&pilot.Fanout{Dispatcher: d, MaxParallel: parallel}).Run(ctx, jobs)
	if err != nil {
		return err
	}
	for i, r := range vs {
		if v := r.Verdict; v.Verdict != pilot.Completed {
			return fmt.Errorf("job %d: verdict %s (%s)", i, v.Verdict, v.FailureClass)
		}
	}
	return nil
}

// ErrgroupExec runs argv n times with errgroup and os/exec, parallel at a
// time, both streams read: Fanout's baseline.
func ErrgroupExec(argv []string, n, parallel int) error {
	var g errgroup.Group
	g.SetLimit(parallel)
	for range n {
		g.Go(func() error { return ExecOK(argv) })
	}
	return g.Wait()
}

// CatPipe runs cat on path into a pipe that is read and thrown away, and
// returns how many bytes went through: P3's baseline.
func CatPipe(path string) (int64, error) {
	cmd := exec.Command("cat", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Read as pilot does, 64 KiB at a time (io.Discard's ReadFrom reads
	// 8 KiB, which would slow the baseline down).
	n, cerr := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{out}, make([]byte, 64<<10))
	if err := cmd.Wait(); err != nil {
		return n, err
	}
	return n, cerr
}

// CatScript writes an executable script into dir that ignores its
// arguments and stdin and prints the file named by $PILOT_BENCH_JSONL: a
// stand-in agent CLI whose output a runner's stream watcher reads.
func CatScript(dir string) (string, error) {
	path := filepath.Join(dir, "cat-jsonl")
	err := os.WriteFile(path, []byte("#!/bin/sh\nexec cat \"$PILOT_BENCH_JSONL\"\n"), 0o755)
	return path, err
}

// StreamProvider is a Claude Code provider whose "CLI" prints the JSONL
// file at path: every line goes through the claude stream watcher, the
// stream log and the stall watchdog as a real run's would.
func StreamProvider(script, path string) pilot.Provider {
	return RunnerStreamProvider(agents.RunnerClaude, script, path)
}

// RunnerStreamProvider is StreamProvider for another runner: the file at
// path is in that runner's CLI's JSON event format.
func RunnerStreamProvider(runner, script, path string) pilot.Provider {
	return pilot.Provider{
		Name:   "stream",
		Runner: runner,
		Binary: script,
		Env:    map[string]string{"PILOT_BENCH_JSONL": path},
	}
}

// StreamOK dispatches t, whose worker prints want bytes of an agent CLI's
// JSON stream ending in a successful run's terminal event, and checks that pilot read
// them all and judged the run completed.
func StreamOK(ctx context.Context, d *pilot.Dispatcher, t pilot.Task, want int64) error {
	v, err := d.Dispatch(ctx, t)
	if err != nil {
		return err
	}
	if v.Verdict != pilot.Completed {
		return fmt.Errorf("verdict %s (%s): %s", v.Verdict, v.FailureClass, v.StderrTail)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		return err
	}
	if rec.StdoutBytes != want {
		return fmt.Errorf("pilot read %d bytes of stdout, want %d", rec.StdoutBytes, want)
	}
	return nil
}

// ResetPeakRSS resets this process's peak resident set size (VmHWM).
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakRSS returns this process's peak resident set size in bytes.
func PeakRSS() (int64, error) { return statusKiB("self", "VmHWM:") }

// RSS returns the resident set size of process pid ("self" for this one)
// in bytes.
func RSS(pid string) (int64, error) { return statusKiB(pid, "VmRSS:") }

func statusKiB(pid, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for l := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(l, field); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%s/status has no %s in kB", pid, field)
}

// Children returns the pids of this process's child processes.
func Children() ([]string, error) {
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		pids = append(pids, strings.Fields(string(data))...)
	}
	return pids, nil
}

// CancelTree dispatches t, whose worker prints "ready" once it and its
// descendants ignore SIGTERM and printed "spawned PID" for each
// descendant, cancels the dispatch when "ready" arrives, and returns the
// time from the cancel to Dispatch's return. It fails unless every
// process of the tree is gone by then.
func CancelTree(d *pilot.Dispatcher, t pilot.Task) (time.Duration, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		pids     []int
		cancelAt atomic.Int64
	)
	dd := *d
	dd.OnLine = func(_ string, l pilot.Line) {
		if l.Stream != pilot.Stdout {
			return
		}
		s := string(l.Data)
		if p, ok := strings.CutPrefix(s, "spawned "); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				mu.Lock()
				pids = append(pids, pid)
				mu.Unlock()
			}
		}
		if s == "ready" {
			cancelAt.Store(time.Now().UnixNano())
			cancel()
		}
	}
	v, err := dd.Dispatch(ctx, t)
	end := time.Now()
	if err != nil {
		return 0, err
	}
	if cancelAt.Load() == 0 {
		return 0, fmt.Errorf("the worker never printed ready: verdict %s (%s) %s", v.Verdict, v.FailureClass, v.StderrTail)
	}
	if v.FailureClass != pilot.FailCancelled {
		return 0, fmt.Errorf("failure class %q, want %q", v.FailureClass, pilot.FailCancelled)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pids) == 0 {
		return 0, errors.New("the worker spawned no descendants")
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		return 0, err
	}
	pids = append(pids, rec.Pid)
	// A pid alive now may be a new process that reuses it (pids wrap
	// quickly on a busy machine): only one that carries this run's id is
	// left over from it.
	cookie := []byte(pilot.EnvRunID + "=" + v.RunID)
	for _, pid := range pids {
		if env, err := procfs.Environ(pid); err == nil && procfs.Alive(pid) && procfs.HasEntry(env, cookie) {
			return 0, fmt.Errorf("process %d of run %s is still alive after Dispatch returned", pid, v.RunID)
		}
	}
	return end.Sub(time.Unix(0, cancelAt.Load())), nil
}

// CancelScript is the fake agent script of CancelTree: a worker ignoring
// SIGTERM with two descendants ignoring it too, one in the worker's
// process group and one that left it for a session of its own.
var CancelScript = []string{
	"ignore-term",
	"spawn", "ignore-term", "ready", "block", "end",
	"spawn:setsid", "ignore-term", "ready", "block", "end",
	"out=ready", "block",
}

// BlockingArgv is P6's worker: it prints "ready" and sleeps until ended.
var BlockingArgv = []string{"/bin/sh", "-c", "echo ready; exec sleep 3600"}

// InFlight runs n jobs of d's provider "block" (BlockingArgv) at once
// through a Fanout and measures, once every worker has printed ready,
// pilot's resident memory per running job: this process's and its
// supervisor's (the workers excluded), against the same with no job
// running. It also returns the Go heap in use per job. The supervisor must
// be kept running (KeepSupervisor) and already started.
func InFlight(d *pilot.Dispatcher, n int) (rssKiB, heapKiB float64, err error) {
	jobs := make([]pilot.Job, n)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "block", Mode: pilot.ModeReview, Prompt: "x"}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ready atomic.Int32
	all := make(chan struct{})
	dd := *d
	dd.OnLine = func(_ string, l pilot.Line) {
		if string(l.Data) == "ready" && ready.Add(1) == int32(n) {
			close(all)
		}
	}
	before, beforeHeap, err := pilotMemory()
	if err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := (&pilot.Fanout{Dispatcher: &dd, MaxParallel: n}).Run(ctx, jobs)
		done <- err
	}()
	select {
	case <-all:
	case err := <-done:
		return 0, 0, fmt.Errorf("the fanout ended before every worker was ready: %v", err)
	}
	during, duringHeap, merr := pilotMemory()
	cancel()
	if err := <-done; err != nil {
		return 0, 0, err
	}
	if merr != nil {
		return 0, 0, merr
	}
	return float64(during-before) / float64(n) / 1024, float64(duringHeap-beforeHeap) / float64(n) / 1024, nil
}

// pilotMemory returns the resident memory of this process and of its
// children (the supervisor: workers are the supervisor's children), and
// this process's Go heap in use, after a garbage collection.
func pilotMemory() (rss, heap int64, err error) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	kids, err := Children()
	if err != nil {
		return 0, 0, err
	}
	if len(kids) == 0 {
		return 0, 0, errors.New("no supervisor process is running")
	}
	for _, pid := range append(kids, "self") {
		n, err := RSS(pid)
		if err != nil {
			return 0, 0, err
		}
		rss += n
	}
	return rss, int64(ms.HeapInuse), nil
}

//go:embed standin.py
var standin []byte

// PythonStandIn is P1b's baseline: pilot-workers' architecture, a Python
// child process per job that itself runs the worker.
type PythonStandIn struct {
	Python   string // the python3 executable
	Script   string // standin.py, written by NewPythonStandIn
	RunDir   string
	Workdir  string
	TaskFile string
}

// NewPythonStandIn writes the stand-in and a task file into dir. It
// returns an error wrapping exec.ErrNotFound when python3 is missing.
func NewPythonStandIn(dir string) (*PythonStandIn, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, err
	}
	// python3 may be a version manager's shim (a shell script that
	// picks an interpreter on every start): run the interpreter itself,
	// as pilot-workers' fanout does with sys.executable.
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", py, err)
	}
	if real := strings.TrimSpace(string(out)); filepath.IsAbs(real) {
		py = real
	}
	p := &PythonStandIn{
		Python:   py,
		Script:   filepath.Join(dir, "standin.py"),
		RunDir:   filepath.Join(dir, "runs"),
		Workdir:  dir,
		TaskFile: filepath.Join(dir, "task.md"),
	}
	if err := os.WriteFile(p.Script, standin, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.TaskFile, []byte("x"), 0o600); err != nil {
		return nil, err
	}
	return p, os.MkdirAll(p.RunDir, 0o700)
}

// RunOK runs one job of argv through the stand-in, as pilot-workers'
// fanout runs its dispatch child, and checks its verdict.
func (p *PythonStandIn) RunOK(argv []string) error {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(p.Python, append([]string{p.Script, "--provider", "echo", "--mode", "code",
		"--workdir", p.Workdir, "--task-file", p.TaskFile, "--run-dir", p.RunDir, "--"}, argv...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("python stand-in: %v: %s", err, stderr.Bytes())
	}
	out := bytes.TrimSpace(stdout.Bytes())
	last := out[bytes.LastIndexByte(out, '\n')+1:]
	var v struct{ Verdict string }
	if err := json.Unmarshal(last, &v); err != nil || v.Verdict != "completed" {
		return fmt.Errorf("python stand-in printed %q, want a completed verdict", last)
	}
	return nil
}
