package temporal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// The scenario's processes: the test binary started again as a worker
// machine or as the ledger agent.
const (
	envScenarioWorker  = "PILOT_TEMPORAL_TEST_WORKER" // its queues, comma-separated
	envLedgerAgent     = "PILOT_TEMPORAL_LEDGER_AGENT"
	envWorkerAddr      = "PILOT_TEMPORAL_TEST_WORKER_ADDR"
	envWorkerNS        = "PILOT_TEMPORAL_TEST_WORKER_NS"
	envWorkerRunDir    = "PILOT_TEMPORAL_TEST_WORKER_RUNDIR"
	envWorkerHost      = "PILOT_TEMPORAL_TEST_WORKER_HOST"      // the host it names itself in fences
	envWorkerCache     = "PILOT_TEMPORAL_TEST_WORKER_CACHE"     // its clone cache
	envWorkerWorktrees = "PILOT_TEMPORAL_TEST_WORKER_WORKTREES" // its worktrees
	envLedger          = "LEDGER"                               // the ledger file (agent)
	envMarks           = "MARKS"                                // the directory of the test's marks and socket (agent)
	markKillDone       = "kill-done"                            // the killed worker is gone
	markCutDone        = "cut-done"                             // a worker's network was cut
	victimKill         = "job-05"                               // its first run waits to be killed with its worker
	victimCut          = "job-10"                               // its first run after the kill waits while its worker is cut off
	markPauseDone      = "pause-done"                           // a worker was stopped
	victimPause        = "job-15"                               // its first run after the cut works on while its worker is stopped
	eventsSock         = "events.sock"
)

// quietLogger logs the SDK's warnings and errors to stderr (stdout carries
// the worker's ready line).
func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// scenarioWorker is one worker machine: it serves RunJob and RunJobs on
// its queues through a pilot.Dispatcher whose one provider is the ledger
// agent, prints "ready" once it polls, and stops when stdin closes or on
// SIGTERM.
func scenarioWorker() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	reg, err := pilot.NewRegistry(pilot.Provider{
		Name: "ledger", Runner: "command", Argv: []string{exe, "{prompt}"},
		Env: map[string]string{envLedgerAgent: "1", envLedger: os.Getenv(envLedger), envMarks: os.Getenv(envMarks)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	d := &pilot.Dispatcher{Providers: reg, RunDir: os.Getenv(envWorkerRunDir), Grace: time.Second}
	c, err := client.Dial(client.Options{HostPort: os.Getenv(envWorkerAddr), Namespace: os.Getenv(envWorkerNS), Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: dial:", err)
		return 1
	}
	defer c.Close()
	acts := &Activities{Dispatcher: d, Host: os.Getenv(envWorkerHost), CacheDir: os.Getenv(envWorkerCache), WorktreeDir: os.Getenv(envWorkerWorktrees)}
	var ws []worker.Worker
	for _, q := range strings.Split(os.Getenv(envScenarioWorker), ",") {
		w := worker.New(c, q, worker.Options{})
		acts.Register(w)
		RegisterWorkflow(w)
		if err := w.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "worker: start:", err)
			return 1
		}
		ws = append(ws, w)
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	for _, w := range ws {
		w.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pilot.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker: shutdown:", err)
		return 1
	}
	return 0
}

// ledgerAgent is the scenario's fake agent. Given its job's name, it
// appends "start JOB GEN PID HOST BUSY" to the ledger before anything else
// (BUSY: what holdLocks found held, "-" for nothing), then
// commits "work of JOB" in its worktree (the current directory), appends
// "done JOB GEN", and last "end JOB GEN". Ended by SIGTERM (pilot ending
// it, or its supervisor when its worker died), it appends "end JOB GEN"
// and exits; so in the ledger's order every run of a job is a
// [start, end] interval, and two generations' agents alive at once show
// as one's start inside the other's interval. A run that finds the work
// committed already (an earlier generation committed and was ended
// before its done line) does not do it again, as an agent resuming its
// job would: it appends "recovered JOB GEN" if no done or recovered line
// is there (a generation that recovered it may be superseded in turn).
// The three victims, before their work, wait to be faulted and then keep
// working (a "work JOB GEN" line every 20 ms) until they are ended.
func ledgerAgent(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "ledger agent: want the job's name")
		return 2
	}
	job := args[0]
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "ledger agent:", err)
		return 1
	}
	ctx := context.Background()
	blob, err := git(ctx, ".", nil, "cat-file", "blob", FenceRefPrefix+job)
	if err != nil {
		// A clone of a remote: the fence as this host last moved it.
		if blob, err = git(ctx, ".", nil, "cat-file", "blob", "refs/pilot/seen/fence/"+job); err != nil {
			return fail(err)
		}
	}
	var own Owner
	if err := json.Unmarshal([]byte(blob), &own); err != nil {
		return fail(err)
	}
	gen := own.Generation
	// ledgerMu orders the agent's own lines: once "end" is written, the
	// work loop writes no more (it could, between the end line and
	// the exit, and the check would see work outside the run).
	var ledgerMu sync.Mutex
	ended := false
	end := func() {
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		if ended {
			return
		}
		ended = true
		if err := appendLedger(fmt.Sprintf("end %s %d\n", job, gen)); err != nil {
			fmt.Fprintln(os.Stderr, "ledger agent:", err)
		}
	}
	work := func() error {
		ledgerMu.Lock()
		defer ledgerMu.Unlock()
		if ended {
			return nil
		}
		return appendLedger(fmt.Sprintf("work %s %d\n", job, gen))
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	busy := holdLocks(os.Getenv(envMarks), job)
	if err := appendLedger(fmt.Sprintf("start %s %d %d %s %s\n", job, gen, os.Getpid(), own.Host, busy)); err != nil {
		return fail(err)
	}
	go func() {
		<-term
		end()
		os.Exit(143)
	}()
	defer end()
	if log, err := git(ctx, ".", nil, "log", "--format=%s"); err != nil {
		return fail(err)
	} else if strings.Contains(log, "work of "+job+" ") {
		data, err := os.ReadFile(os.Getenv(envLedger))
		if err != nil && !os.IsNotExist(err) {
			return fail(err)
		}
		seen := "\n" + string(data)
		if !strings.Contains(seen, "\ndone "+job+" ") && !strings.Contains(seen, "\nrecovered "+job+" ") {
			if err := appendLedger(fmt.Sprintf("recovered %s %d\n", job, gen)); err != nil {
				return fail(err)
			}
		}
		fmt.Println("already done")
		return 0
	}
	marks := os.Getenv(envMarks)
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(marks, name))
		return err == nil
	}
	mid := func() {
		c, err := net.Dial("unix", filepath.Join(marks, eventsSock))
		if err == nil {
			fmt.Fprintf(c, "mid %s %d\n", job, gen)
			c.Close()
		}
		// Working on until pilot ends this worker: the agent's own pace,
		// not a wait for anything.
		for {
			if err := work(); err != nil {
				fmt.Fprintln(os.Stderr, "ledger agent:", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	switch {
	case job == victimKill && !exists(markKillDone):
		mid()
	case job == victimCut && !exists(markCutDone):
		for !exists(markKillDone) {
			time.Sleep(10 * time.Millisecond) // the agent waits; the test never sleeps
		}
		mid()
	case job == victimPause && !exists(markPauseDone):
		for !exists(markCutDone) {
			time.Sleep(10 * time.Millisecond)
		}
		mid()
	}
	if err := os.WriteFile(job+".txt", []byte(job+"\n"), 0o644); err != nil {
		return fail(err)
	}
	msg := fmt.Sprintf("work of %s (generation %d)", job, gen)
	for _, a := range [][]string{{"add", job + ".txt"}, {"-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-m", msg}} {
		if _, err := git(ctx, ".", nil, a...); err != nil {
			return fail(err)
		}
	}
	if err := appendLedger(fmt.Sprintf("done %s %d\n", job, gen)); err != nil {
		return fail(err)
	}
	fmt.Println("done", job)
	return 0
}

// appendLedger appends line to the ledger, in one write.
// writesFile is the file in the marks dir that maps each job to its
// Writes, for the ledger agents' locks.
const writesFile = "writes.json"

// heldLocks keeps the lock files holdLocks opened: a file the garbage
// collector closed would release its lock.
var heldLocks []*os.File

// holdLocks takes, for the ledger agent of job, an exclusive flock on a
// file in marks for the job ("job:NAME") and one for each file it writes
// ("write:PATH", from writesFile), and keeps them while the agent lives:
// the kernel releases them when it dies, by SIGKILL too, which leaves no
// "end" line. So a start line's BUSY is the proof of overlap, and its
// absence the proof that an earlier agent without an end line is dead.
// It returns the names another live agent held, comma-separated, or "-".
func holdLocks(marks, job string) string {
	names := []string{"job:" + job}
	if data, err := os.ReadFile(filepath.Join(marks, writesFile)); err == nil {
		var writes map[string][]string
		if json.Unmarshal(data, &writes) == nil {
			for _, w := range writes[job] {
				names = append(names, "write:"+w)
			}
		}
	}
	var busy []string
	for _, n := range names {
		path := filepath.Join(marks, "lock-"+strings.NewReplacer("/", "_", ":", "_").Replace(n))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			busy = append(busy, n+"(unlockable)")
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			busy = append(busy, n)
			f.Close()
			continue
		}
		heldLocks = append(heldLocks, f)
	}
	if len(busy) == 0 {
		return "-"
	}
	return strings.Join(busy, ",")
}

func appendLedger(line string) error { return appendTo(os.Getenv(envLedger), line) }

// appendTo appends line to the file at path, in one write.
func appendTo(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// A proxy forwards TCP connections to target until cut, which closes
// every connection and refuses new ones until restore.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cutOff bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cutOff {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOff = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.cutOff = false
	p.mu.Unlock()
}

func (p *proxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// readLines sends each line read from r to the returned channel.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		s := bufio.NewScanner(r)
		for s.Scan() {
			ch <- s.Text()
		}
	}()
	return ch
}
