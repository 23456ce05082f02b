package measure

import (
	"bufio"
	"context"
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

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// A Workers is P8's load: N cheap workers at once, each the fake agent
// replaying a recorded stream of Runner's CLI (Prefix.stdout) at Rate
// lines a second for For, its terminal event last.
type Workers struct {
	Exe    string // the fake agent's executable: it calls fakeagent.Main when EnvFakeAgent is set
	Runner string // agents.RunnerClaude or agents.RunnerPi
	Prefix string // the recording, without .stdout
	N      int
	Rate   float64
	For    time.Duration
	Dir    string // run directories and logs go under it
	// FinishGrace is the Dispatcher's (zero: its default).
	FinishGrace time.Duration
	// Midway, when set, is called once in Pilot halfway through For,
	// while every worker runs (for a heap profile of that moment).
	Midway func()
}

// ManyResult is what one side of P8 measured.
type ManyResult struct {
	Wall time.Duration // from the first start to the last verdict
	// CPU is user + system time: this process's (Self) and, for pilot,
	// its supervisor's (Sup), over the whole run.
	Self, Sup time.Duration
	// RSS is the most resident memory this process and the supervisor
	// held together during the run, less what they held before it; FDs
	// the most descriptors this process held at once, less before, and
	// SupFDs the supervisor's.
	// Sampling is the CPU time this harness spent looking at the
	// memory and descriptors while the run went on (on Linux; left out
	// of Self).
	Sampling    time.Duration
	RSS, SupRSS int64 // SupRSS: the supervisor's share of RSS at that moment
	FDs, SupFDs int
	Wrong       int    // workers whose verdict was not completed
	FirstWrong  string // what the first of them said
	Lines       int64  // stdout lines read, over all workers
	Limit       uint64 // RLIMIT_NOFILE's soft limit during the run
	SupervisorP int    // the supervisor's pid, 0 for the peers
}

// CPU is the run's CPU time, this process's and its supervisor's.
func (r ManyResult) CPU() time.Duration { return r.Self + r.Sup }

// stdoutBytes is how much a worker prints on stdout; 0 when the
// recording cannot be read.
func (w Workers) stdoutBytes() int64 {
	data, err := os.ReadFile(w.Prefix + ".stdout")
	if err != nil {
		return 0
	}
	ls := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	if len(ls) < 3 {
		return 0
	}
	n := int64(len(ls[0]) + len(ls[len(ls)-1]) + 1)
	body := ls[1 : len(ls)-1]
	for i := range int(w.Rate * w.For.Seconds()) {
		n += int64(len(body[i%len(body)]))
	}
	return n
}

// WorkerSeconds is how long the workers were meant to run, together.
func (w Workers) WorkerSeconds() float64 { return float64(w.N) * w.For.Seconds() }

func (w Workers) env() map[string]string {
	return map[string]string{
		fakeagent.EnvFakeAgent:  "1",
		fakeagent.EnvReplay:     w.Prefix,
		fakeagent.EnvReplayRate: strconv.FormatFloat(w.Rate, 'g', -1, 64),
		fakeagent.EnvReplayFor:  w.For.String(),
		"GOMAXPROCS":            "1", // a cheap worker: one thread running Go code
		"GODEBUG":               "",
		"GORACE":                "atexit_sleep_ms=0",
	}
}

// Pilot runs w's workers as one Fanout of w.Runner, all at once, their
// runs under runDir, and measures
// pilot's share: this process and its supervisor. The supervisor must be
// kept running (KeepSupervisor) and already started.
func (w Workers) Pilot(runDir string) (ManyResult, error) {
	reg, err := pilot.NewRegistry(pilot.Provider{Name: "cheap", Runner: w.Runner, Binary: w.Exe, Env: w.env()})
	if err != nil {
		return ManyResult{}, err
	}
	d := &pilot.Dispatcher{Runners: agents.Runners(), Providers: reg, RunDir: runDir, Grace: time.Second, FinishGrace: w.FinishGrace, EnvAllow: []string{"PATH"}}
	wd := filepath.Join(w.Dir, "work")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		return ManyResult{}, err
	}
	jobs := make([]pilot.Job, w.N)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "cheap", Mode: pilot.ModeReview, Prompt: "x", Workdir: wd}}
	}
	var lines atomic.Int64
	d.OnLine = func(_ string, l pilot.Line) {
		if l.Stream == pilot.Stdout {
			lines.Add(1)
		}
	}
	sup, err := supervisorPid()
	if err != nil {
		return ManyResult{}, err
	}
	var res ManyResult
	res.SupervisorP = sup
	var vs []pilot.JobResult
	if w.Midway != nil {
		t := time.AfterFunc(w.For/2, w.Midway)
		defer t.Stop()
	}
	err = sample(&res, sup, func() error {
		var err error
		vs, err = (&pilot.Fanout{Dispatcher: d, MaxParallel: w.N}).Run(context.Background(), jobs)
		return err
	})
	if err != nil {
		return res, err
	}
	for i, r := range vs {
		if r.Verdict.Verdict != pilot.Completed {
			if res.Wrong == 0 {
				v := r.Verdict
				res.FirstWrong = fmt.Sprintf("job %d: %s (%s) %q, stderr %q, output incomplete %v, %d ms, leftovers %d", i, v.Verdict, v.FailureClass, v.EvidenceExcerpt, v.StderrTail, v.OutputIncomplete, v.DurationMS, v.Leftovers)
				if rec, err := pilot.ReadRecord(v.Record); err == nil {
					res.FirstWrong += fmt.Sprintf(", stdout %d bytes (want %d)", rec.StdoutBytes, w.stdoutBytes())
				}
			}
			res.Wrong++
		}
	}
	res.Lines = lines.Load()
	return res, nil
}

// Peers runs w's workers the way the Go peers (multica, sortie) run
// theirs: os/exec, a goroutine per pipe reading lines with bufio.Scanner
// (its buffer allowed to grow to PeerMaxToken) and json.Unmarshal of each
// into a map[string]any, each line written to the worker's log file. A
// worker's verdict is right when it exited 0 and its last event was a
// successful result (Claude's) or the end of the agent's run (pi's).
func (w Workers) Peers(logDir string) (ManyResult, error) {
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return ManyResult{}, err
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range w.env() {
		env = append(env, k+"="+v)
	}
	var res ManyResult
	var (
		mu    sync.Mutex
		lines atomic.Int64
	)
	wrong := func(i int, why string) {
		mu.Lock()
		defer mu.Unlock()
		if res.Wrong == 0 {
			res.FirstWrong = fmt.Sprintf("worker %d: %s", i, why)
		}
		res.Wrong++
	}
	err := sample(&res, 0, func() error {
		var wg sync.WaitGroup
		errs := make([]error, w.N)
		for i := range w.N {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, why, err := peerWorker(w.Exe, env, filepath.Join(logDir, strconv.Itoa(i)+".log"), w.Runner, &lines)
				errs[i] = err
				if err == nil && !ok {
					wrong(i, why)
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	res.Lines = lines.Load()
	return res, err
}

// peerWorker runs one worker as the peers do and says whether it
// succeeded.
func peerWorker(exe string, env []string, logPath, runner string, lines *atomic.Int64) (ok bool, why string, err error) {
	log, err := os.Create(logPath)
	if err != nil {
		return false, "", err
	}
	defer log.Close()
	cmd := exec.Command(exe, "-p", "x", "--output-format", "stream-json", "--verbose")
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return false, "", err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return false, "", err
	}
	if err := cmd.Start(); err != nil {
		return false, "", err
	}
	var (
		logMu sync.Mutex
		last  map[string]any
		wg    sync.WaitGroup
	)
	read := func(r io.Reader, events bool) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), PeerMaxToken)
		for sc.Scan() {
			b := sc.Bytes()
			logMu.Lock()
			log.Write(b)
			log.Write([]byte{'\n'})
			logMu.Unlock()
			if !events {
				continue
			}
			lines.Add(1)
			var ev map[string]any
			if json.Unmarshal(b, &ev) == nil {
				last = ev
			}
		}
	}
	wg.Add(2)
	go read(stdout, true)
	go read(stderr, false)
	wg.Wait()
	werr := cmd.Wait()
	switch {
	case werr != nil:
		return false, werr.Error(), nil
	case runner == agents.RunnerPi && (last == nil || last["type"] != "agent_end"),
		runner != agents.RunnerPi && (last == nil || last["type"] != "result" || last["subtype"] != "success"):
		return false, fmt.Sprintf("last event %v", last), nil
	}
	return true, "", nil
}

// sample runs f and, while it runs, looks every 200 ms at this process's
// (and the supervisor sup's, when not 0) resident memory and descriptors,
// keeping the most; it fills res's figures from those and the CPU times.
func sample(res *ManyResult, sup int, f func() error) error {
	res.Limit, _ = fileLimit()
	// What earlier measurements left on the heap is returned to the
	// system first, so that the growth is the workers' whatever ran
	// before (memory kept from them would be reused unseen).
	debug.FreeOSMemory()
	rss := func() (int64, int64, error) {
		n, err := RSS("self")
		if err != nil || sup == 0 {
			return n, 0, err
		}
		m, err := RSS(strconv.Itoa(sup))
		return n + m, m, err
	}
	rss0, sup0RSS, err := rss()
	if err != nil {
		return err
	}
	fd0, supFD0 := countFDs("self"), 0
	if sup != 0 {
		supFD0 = countFDs(strconv.Itoa(sup))
	}
	// The looks run on a thread of their own, whose CPU time is the
	// harness's, not the measured side's: reading /proc/PID/fd of a
	// process holding thousands of descriptors five times a second
	// costs tens of µs per worker-second.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self0, sup0, own0 := selfCPU(), procCPU(sup), threadCPU()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	look := func() {
		if n, m, err := rss(); err == nil && n-rss0 > res.RSS {
			res.RSS, res.SupRSS = n-rss0, m-sup0RSS
		}
		res.FDs = max(res.FDs, countFDs("self")-fd0)
		if sup != 0 {
			res.SupFDs = max(res.SupFDs, countFDs(strconv.Itoa(sup))-supFD0)
		}
	}
	for {
		select {
		case <-t.C:
			look()
		case err := <-done:
			res.Wall = time.Since(start)
			res.Sampling = threadCPU() - own0
			res.Self, res.Sup = selfCPU()-self0-res.Sampling, procCPU(sup)-sup0
			return err
		}
	}
}

// countFDs is how many descriptors process pid ("self") holds; -1 when
// they cannot be listed.
func countFDs(pid string) int {
	es, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU is process pid's own user + system time so far (not its
// children's), from /proc/PID/stat; 0 for pid 0 or when unreadable.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields follow its ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14, utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	return time.Duration(ut+st) * clockTick
}

// CPU returns this process's CPU time so far (user + system) and its
// supervisor's (0 when none is running).
func CPU() (self, supervisor time.Duration) {
	sup, _ := supervisorPid()
	return selfCPU(), procCPU(sup)
}

// supervisorPid finds pilot's supervisor among this process's children:
// the one whose argv[0] is "pilot-supervisor".
func supervisorPid() (int, error) {
	kids, err := Children()
	if err != nil {
		return 0, err
	}
	for _, k := range kids {
		cmd, err := os.ReadFile("/proc/" + k + "/cmdline")
		if err == nil && strings.HasPrefix(string(cmd), "pilot-supervisor\x00") {
			return strconv.Atoi(k)
		}
	}
	return 0, errors.New("measure: no supervisor process is running")
}
