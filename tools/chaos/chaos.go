//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
)

// Config is one chaos session.
type Config struct {
	Runs     int
	Seed     uint64
	Parallel int
	// Dir holds the runs' directories, each removed once checked.
	Dir string
	// Exe is the program that is the fake agent and the child pilot
	// (see main and childMain).
	Exe string
	// BigLine is the size of the big-line kind's one line.
	BigLine int
	// KeepDir, when set, receives the directories of runs that broke a
	// promise.
	KeepDir string
	// Log, when set, receives each problem as it is found.
	Log io.Writer
	// Kinds, when set, limits the mix to these kinds.
	Kinds []string
}

// Report is the figures of a chaos session.
type Report struct {
	Runs  int            `json:"runs"`
	Kinds map[string]int `json:"kinds"`
	// The promises: each should be 0.
	Orphans         int `json:"orphans"`
	MissingVerdicts int `json:"missing_verdicts"`
	OpenRecords     int `json:"open_records"`
	HalfWritten     int `json:"half_written"`
	// WrongVerdicts counts lone dispatches whose verdict is not the one
	// their misbehaviour must get (a worker killed by SIGSEGV reported as
	// completed, say); it should be 0 too.
	WrongVerdicts int `json:"wrong_verdicts"`

	// What was checked.
	Jobs      int `json:"jobs"`      // jobs that owed a verdict
	Records   int `json:"records"`   // record.json files read
	Processes int `json:"processes"` // distinct processes seen (workers and descendants)
	// Outcomes counts verdicts by "verdict/failure_class".
	Outcomes map[string]int `json:"outcomes"`
	// PilotErrors counts jobs whose verdict is pilot's own failure to
	// keep its records (the injected write errors), each with its
	// synthesized verdict.
	PilotErrors int `json:"pilot_errors"`
	// KilledPilotRecords counts the records of pilots SIGKILLed mid-run
	// that no pilot has opened since: they say "running", which their
	// provenance pid shows to be stale. AbandonedRecords counts those a
	// pilot opening the run directory has closed out since ("abandoned",
	// with the proof).
	KilledPilotRecords int `json:"killed_pilot_records"`
	AbandonedRecords   int `json:"abandoned_records"`
	// KilledPilotTempFiles counts the prepared (empty) temporary files
	// for final records that SIGKILLed pilots left.
	KilledPilotTempFiles int     `json:"killed_pilot_temp_files"`
	Seconds              float64 `json:"seconds"`
	Seed                 uint64  `json:"seed"`
	// Skipped holds the kinds that cannot run on this machine, with why.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Problems describes the first broken promises.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every promise held.
func (r *Report) OK() bool {
	return r.Orphans == 0 && r.MissingVerdicts == 0 && r.OpenRecords == 0 && r.HalfWritten == 0 && r.WrongVerdicts == 0
}

// WriteText prints the figures for people.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "runs              %d (seed %d, %.1fs)\n", r.Runs, r.Seed, r.Seconds)
	fmt.Fprintf(w, "kinds            ")
	for _, k := range sortedKeys(r.Kinds) {
		fmt.Fprintf(w, " %s=%d", k, r.Kinds[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "jobs              %d (records read %d, processes seen %d)\n", r.Jobs, r.Records, r.Processes)
	fmt.Fprintf(w, "outcomes         ")
	for _, k := range sortedKeys(r.Outcomes) {
		fmt.Fprintf(w, " %s=%d", k, r.Outcomes[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "pilot errors      %d (injected write errors, each job with a synthesized verdict)\n", r.PilotErrors)
	fmt.Fprintf(w, "killed pilots     %d records left running, %d prepared temp files left; %d records closed out as abandoned by the next pilot\n",
		r.KilledPilotRecords, r.KilledPilotTempFiles, r.AbandonedRecords)
	fmt.Fprintf(w, "orphans           %d\n", r.Orphans)
	fmt.Fprintf(w, "missing verdicts  %d\n", r.MissingVerdicts)
	fmt.Fprintf(w, "open records      %d\n", r.OpenRecords)
	fmt.Fprintf(w, "half written      %d\n", r.HalfWritten)
	fmt.Fprintf(w, "wrong verdicts    %d\n", r.WrongVerdicts)
	for _, k := range slices.Sorted(maps.Keys(r.Skipped)) {
		fmt.Fprintf(w, "skipped           %s: %s\n", k, r.Skipped[k])
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// A kind is one way of abusing pilot.
type kind struct {
	name string
	// weight is how often it is drawn relative to the others.
	weight int
	run    func(c *runCtx)
}

// kinds is every kind of run, dispatches first.
var kinds = []kind{
	{"ignore-term", 3, dispatchKind(script{steps: []string{"ignore-term", "out=ready", "block"}, timeout: 300 * time.Millisecond, want: "error/timeout"})},
	{"grandchild-holds-stdout", 3, dispatchKind(script{steps: []string{"spawn:hold", "ready", "block", "end", "out=done"}, want: "completed"})},
	{"setsid-double-fork", 3, dispatchKind(script{steps: doubleFork, want: "completed"})},
	{"exits-while-tools-run", 3, dispatchKind(script{steps: []string{
		"spawn", "ignore-term", "ready", "block", "end",
		"spawn:setsid", "ready", "sleep=1h", "end", "out=done", "exit=0"}, want: "completed"})},
	{"big-line", 1, func(c *runCtx) {
		c.dispatch(script{steps: []string{"out=before", "bigline=" + strconv.Itoa(c.cfg.BigLine), "out=after"}, want: "completed"})
	}},
	{"flood-stderr", 2, dispatchKind(script{steps: []string{"flood=" + strconv.Itoa(8<<20), "out=done"}, want: "completed"})},
	{"invalid-utf8-nul", 3, dispatchKind(script{steps: invalidBytes, want: "completed"})},
	{"torn-final-line", 3, dispatchKind(script{steps: []string{"out=first", `raw={"type":"message_update","partial`}, want: "completed"})},
	{"exit-between-session-writes", 3, dispatchKind(script{steps: sessionThenExit, want: "error/generic-error"})},
	{"sleep-past-every-timeout", 3, dispatchKind(script{steps: []string{"sleep=1h"}, timeout: 300 * time.Millisecond, idle: 200 * time.Millisecond, want: "error/idle-timeout"})},
	{"idle-timeout", 2, dispatchKind(script{steps: []string{"out=hello", "block"}, idle: 200 * time.Millisecond, want: "error/idle-timeout"})},
	{"sigsegv", 3, dispatchKind(script{steps: []string{"out=about to crash", "err=segfault ahead", "signal=11"}, want: "error/process-terminated/SIGSEGV"})},
	{"cancel", 3, dispatchKind(script{steps: []string{"spawn:hold", "ignore-term", "ready", "block", "end", "out=ready", "block"}, cancelOnReady: true, want: "error/cancelled"})},
	{"memory-hog", 2, dispatchKind(script{steps: memoryHog, memory: hogLimit, want: "error/memory-limit"})},
	{"fanout", 6, runFanout},
	{"pilot-sigkilled-mid-fanout", 2, runKilledPilot},
	{"pilot-sigkilled-then-reopened", 2, runKilledPilot},
	{"pilots-share-a-state-file", 2, runSharedState},
	{"run-dir-unwritable-mid-run", 2, runDiskFull},
	{"two-pilots-one-run-dir", 2, runTwoPilots},
	{"two-pid-namespaces-one-run-dir", 2, runTwoPilotsInPidNamespaces},
	{"finished-but-hangs", 3, runFinishedButHangs},
	{"observer-blocks", 2, runObserverBlocks},
	{"supervisor-sigkilled", 2, runSupervisorKilled},
	{"worker-junks-every-fd", 3, runJunkFDs},
	{"worker-kills-its-parent", 3, runKillParent},
}

// skips holds, for each kind that cannot run on every machine, why it
// cannot run on this one ("" when it can): such a kind is left out of the
// mix, even when Config.Kinds names it, and the report says why.
var skips = map[string]func() string{
	"worker-kills-its-parent":        needSignalScope,
	"two-pid-namespaces-one-run-dir": needPidNamespace,
}

// doubleFork: the worker starts a setsid'd child that starts a setsid'd,
// SIGTERM-ignoring grandchild and exits, leaving it to the subreaper.
var doubleFork = []string{
	"spawn:setsid,hold",
	"spawn:setsid,hold", "ignore-term", "ready", "block", "end",
	"ready", "exit=0",
	"end",
	"out=done",
}

// memoryHog: a SIGTERM-ignoring child in a session of its own grows past
// hogLimit, a little at a time, and holds it; the worker only waits.
var memoryHog = []string{
	"spawn:setsid", "ignore-term", "alloc=24MiB", "ready", "alloc=24MiB", "alloc=24MiB", "alloc=24MiB", "block", "end",
	"out=spawned a hog", "block",
}

// hogLimit is the memory limit of memoryHog's tree.
const hogLimit = 64 * size.MiB

// invalidBytes writes NUL bytes and invalid UTF-8 on both streams.
var invalidBytes = []string{
	`bytes=\x00\x00nul\x00bytes\n`,
	`bytes=\xff\xfe\xc3\x28 not utf-8 \xe2\x82\n`,
	"err=\xff\xfe stderr not utf-8 \xc3\x28",
	`bytes={\"type\":\"result\",\"text\":\"\x00\xff\"}\n`,
	"out=done",
}

// sessionThenExit writes a pi session entry by entry and dies between two
// writes, the last entry torn.
var sessionThenExit = []string{
	"session={session_path}",
	`sess={"type":"session","version":3,"id":"chaos","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`,
	`sess={"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"go"}]}}`,
	`sessraw={"type":"message","id":"a1","parentId":"u1","message":{"role":"assis`,
	"out=between writes",
	"exit=1",
}

// fanoutScripts are the misbehaviours a fanout's jobs draw from.
var fanoutScripts = []script{
	{steps: []string{"out=fine"}},
	{steps: []string{"err=failing", "exit=3"}},
	{steps: []string{"ignore-term", "out=ready", "block"}, timeout: 300 * time.Millisecond},
	{steps: []string{"spawn:hold", "ready", "block", "end", "out=done"}},
	{steps: doubleFork},
	{steps: invalidBytes},
	{steps: sessionThenExit},
	{steps: []string{"out=about to crash", "signal=11"}},
	{steps: []string{"out=hello", "block"}, idle: 200 * time.Millisecond},
	{steps: []string{"flood=" + strconv.Itoa(1<<20), "raw=torn"}},
	{steps: memoryHog, memory: hogLimit},
}

// script is one worker's behaviour and the task's limits.
type script struct {
	steps         []string
	timeout, idle time.Duration
	memory        size.Bytes // the memory limit; 0 for none
	cancelOnReady bool       // cancel the dispatch when the worker prints "ready"
	// want is the verdict a lone dispatch must get: "completed", or
	// "error/CLASS", optionally with "/SIGNAL" (how the worker died) to
	// check that too.
	want string
}

func dispatchKind(s script) func(*runCtx) {
	return func(c *runCtx) { c.dispatch(s) }
}

// grace is the Dispatchers' grace period: short, so that runs that end a
// worker are quick; every kill is the supervisor's, however short.
const grace = 200 * time.Millisecond

// finishGrace is the Dispatchers' FinishGrace: how long a worker that
// printed its final result may hang.
const finishGrace = 200 * time.Millisecond

// envTag marks every process of one run: the providers set it, so the
// worker and all its descendants carry it.
const envTag = "PILOT_CHAOS_TAG"

// runCtx is one run in progress and what it found.
type runCtx struct {
	cfg  *Config
	rng  *rand.Rand
	kind string
	dir  string // the run's run directory
	tag  string // envTag=value

	mu       sync.Mutex
	pids     map[int]bool // every process reported: workers, spawned
	jobs     int          // jobs that owe a verdict
	verdicts []pilot.JobResult
	wrong    int // verdicts that are not the one the misbehaviour must get
	problems []string
	killed   bool // the run's pilot was SIGKILLed: its records stay running
	// reconciled: after the kill, the run directory was reconciled (as
	// the next pilot to open it does): no record may say running, no
	// temporary file may be left.
	reconciled bool
	injected   bool // a write error was injected: pilot errors are expected
}

func (c *runCtx) problem(format string, a ...any) {
	c.mu.Lock()
	c.problems = append(c.problems, c.kind+": "+fmt.Sprintf(format, a...))
	c.mu.Unlock()
}

func (c *runCtx) addPid(pid int) {
	if pid > 0 {
		c.mu.Lock()
		c.pids[pid] = true
		c.mu.Unlock()
	}
}

// provider is a command-runner provider running the fake agent with steps.
func (c *runCtx) provider(name string, steps []string) pilot.Provider {
	tk, tv, _ := strings.Cut(c.tag, "=")
	return pilot.Provider{
		Name:   name,
		Runner: "command",
		Argv:   append([]string{c.cfg.Exe}, steps...),
		Env:    map[string]string{fakeagent.EnvFakeAgent: "1", tk: tv, "GORACE": "atexit_sleep_ms=0"},
	}
}

// dispatcher is a Dispatcher over ps writing into the run's directory,
// noting every worker and spawned pid; onReady is called for a worker's
// "ready" line.
func (c *runCtx) dispatcher(onReady func(), ps ...pilot.Provider) *pilot.Dispatcher {
	d, err := newDispatcher(c.dir, ps, c.addPid, func(line string) {
		if line == "ready" && onReady != nil {
			onReady()
		}
	})
	if err != nil {
		panic(err) // the providers are this program's own
	}
	return d
}

// newDispatcher is the Dispatcher of a chaos run and of a child pilot: ps,
// runDir, PATH alone from the environment, and test-sized grace periods.
// pid is told every worker's pid and every "spawned PID" a worker prints;
// line gets every stdout line.
func newDispatcher(runDir string, ps []pilot.Provider, pid func(int), line func(string)) (*pilot.Dispatcher, error) {
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		return nil, err
	}
	return &pilot.Dispatcher{
		Runners:     append(agents.Runners(), finalRunner{}),
		Providers:   reg,
		RunDir:      runDir,
		Grace:       grace,
		FinishGrace: finishGrace,
		WaitDelay:   time.Second,
		LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.LookupEnv(k)
			}
			return "", false
		},
		Observer: func(e pilot.Event) {
			if e.Started != nil {
				pid(e.Started.Pid)
			}
		},
		OnLine: func(_ string, l pilot.Line) {
			if l.Stream != pilot.Stdout {
				return
			}
			if s, ok := bytes.CutPrefix(l.Data, []byte("spawned ")); ok {
				if n, err := strconv.Atoi(string(s)); err == nil {
					pid(n)
				}
			}
			line(string(l.Data))
		},
	}, nil
}

func (s script) task(provider string, mode pilot.Mode, workdir string) pilot.Task {
	return pilot.Task{Provider: provider, Mode: mode, Prompt: "chaos", Workdir: workdir, Timeout: s.timeout, IdleTimeout: s.idle, MemoryLimit: s.memory}
}

func (c *runCtx) dispatch(s script) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var onReady func()
	if s.cancelOnReady {
		onReady = cancel
	}
	d := c.dispatcher(onReady, c.provider("chaos", s.steps))
	c.jobs = 1
	v, err := d.Dispatch(ctx, s.task("chaos", pilot.ModeCode, c.cfg.Dir))
	if err != nil {
		c.problem("Dispatch: %v", err)
		return
	}
	c.verdicts = append(c.verdicts, pilot.JobResult{Verdict: v})
	got := outcome(v)
	if s.want != "" && got != s.want && !strings.HasPrefix(got, s.want+"/") {
		c.wrong++
		c.problem("verdict %s, want %s (stderr tail %q)", got, s.want, v.StderrTail)
	}
}

// outcome is how a script's want reads v: "completed", or
// "error/CLASS", with "/SIGNAL" when a signal ended the worker.
func outcome(v pilot.Verdict) string {
	got := string(v.Verdict)
	if v.FailureClass != "" {
		got += "/" + string(v.FailureClass)
	}
	if v.Signal != "" {
		got += "/" + v.Signal
	}
	return got
}

func runFanout(c *runCtx) {
	n := 2 + c.rng.IntN(5)
	var ps []pilot.Provider
	var jobs []pilot.Job
	cancelAt := -1
	if c.rng.IntN(4) == 0 {
		cancelAt = c.rng.IntN(n)
	}
	for i := 0; i < n; i++ {
		s := fanoutScripts[c.rng.IntN(len(fanoutScripts))]
		steps := s.steps
		if i == cancelAt {
			steps = []string{"out=ready", "block"}
		}
		name := "p" + strconv.Itoa(i)
		ps = append(ps, c.provider(name, steps))
		jobs = append(jobs, pilot.Job{Task: s.task(name, pilot.ModeExplore, c.cfg.Dir)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var onReady func()
	if cancelAt >= 0 {
		onReady = cancel // only the cancelling job prints a bare "ready"
	}
	f := &pilot.Fanout{
		Dispatcher:  c.dispatcher(onReady, ps...),
		MaxParallel: c.rng.IntN(n + 1),
		FailFast:    c.rng.IntN(3) == 0,
	}
	if c.rng.IntN(3) == 0 {
		// A budget from none of the jobs fitting (one runs at a time)
		// to all of them.
		f.MemoryBudget = size.Bytes(c.rng.IntN(n+1)) * (512 * size.MiB) // a job's default expected peak
	}
	c.jobs = n
	vs, err := f.Run(ctx, jobs)
	if err != nil {
		c.problem("Fanout.Run: %v", err)
		return
	}
	if len(vs) != n {
		c.problem("%d verdicts for %d jobs", len(vs), n)
	}
	c.verdicts = append(c.verdicts, vs...)
}

// Run runs cfg's session and returns its figures.
func Run(cfg Config) *Report {
	start := time.Now()
	rep := &Report{Runs: cfg.Runs, Seed: cfg.Seed, Kinds: map[string]int{}, Outcomes: map[string]int{}}
	var pool []kind
	for _, k := range kinds {
		if len(cfg.Kinds) > 0 && !slices.Contains(cfg.Kinds, k.name) {
			continue
		}
		if skip := skips[k.name]; skip != nil {
			if why := skip(); why != "" {
				if rep.Skipped == nil {
					rep.Skipped = map[string]string{}
				}
				rep.Skipped[k.name] = why
				continue
			}
		}
		pool = append(pool, k)
	}
	if len(pool) == 0 {
		rep.Runs = 0
		return rep
	}
	total := 0
	for _, k := range pool {
		total += k.weight
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	// token tells this Run's processes from another's with the same
	// seed (a second chaos run on the machine, a test beside the
	// command): a run's tag is its seed, its index and this.
	token := fmt.Sprintf("%d.%x", os.Getpid(), rand.Uint64())
	idx := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
				pick := rng.IntN(total)
				k := pool[0]
				for _, kk := range pool {
					if pick < kk.weight {
						k = kk
						break
					}
					pick -= kk.weight
				}
				c := &runCtx{
					cfg:  &cfg,
					rng:  rng,
					kind: k.name,
					dir:  filepath.Join(cfg.Dir, fmt.Sprintf("run-%05d", i)),
					tag:  fmt.Sprintf("%s=%d-%d-%s", envTag, cfg.Seed, i, token),
					pids: map[int]bool{},
				}
				k.run(c)
				res := c.check()
				mu.Lock()
				rep.Kinds[k.name]++
				rep.add(res)
				for p := range c.pids {
					seen[p] = true
				}
				mu.Unlock()
				if len(res.problems) > 0 {
					if cfg.Log != nil {
						for _, p := range res.problems {
							fmt.Fprintf(cfg.Log, "run %d: %s\n", i, p)
						}
					}
					if cfg.KeepDir != "" {
						os.MkdirAll(cfg.KeepDir, 0o700)
						os.Rename(c.dir, filepath.Join(cfg.KeepDir, filepath.Base(c.dir)))
					}
				}
				os.RemoveAll(c.dir)
			}
		}()
	}
	for i := 0; i < cfg.Runs; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	rep.Processes = len(seen)
	rep.Seconds = time.Since(start).Seconds()
	return rep
}

// result is what checking one run found.
type result struct {
	orphans, missing, open, half, wrong int
	jobs, records                       int
	outcomes                            map[string]int
	pilotErrors                         int
	killedRecords, killedTemps          int
	abandoned                           int
	problems                            []string
}

func (r *Report) add(res result) {
	r.Orphans += res.orphans
	r.MissingVerdicts += res.missing
	r.OpenRecords += res.open
	r.HalfWritten += res.half
	r.WrongVerdicts += res.wrong
	r.Jobs += res.jobs
	r.Records += res.records
	r.PilotErrors += res.pilotErrors
	r.KilledPilotRecords += res.killedRecords
	r.AbandonedRecords += res.abandoned
	r.KilledPilotTempFiles += res.killedTemps
	for k, n := range res.outcomes {
		r.Outcomes[k] += n
	}
	for _, p := range res.problems {
		if len(r.Problems) < 20 {
			r.Problems = append(r.Problems, p)
		}
	}
}

// check looks at what the run left: processes, verdicts, records, files.
func (c *runCtx) check() result {
	res := result{outcomes: map[string]int{}, jobs: c.jobs, wrong: c.wrong}
	res.problems = append(res.problems, c.problems...)
	bad := func(n *int, format string, a ...any) {
		*n++
		res.problems = append(res.problems, c.kind+": "+fmt.Sprintf(format, a...))
	}

	// No process of the run may be alive: the ones reported (workers,
	// spawned descendants) and any process carrying the run's tag, which
	// every descendant inherits. Dispatch and Fanout.Run return only
	// once the trees are gone, so nothing is waited for; a SIGKILLed
	// pilot's supervisor gets its grace period (see runKilledPilot).
	for _, pid := range procfs.WithEnv(c.tag) {
		c.addPid(pid)
		bad(&res.orphans, "process %d of the run is still alive: %s", pid, cmdline(pid))
		syscall.Kill(pid, syscall.SIGKILL)
	}

	// Every job has a verdict.
	got := 0
	for _, r := range c.verdicts {
		v := r.Verdict
		if v.Verdict == "" {
			continue
		}
		got++
		key := string(v.Verdict)
		if v.FailureClass != "" {
			key += "/" + string(v.FailureClass)
		}
		if r.Synthesized {
			key += "/synthesized"
		}
		res.outcomes[key]++
		if r.Synthesized && strings.Contains(v.StderrTail, "pilot:") && c.injected {
			res.pilotErrors++
		}
		if _, err := json.Marshal(r); err != nil {
			bad(&res.half, "verdict does not marshal: %v", err)
		}
		if v.Record != "" && !r.Synthesized {
			rec, err := pilot.ReadRecord(v.Record)
			switch {
			case err != nil:
				bad(&res.open, "the verdict's record %s: %v", v.Record, err)
			case rec.Verdict != v.Verdict:
				bad(&res.open, "record %s says %q, the verdict %q", v.Record, rec.Verdict, v.Verdict)
			}
		}
	}
	if got < c.jobs {
		bad(&res.missing, "%d of %d jobs have no verdict", c.jobs-got, c.jobs)
	}

	// Every record closed out, nothing half written.
	filepath.WalkDir(c.dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			if !os.IsNotExist(err) {
				bad(&res.half, "walking %s: %v", path, err)
			}
			return nil
		}
		if de.IsDir() {
			return nil
		}
		name := de.Name()
		switch {
		case name == "record.json":
			res.records++
			rec, err := pilot.ReadRecord(path)
			switch {
			case err != nil:
				bad(&res.half, "%s does not parse: %v", path, err)
			case rec.Status == "running" && c.killed && !c.reconciled:
				res.killedRecords++
			case rec.Status == "abandoned" && c.reconciled:
				res.abandoned++
				if rec.EndedAt == nil || rec.EvidenceExcerpt == "" {
					bad(&res.open, "%s is abandoned without ended_at or the proof", path)
				}
			case rec.Status == "running":
				bad(&res.open, "%s still says running", path)
			case rec.EndedAt == nil:
				bad(&res.open, "%s has status %q but no ended_at", path, rec.Status)
			}
		case strings.HasPrefix(name, ".record.json.tmp-") && c.killed && !c.reconciled:
			if st, err := os.Stat(path); err == nil && st.Size() != 0 {
				bad(&res.half, "%s: a temporary record with %d bytes", path, st.Size())
			}
			res.killedTemps++
		case strings.Contains(name, ".tmp-"), strings.HasPrefix(name, ".line-spill-"):
			bad(&res.half, "%s is a temporary file left behind", path)
		case name == "events.log":
			if err := jsonLines(path); err != nil {
				bad(&res.half, "%s: %v", path, err)
			}
		}
		return nil
	})
	return res
}

// jsonLines checks that every line of path is a JSON object and that the
// file ends with a newline.
func jsonLines(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		return fmt.Errorf("the last line is torn: %q", lastLine(data))
	}
	for i, l := range bytes.Split(data[:len(data)-1], []byte("\n")) {
		if !json.Valid(l) {
			return fmt.Errorf("line %d is not JSON: %q", i+1, l)
		}
	}
	return nil
}

func lastLine(data []byte) []byte {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[i+1:]
	}
	if len(data) > 200 {
		data = data[:200]
	}
	return data
}

func cmdline(pid int) string {
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 {
			ppid, _ := strconv.Atoi(f[1])
			return "state " + f[0] + " ppid " + f[1] + " (" + cmdArgs(pid) + "); parent: " + cmdArgs(ppid)
		}
	}
	return cmdArgs(pid)
}

func cmdArgs(pid int) string {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	s := strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// --- kinds with a pilot process of their own ---

// childSpec is what a child pilot runs: a fanout of one job per script.
type childSpec struct {
	RunDir  string     `json:"run_dir"`
	Workdir string     `json:"workdir"`
	Tag     string     `json:"tag"`
	Jobs    []childJob `json:"jobs"`
	// FullOnReady makes the child's files unwritable (RLIMIT_FSIZE 0,
	// SIGXFSZ ignored: writes fail with EFBIG) once a worker prints
	// "ready", then creates Trigger for the workers to go on.
	FullOnReady bool   `json:"full_on_ready,omitempty"`
	Trigger     string `json:"trigger,omitempty"`
	// Sandbox is the child's Dispatcher.Sandbox ("": the default).
	Sandbox sandbox.Mode `json:"sandbox,omitempty"`
	// PidNamespace starts the child as pid 1 of a pid namespace of its
	// own (unshare -rpf --mount-proc): a pilot in a container.
	PidNamespace bool `json:"-"`
}

const envChild = "PILOT_CHAOS_CHILD"

// childJob is one job of a child pilot: the worker's steps and the task's
// limits (0: the defaults).
type childJob struct {
	Steps     []string `json:"steps"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	IdleMS    int64    `json:"idle_ms,omitempty"`
	Memory    int64    `json:"memory,omitempty"` // the memory limit in bytes
}

// child is a started child pilot.
type child struct {
	cmd   *exec.Cmd
	lines chan string // its stdout, line by line, closed at its end
}

// startChild starts a child pilot running spec; extra become its
// descriptors from 3 up (exec.Cmd's ExtraFiles).
func (c *runCtx) startChild(spec childSpec, extra ...*os.File) (*child, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.cfg.Exe)
	if spec.PidNamespace {
		cmd = exec.Command("unshare", "-rpf", "--mount-proc", c.cfg.Exe)
	}
	cmd.Env = append(os.Environ(), envChild+"="+string(data), "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = extra
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, lines: make(chan string, 64)}
	go func() {
		defer close(ch.lines)
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if l != "" {
				ch.lines <- strings.TrimSuffix(l, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, nil
}

// follow reads the child's lines, noting pids, until it ends or stop
// returns true for a line; it returns the verdicts the child printed.
func (c *runCtx) follow(ch *child, stop func(string) bool) []pilot.JobResult {
	var vs []pilot.JobResult
	for l := range ch.lines {
		switch {
		case strings.HasPrefix(l, "pid "):
			n, _ := strconv.Atoi(l[len("pid "):])
			c.addPid(n)
		case strings.HasPrefix(l, "verdicts "):
			if err := json.Unmarshal([]byte(l[len("verdicts "):]), &vs); err != nil {
				c.problem("the child's verdicts do not parse: %v", err)
			}
		case strings.HasPrefix(l, "error "):
			c.problem("child pilot: %s", l[len("error "):])
		}
		if stop != nil && stop(l) {
			return vs
		}
	}
	return vs
}

func (c *runCtx) childSpec(scripts ...script) childSpec {
	spec := childSpec{RunDir: c.dir, Workdir: c.cfg.Dir, Tag: c.tag}
	for _, s := range scripts {
		spec.Jobs = append(spec.Jobs, childJob{Steps: s.steps, TimeoutMS: s.timeout.Milliseconds(), IdleMS: s.idle.Milliseconds(), Memory: int64(s.memory)})
	}
	return spec
}

// runKilledPilot: a child pilot runs a fanout whose workers hold setsid'd
// grandchildren; once every worker is ready the child is SIGKILLed. Its
// supervisor must end every tree (after the grace period).
func runKilledPilot(c *runCtx) {
	n := 1 + c.rng.IntN(3)
	var scripts []script
	for i := 0; i < n; i++ {
		switch c.rng.IntN(3) {
		case 0:
			scripts = append(scripts, script{steps: []string{"spawn:setsid", "ignore-term", "ready", "block", "end", "out=ready", "block"}})
		case 1:
			scripts = append(scripts, script{steps: append(append([]string{}, doubleFork[:len(doubleFork)-1]...), "ignore-term", "out=ready", "block")})
		default:
			scripts = append(scripts, script{steps: []string{"spawn:hold", "ready", "block", "end", "out=ready", "flood=1048576", "block"}})
		}
	}
	ch, err := c.startChild(c.childSpec(scripts...))
	if err != nil {
		c.problem("starting the child pilot: %v", err)
		return
	}
	c.killed = true
	ready := 0
	c.follow(ch, func(l string) bool {
		if l == "line ready" {
			ready++
		}
		return ready == n
	})
	// The supervisor is the child's child: it must not outlive it either.
	for _, p := range procfs.Children(ch.cmd.Process.Pid) {
		c.addPid(p)
	}
	tagged := procfs.WithEnv(c.tag)
	for _, p := range tagged {
		c.addPid(p)
	}
	ch.cmd.Process.Signal(syscall.SIGKILL)
	for range ch.lines {
	}
	ch.cmd.Wait()
	c.mu.Lock()
	var pids []int
	for p := range c.pids {
		pids = append(pids, p)
	}
	c.mu.Unlock()
	// The supervisor sees its control socket close, SIGTERMs every
	// tree, waits the grace period and SIGKILLs: wait for that (pidfds,
	// no polling), bounded well past the grace period.
	waitGone(pids, 30*time.Second)
	// Then, for pilot-sigkilled-then-reopened, a pilot opens the run
	// directory: the killed pilot's records are closed out as abandoned,
	// its temporary files removed.
	if c.kind == "pilot-sigkilled-then-reopened" {
		if _, err := rundir.Reconcile(c.dir); err != nil {
			c.problem("reconcile: %v", err)
		}
		c.reconciled = true
	}
}

// runSharedState: pilots that share one retry state file (each with a
// Store of its own, as separate pilots have) retry failing workers at
// once; every budget is counted whole and the file stays a state file.
func runSharedState(c *runCtx) {
	path := filepath.Join(c.dir, "state", retry.StateFileName)
	n := 2 + c.rng.IntN(3)
	const budget = 2
	d := c.dispatcher(nil, c.provider("chaos", []string{"err=failing", "exit=3"}))
	var wg sync.WaitGroup
	c.jobs = n
	vs := make([]retry.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := retry.OpenStore(path)
			if err != nil {
				c.problem("OpenStore: %v", err)
				return
			}
			defer st.Close()
			p := retry.Policy{MaxFailures: budget, State: st, Sleep: func(context.Context, time.Duration) error { return nil }}
			v, err := retry.Dispatch(context.Background(), d, pilot.Task{Provider: "chaos", Mode: pilot.ModeCode, Prompt: "chaos", Workdir: c.cfg.Dir},
				retry.Key{Task: "group/task-" + strconv.Itoa(i), Stage: "worker"}, p)
			if err != nil {
				c.problem("retry.Dispatch: %v", err)
			}
			vs[i] = v
		}()
	}
	wg.Wait()
	for _, v := range vs {
		c.verdicts = append(c.verdicts, pilot.JobResult{Verdict: v.Verdict, Synthesized: v.Synthesized})
	}
	st, err := retry.OpenStore(path)
	if err != nil {
		c.problem("the shared state file: %v", err)
		return
	}
	defer st.Close()
	for i, v := range vs {
		ts := st.Task("group/task-" + strconv.Itoa(i))
		if !v.Blocked || v.Attempts != budget || ts.Blocked == "" || ts.RecoveryFailures["worker"] != budget {
			c.wrong++
			c.problem("task %d: verdict blocked %v after %d attempts, state %+v; want blocked after %d, counted whole", i, v.Blocked, v.Attempts, ts, budget)
		}
	}
}

// runDiskFull: a child pilot runs a fanout of two jobs; when a worker is
// ready the child's files become unwritable (RLIMIT_FSIZE 0: every write
// that would grow a file fails with EFBIG, as on a full disk), and the
// workers go on writing output. Every job still gets a verdict (a
// synthesized one carrying pilot's error when pilot could not keep its
// records) and no record may be left saying running.
func runDiskFull(c *runCtx) {
	spec := c.childSpec(
		script{steps: []string{"out=ready", "await={run_dir}/../go", "flood=262144", "out=done"}},
		fanoutScripts[c.rng.IntN(len(fanoutScripts))],
	)
	spec.FullOnReady = true
	spec.Trigger = filepath.Join(c.dir, "go")
	ch, err := c.startChild(spec)
	if err != nil {
		c.problem("starting the child pilot: %v", err)
		return
	}
	c.injected = true
	c.jobs = len(spec.Jobs)
	c.verdicts = c.follow(ch, nil)
	if err := ch.cmd.Wait(); err != nil {
		c.problem("child pilot: %v", err)
	}
}

// runTwoPilots: two child pilots run fanouts into one run directory at
// once.
func runTwoPilots(c *runCtx) {
	var chs []*child
	for p := 0; p < 2; p++ {
		n := 1 + c.rng.IntN(3)
		var scripts []script
		for i := 0; i < n; i++ {
			scripts = append(scripts, fanoutScripts[c.rng.IntN(len(fanoutScripts))])
		}
		spec := c.childSpec(scripts...)
		ch, err := c.startChild(spec)
		if err != nil {
			c.problem("starting child pilot %d: %v", p, err)
			continue
		}
		c.jobs += n
		chs = append(chs, ch)
	}
	c.collect(chs, nil)
}

// runTwoPilotsInPidNamespaces: two pilots, each pid 1 of a pid namespace
// of its own (as two containers sharing a run directory are), the second
// started once the first's workers run, so that its reconcile (on its
// first dispatch) meets the first's live runs, whose pids mean nothing in
// its own /proc. Each pilot's jobs must end as their scripts say: a
// worker the other's reconcile killed, or a run it marked abandoned,
// shows as a wrong verdict.
func runTwoPilotsInPidNamespaces(c *runCtx) {
	held := script{steps: []string{"out=ready", "block"}, timeout: 1500 * time.Millisecond, want: "error/timeout"}
	quick := []script{{steps: []string{"out=fine"}, want: "completed"}, {steps: []string{"err=failing", "exit=3"}, want: "error/generic-error"}}
	var chs []*child
	var wants [][]string
	for p := 0; p < 2; p++ {
		scripts := []script{held}
		for range c.rng.IntN(3) {
			scripts = append(scripts, quick[c.rng.IntN(len(quick))])
		}
		var want []string
		for _, sc := range scripts {
			want = append(want, sc.want)
		}
		spec := c.childSpec(scripts...)
		spec.PidNamespace = true
		ch, err := c.startChild(spec)
		if err != nil {
			c.problem("starting child pilot %d: %v", p, err)
			continue
		}
		c.jobs += len(scripts)
		chs = append(chs, ch)
		wants = append(wants, want)
		if p == 0 {
			// The second starts once the first's held worker runs.
			running := false
			c.follow(ch, func(l string) bool {
				running = strings.HasPrefix(l, "pid ")
				return running
			})
			if !running {
				c.problem("the first pilot ended before a worker ran")
			}
		}
	}
	c.collect(chs, func(i int, vs []pilot.JobResult) {
		if len(vs) != len(wants[i]) {
			return // a missing verdict is counted as one
		}
		for k, v := range vs {
			if got := outcome(v.Verdict); got != wants[i][k] && !strings.HasPrefix(got, wants[i][k]+"/") {
				c.mu.Lock()
				c.wrong++
				c.mu.Unlock()
				c.problem("pilot %d, job %d: verdict %s, want %s (the other pilot's reconcile touched it?)", i, k, got, wants[i][k])
			}
		}
	})
}

// needPidNamespace says why two-pid-namespaces-one-run-dir cannot run
// here: no pid namespace can be made (unshare -rpf --mount-proc).
func needPidNamespace() string {
	if out, err := exec.Command("unshare", "-rpf", "--mount-proc", "true").CombinedOutput(); err != nil {
		return fmt.Sprintf("needs a pid namespace of its own (unshare -rpf --mount-proc: %v %s)", err, bytes.TrimSpace(out))
	}
	return ""
}

// collect follows child pilots to their ends and keeps their verdicts;
// check, when set, sees each one's verdicts (by its index in chs).
func (c *runCtx) collect(chs []*child, check func(i int, vs []pilot.JobResult)) {
	var wg sync.WaitGroup
	for i, ch := range chs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vs := c.follow(ch, nil)
			if err := ch.cmd.Wait(); err != nil {
				c.problem("child pilot: %v", err)
			}
			c.mu.Lock()
			c.verdicts = append(c.verdicts, vs...)
			c.mu.Unlock()
			if check != nil {
				check(i, vs)
			}
		}()
	}
	wg.Wait()
}

// waitGone waits until every pid has exited or timeout passes, without
// polling: pidfds in an epoll set.
func waitGone(pids []int, timeout time.Duration) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return
	}
	defer syscall.Close(ep)
	live := 0
	for _, pid := range pids {
		fd, _, errno := syscall.Syscall(434 /* pidfd_open */, uintptr(pid), 0, 0)
		if errno != 0 {
			continue // already gone
		}
		defer syscall.Close(int(fd))
		if syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}) == nil {
			live++
		}
	}
	deadline := time.Now().Add(timeout)
	events := make([]syscall.EpollEvent, 16)
	for live > 0 {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return
		}
		n, err := syscall.EpollWait(ep, events, ms)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			live--
			syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
		}
	}
}

// --- a worker that hangs after its final result ---

// finalRunner runs the fake agent as it is and watches for a "final-result"
// line: an agent CLI's last event, after which a CLI like Claude Code's -p
// mode may hang.
type finalRunner struct{}

func (finalRunner) Name() string { return "chaos-final" }

func (finalRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	return &pilot.Command{Argv: append([]string{a.Provider.Binary}, a.Provider.Args...), Watcher: &finalWatcher{}}, nil
}

type finalWatcher struct {
	st pilot.SessionState
}

func (w *finalWatcher) Line(l pilot.Line) {
	if string(l.Data) == "final-result" {
		w.st = pilot.SessionState{Phase: pilot.PhaseFinished, Reason: "stream:final-result"}
	}
}

func (w *finalWatcher) StreamState() (pilot.SessionState, time.Time, bool) {
	return w.st, time.Time{}, w.st.Phase != ""
}

func (w *finalWatcher) Finish(e pilot.Exit) pilot.Result {
	if w.st.Phase == pilot.PhaseFinished {
		return pilot.Result{Outcome: pilot.Completed}
	}
	return pilot.JudgeExit(e)
}

// runFinishedButHangs: the worker prints its final result and then
// neither exits nor says more, some of its descendants
// holding on too. pilot ends it a FinishGrace later, long before the
// idle timeout, and the verdict is the one its stream gave.
func runFinishedButHangs(c *runCtx) {
	steps := []string{"out=working", "out=final-result", "block"}
	want := "completed"
	if c.rng.IntN(2) == 0 {
		steps = append([]string{"spawn:setsid", "ignore-term", "ready", "block", "end"}, steps...)
	}
	p := c.provider("chaos", nil)
	p.Runner, p.Binary, p.Args, p.Argv = "chaos-final", c.cfg.Exe, steps, nil
	d := c.dispatcher(nil, p)
	c.jobs = 1
	s := script{timeout: time.Hour, idle: time.Hour}
	v, err := d.Dispatch(context.Background(), s.task("chaos", pilot.ModeCode, c.cfg.Dir))
	if err != nil {
		c.problem("Dispatch: %v", err)
		return
	}
	c.verdicts = append(c.verdicts, pilot.JobResult{Verdict: v})
	got := string(v.Verdict)
	if v.FailureClass != "" {
		got += "/" + string(v.FailureClass)
	}
	if got != want || v.TerminationReason != "finished-not-exited" {
		c.wrong++
		c.problem("verdict %s ended for %q, want %s ended for finished-not-exited", got, v.TerminationReason, want)
	}
}

// --- an observer that blocks ---

// runObserverBlocks: the Dispatcher's observer blocks on the started event
// until pilot has judged the worker (for as long as a minute), while the
// worker runs past its timeout. The observer must not delay supervision:
// the timeout ends the worker while the observer is stuck.
func runObserverBlocks(c *runCtx) {
	d := c.dispatcher(nil, c.provider("chaos", []string{"out=hello", "spawn:hold", "ready", "block", "end", "block"}))
	inner := d.Observer
	stuckThrough := false
	d.Observer = func(e pilot.Event) {
		inner(e)
		if e.Started == nil {
			return
		}
		log := filepath.Join(e.Started.RunDir, "events.log")
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if data, _ := os.ReadFile(log); bytes.Contains(data, []byte(`"type":"`+event.Verdict+`"`)) {
				stuckThrough = true
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c.jobs = 1
	s := script{timeout: 300 * time.Millisecond}
	v, err := d.Dispatch(context.Background(), s.task("chaos", pilot.ModeCode, c.cfg.Dir))
	if err != nil {
		c.problem("Dispatch: %v", err)
		return
	}
	c.verdicts = append(c.verdicts, pilot.JobResult{Verdict: v})
	if v.FailureClass != pilot.FailTimeout || !stuckThrough {
		c.wrong++
		c.problem("verdict %s/%s, judged while the observer was stuck: %v; want the timeout, judged then", v.Verdict, v.FailureClass, stuckThrough)
	}
}

// --- a SIGKILLed supervisor ---

// runSupervisorKilled: a child pilot runs one job whose worker holds a
// setsid'd, SIGTERM-ignoring daemon; once it runs, the child's supervisor
// is SIGKILLed. The worker dies with it; the daemon, adopted by the
// supervisor and out of its process group, must be ended by the child
// pilot, which still gives the job a verdict and closes its record.
func runSupervisorKilled(c *runCtx) {
	spec := c.childSpec(script{steps: []string{"spawn:setsid", "ignore-term", "ready", "block", "end", "out=ready", "block"}})
	ch, err := c.startChild(spec)
	if err != nil {
		c.problem("starting the child pilot: %v", err)
		return
	}
	c.jobs = 1
	killed := false
	c.verdicts = c.follow(ch, func(l string) bool {
		if l != "line ready" || killed {
			return false
		}
		killed = true
		for _, sup := range procfs.Children(ch.cmd.Process.Pid) {
			c.addPid(sup)
			syscall.Kill(sup, syscall.SIGKILL)
		}
		return false
	})
	if err := ch.cmd.Wait(); err != nil {
		c.problem("child pilot: %v", err)
	}
	if !killed {
		c.problem("the worker never got ready")
	}
	c.injected = true // the lost supervisor is pilot's own error, in a synthesized verdict
}
