// Command bench measures pilot against its performance goals: each figure
// side by side with a baseline measured in the same process, interleaved
// over several rounds, and prints the medians, their ratio and whether the
// goal is met.
//
//	go run ./tools/bench [-only P1,P3] [-quick] [-json] [-rounds N]
//
// Rows:
//
//	P1   Dispatch of a trivial worker ×N vs os/exec of it, run
//	     directories on tmpfs (/dev/shm), sandbox off            ratio <= 1.15
//	P1-disk  the same, run directories on the default file system (a reference)
//	P1-sandbox  P1 under the default sandbox (secrets) vs off     ratio <= 1.10
//	P1b  pilot's per-job overhead vs a Python child per job      >= 20× smaller
//	P2   Fanout of 1000 trivial jobs at 64 vs errgroup + os/exec ratio <= 1.2
//	     (run directories on tmpfs; P2-disk: on the default file system)
//	P3   1 GiB of Claude stream-json through a dispatch vs the
//	     same through the command runner (no watcher; the floor)  throughput >= 0.9×
//	     (cat into a pipe measured beside them, for information)
//	P3m  peak RSS of the pilot process during P3                 <= 64 MiB
//	P3-pi, P3-codex, P3-opencode, P3-gemini, P3-qwen, P3-kilo, P3-copilot
//	     P3 for the other runners: their recorded streams' events
//	     repeated to P3's size, through a dispatch vs the floor   throughput >= 0.9×
//	P3-floor
//	     P3-codex's stream through the command runner, which
//	     watches nothing: what a dispatch costs before any
//	     watcher (reading, splitting, stream.log), vs cat       (no goal: a reference)
//	P4   pi session update after a 1 KiB append to 1 GiB vs a full parse
//	                                                             <= 1 ms, flat
//	P5   cancel → process tree gone (all ignore SIGTERM) vs grace <= grace + 100 ms
//	P6   memory per in-flight job at parallelism 256             <= 256 KiB
//	P7   pilot's claude watcher vs the Go peers' reader (bufio.Scanner,
//	     json.Unmarshal) on P3's stream without its big line      throughput >= 1.5×
//	     and, on a 16 MiB line before the result, pilot reads the result
//	P8   one pilot supervising 1000 workers at once, each printing a
//	     recorded Claude stream at 20 lines a second for 60 s: pilot's
//	     CPU (its own and its supervisor's) per worker-second vs the
//	     Go peers' shape (os/exec, a goroutine per pipe, bufio.Scanner,
//	     json.Unmarshal, a log write per line)   <= 100 µs and <= 0.5×;
//	     pilot's and the supervisor's memory per worker   <= 128 KiB;
//	     every verdict right
//	P9   makespan of 200 random graphs (20-200 jobs, write sets,
//	     heavy-tailed durations) over a simulated clock, the planned
//	     order (schedule.NewReadyPlanned) vs graph order, each against the bound
//	     max(critical path, work / slots)                          mean <= 1.15× the bound,
//	                                                             never 5% worse than graph order
//
// It is a report: it exits 0 whether or not the goals are met, and 1 only
// when a measurement could not be made. The binary doubles as pilot's
// supervisor and as the fake agent of P5.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/schedule"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// A row is one line of the report.
type row struct {
	ID       string   `json:"id"`
	Pilot    float64  `json:"pilot"`
	Baseline *float64 `json:"baseline"` // nil: the goal is absolute
	Unit     string   `json:"unit"`
	Ratio    *float64 `json:"ratio"`
	Goal     string   `json:"goal"`
	Pass     bool     `json:"pass"`
	Note     string   `json:"note,omitempty"`
	// Extra holds figures measured beside the row's own, for
	// information (P3's cat, P8's per-worker figures), by name.
	Extra   map[string]float64 `json:"extra,omitempty"`
	Skipped bool               `json:"skipped,omitempty"`
}

type config struct {
	quick  bool
	rounds int
	dir    string // a temporary directory for this run
	// p8Workers and p8For override P8's load when positive.
	p8Workers int
	p8For     time.Duration
	p8Stream  string // "claude" or "pi"
	// memprofile: where P8 writes a heap profile halfway through its
	// first run through pilot, when not empty.
	memprofile string
	// nofile is RLIMIT_NOFILE's soft limit, raised to the hard one,
	// nofileMax: what P8 may use.
	nofile, nofileMax uint64
	shm               string // one on tmpfs (/dev/shm), or "" when there is none or dir is on tmpfs
	exe               string // this binary
	log               func(format string, args ...any)
}

type rowSpec struct {
	id    string
	run   func(*config) ([]row, error)
	alias string // another name -only accepts
}

// one is a rowSpec's run for a function measuring one row.
func one(f func(*config) (row, error)) func(*config) ([]row, error) {
	return func(cfg *config) ([]row, error) {
		r, err := f(cfg)
		return []row{r}, err
	}
}

var rows = []rowSpec{
	{id: "P1", run: runP1}, // P1 and P1-disk come from the same rounds
	{id: "P1-sandbox", run: one(runP1Sandbox), alias: "P1s"},
	{id: "P1b", run: one(runP1b)},
	{id: "P2", run: runP2}, // as P1, with P2-disk
	{id: "P3", run: runP3}, // P3 (Claude's) and P3m come from the same runs
	{id: "P3-pi", run: one(runP3Runner(agents.RunnerPi))},
	{id: "P3-codex", run: one(runP3Runner(agents.RunnerCodex))},
	{id: "P3-opencode", run: one(runP3Runner(agents.RunnerOpencode))},
	{id: "P3-gemini", run: one(runP3Runner(agents.RunnerGemini))},
	{id: "P3-qwen", run: one(runP3Runner(agents.RunnerQwen))},
	{id: "P3-kilo", run: one(runP3Runner(agents.RunnerKilo))},
	{id: "P3-copilot", run: one(runP3Runner(agents.RunnerCopilot))},
	{id: "P3-floor", run: one(runP3Floor)},
	{id: "P4", run: one(runP4)},
	{id: "P5", run: one(runP5)},
	{id: "P6", run: one(runP6)},
	{id: "P7", run: one(runP7)},
	{id: "P8", run: one(runP8)},
	{id: "P9", run: one(runP9)},
}

func main() {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "summary" {
		if err := summarize(os.Stdout, os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "bench summary: %v\n", err)
			os.Exit(2)
		}
		return
	}
	os.Exit(run())
}

func run() int {
	only := flag.String("only", "", "comma-separated rows to run (P1,P1-sandbox,P1b,P2,P3,P3-pi,P3-codex,P3-opencode,P3-gemini,P3-qwen,P3-kilo,P3-copilot,P3-floor,P4,P5,P6,P7,P8,P9); empty runs all")
	quick := flag.Bool("quick", false, "a short run: fewer rounds and smaller inputs")
	asJSON := flag.Bool("json", false, "print one JSON array instead of a table")
	rounds := flag.Int("rounds", 0, "rounds per row; 0 means 5, or 3 with -quick")
	verbose := flag.Bool("v", false, "log progress on stderr")
	p8Workers := flag.Int("p8-workers", 0, "P8's workers; 0 means 1000, or 100 with -quick")
	p8Stream := flag.String("p8-stream", "claude", "P8's workers' recorded stream: claude (testdata/claude/stream/parallel-tools) or pi (testdata/pi/stream/tool-use-gen-a)")
	p8For := flag.Duration("p8-for", 0, "how long each P8 worker prints; 0 means 60s, or 10s with -quick")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (pilot's side, not its supervisor's) to `file`")
	memprofile := flag.String("memprofile", "", "write a heap profile of this process halfway through P8's first run through pilot to `file` (its goroutines to file.goroutines), and its memory figures to stderr")
	flag.Parse()

	want := map[string]bool{}
	for id := range strings.SplitSeq(*only, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		id = strings.ToUpper(id)
		switch id {
		case "P3M":
			id = "P3"
		case "P1-DISK":
			id = "P1"
		case "P2-DISK":
			id = "P2"
		}
		if i := slices.IndexFunc(rows, func(r rowSpec) bool { return strings.ToUpper(r.alias) == id }); i >= 0 {
			id = strings.ToUpper(rows[i].id)
		}
		if !slices.ContainsFunc(rows, func(r rowSpec) bool { return strings.ToUpper(r.id) == id }) {
			fmt.Fprintf(os.Stderr, "bench: -only: unknown row %q; the rows are P1 (with P1-disk), P1-sandbox (or P1s), P1b, P2 (with P2-disk), P3 (Claude's, with P3m), P3-pi, P3-codex, P3-opencode, P3-gemini, P3-qwen, P3-kilo, P3-copilot, P3-floor, P4, P5, P6, P7, P8, P9\n", id)
			return 2
		}
		want[strings.ToUpper(id)] = true
	}
	cfg := &config{quick: *quick, rounds: *rounds, p8Workers: *p8Workers, p8For: *p8For, p8Stream: *p8Stream, memprofile: *memprofile, log: func(string, ...any) {}}
	if cfg.rounds <= 0 {
		cfg.rounds = 5
		if cfg.quick {
			cfg.rounds = 3
		}
	}
	if *verbose {
		cfg.log = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
		}
	}
	var err error
	if cfg.exe, err = os.Executable(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if cfg.dir, err = os.MkdirTemp("", "pilot-bench-"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer os.RemoveAll(cfg.dir)
	if cfg.nofile, cfg.nofileMax, err = measure.RaiseFileLimit(); err != nil {
		cfg.log("raising RLIMIT_NOFILE: %v", err)
	}
	if cfg.shm, err = tmpfsDir(cfg.dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if cfg.shm != "" {
		defer os.RemoveAll(cfg.shm)
	}
	stop := measure.KeepSupervisor()
	defer stop()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -cpuprofile: %v\n", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}

	var out []row
	failed := false
	for _, r := range rows {
		if len(want) > 0 && !want[strings.ToUpper(r.id)] {
			continue
		}
		cfg.log("%s: running", r.id)
		start := time.Now()
		res, err := r.run(cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", r.id, err)
			failed = true
			continue
		}
		cfg.log("%s: done in %s", r.id, time.Since(start).Round(time.Millisecond))
		out = append(out, res...)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // goals read "<= 1.10"
		if out == nil {
			out = []row{}
		}
		for i := range out {
			out[i].round()
		}
		enc.Encode(out)
	} else {
		printTable(out, cfg)
	}
	if failed {
		return 1
	}
	return 0
}

func printTable(out []row, cfg *config) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tpilot\tbaseline\tunit\tratio\tgoal\tresult\t")
	for _, r := range out {
		base, ratio, result := "-", "-", "short"
		if r.Baseline != nil {
			base = num(*r.Baseline)
		}
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.3g", *r.Ratio)
		}
		if r.Pass {
			result = "pass"
		}
		if r.Skipped {
			result = "skipped"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.ID, num(r.Pilot), base, r.Unit, ratio, r.Goal, result)
	}
	tw.Flush()
	mode := "full"
	if cfg.quick {
		mode = "quick"
	}
	fmt.Printf("\n%s run, %d rounds, medians; temporary files under %s; open files limit (ulimit -n) %d\n", mode, cfg.rounds, filepath.Dir(cfg.dir), cfg.nofile)
	for _, r := range out {
		if r.Note != "" {
			fmt.Printf("%s: %s\n", r.ID, r.Note)
		}
	}
}

func num(f float64) string {
	switch a := math.Abs(f); {
	case a >= 100:
		return fmt.Sprintf("%.0f", f)
	case a >= 10:
		return fmt.Sprintf("%.1f", f)
	case a >= 1:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.3f", f)
	}
}

func ptr(f float64) *float64 { return &f }

// round keeps four significant digits of r's figures, as many as a noisy
// machine supports.
func (r *row) round() {
	sig := func(f float64) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
		return v
	}
	r.Pilot = sig(r.Pilot)
	if r.Baseline != nil {
		r.Baseline = ptr(sig(*r.Baseline))
	}
	if r.Ratio != nil {
		r.Ratio = ptr(sig(*r.Ratio))
	}
	for k, v := range r.Extra {
		r.Extra[k] = sig(v)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// interleave runs each of fs once per round, starting each round with the
// next one, so that the machine's drifts fall on all alike.
func interleave(rounds int, fs ...func() error) error {
	for r := range rounds {
		for i := range fs {
			if err := fs[(r+i)%len(fs)](); err != nil {
				return err
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// trivial returns a Dispatcher for the trivial worker, its task, and
// starts the supervisor with one warm-up dispatch; its run directories
// and workdir are under cfg.dir.
func trivial(cfg *config) (*pilot.Dispatcher, pilot.Task, error) {
	return trivialIn(cfg.dir)
}

// trivialIn is trivial with the run directories and workdir under base.
func trivialIn(base string) (*pilot.Dispatcher, pilot.Task, error) {
	runDir := filepath.Join(base, "runs")
	d, err := measure.Dispatcher(runDir, time.Second, pilot.Provider{Name: "echo", Runner: "command", Argv: measure.TrivialArgv})
	if err != nil {
		return nil, pilot.Task{}, err
	}
	wd := filepath.Join(base, "work")
	if err := os.MkdirAll(wd, 0o700); err != nil {
		return nil, pilot.Task{}, err
	}
	t := pilot.Task{Provider: "echo", Mode: pilot.ModeCode, Prompt: "x", Workdir: wd}
	return d, t, measure.DispatchOK(context.Background(), d, t)
}

// tmpfsDir makes a temporary directory on tmpfs (/dev/shm) for the rows
// that P1 and P2 measure there, unless dir is on tmpfs already or there is
// no /dev/shm: then it returns "".
func tmpfsDir(dir string) (string, error) {
	if fsType(dir) == "tmpfs" || fsType("/dev/shm") != "tmpfs" {
		return "", nil
	}
	return os.MkdirTemp("/dev/shm", "pilot-bench-")
}

// fastSlow returns the base directories of P1's and P2's main row (on
// tmpfs when there is one) and of their -disk row ("" for none).
func fastSlow(cfg *config) (fast, slow string) {
	if cfg.shm == "" {
		return cfg.dir, ""
	}
	return cfg.shm, cfg.dir
}

// sequential is one side of an interleaved round: n runs of job one after
// another, their time per job in milliseconds added to into.
func sequential(n int, into *[]float64, job func() error) func() error {
	return func() error {
		m, err := measure.Sequential(n, job)
		*into = append(*into, ms(m))
		return err
	}
}

// cpuPerJob is sequential that also adds up, into cpu, the CPU time of
// this process and of its supervisor the runs took: self and sup, in µs
// per job.
func cpuPerJob(n int, into *[]float64, cpu *[2][]float64, job func() error) func() error {
	return func() error {
		s0, p0 := measure.CPU()
		m, err := measure.Sequential(n, job)
		s1, p1 := measure.CPU()
		*into = append(*into, ms(m))
		cpu[0] = append(cpu[0], float64(s1-s0)/float64(time.Microsecond)/float64(n))
		cpu[1] = append(cpu[1], float64(p1-p0)/float64(time.Microsecond)/float64(n))
		return err
	}
}

// runP1 measures sequential dispatches of the trivial worker, run
// directories on tmpfs, against os/exec of it; and, in the same rounds,
// the same dispatches with run directories on the default file system
// (P1-disk). The sandbox is off: what it adds is P1-sandbox.
func runP1(cfg *config) ([]row, error) {
	n := 200
	if cfg.quick {
		n = 50
	}
	fast, slow := fastSlow(cfg)
	d, t, err := trivialIn(fast)
	if err != nil {
		return nil, err
	}
	t.Sandbox = sandbox.Off
	ctx := context.Background()
	var ps, es, ds []float64
	var pcpu, ecpu [2][]float64
	sides := []func() error{
		cpuPerJob(n, &ps, &pcpu, func() error { return measure.DispatchOK(ctx, d, t) }),
		cpuPerJob(n, &es, &ecpu, func() error { return measure.ExecOK(measure.TrivialArgv) }),
	}
	if slow != "" {
		dd, td, err := trivialIn(slow)
		if err != nil {
			return nil, err
		}
		td.Sandbox = sandbox.Off
		sides = append(sides, sequential(n, &ds, func() error { return measure.DispatchOK(ctx, dd, td) }))
	}
	if err := interleave(cfg.rounds, sides...); err != nil {
		return nil, err
	}
	p, e := median(ps), median(es)
	const goal = 1.15
	rs := []row{{ID: "P1", Pilot: p, Baseline: ptr(e), Unit: "ms/job", Ratio: ptr(p / e), Goal: fmt.Sprintf("<= %.2f", goal), Pass: p/e <= goal,
		Note: fmt.Sprintf("%s ×%d sequential, sandbox off (P1-sandbox is its cost); run directories on %s (%s); CPU per job: pilot's process %.0f µs and its supervisor's %.0f µs, os/exec's %.0f µs (supervisor's clock ticks are 10 ms: read over many jobs)",
			strings.Join(measure.TrivialArgv, " "), n, fsType(fast), fast, median(pcpu[0]), median(pcpu[1]), median(ecpu[0])),
		Extra: map[string]float64{"pilot_cpu_us": median(pcpu[0]), "supervisor_cpu_us": median(pcpu[1]), "exec_cpu_us": median(ecpu[0])}}}
	if slow != "" {
		q := median(ds)
		rs = append(rs, row{ID: "P1-disk", Pilot: q, Baseline: ptr(e), Unit: "ms/job", Ratio: ptr(q / e), Goal: "(reference)", Pass: true,
			Note: fmt.Sprintf("P1 with run directories on the default file system, %s (%s), in the same rounds: what creating files there costs", fsType(slow), slow)})
	}
	return rs, nil
}

// runP1Sandbox is the sandbox's cost per dispatch: P1's worker under the
// default mode (secrets) against the same worker with the sandbox off
// (which still scopes signals; P1's figure), workspace and strict
// alongside, interleaved, run directories where P1 has them.
func runP1Sandbox(cfg *config) (row, error) {
	n := 200
	if cfg.quick {
		n = 50
	}
	fast, _ := fastSlow(cfg)
	d, t, err := trivialIn(fast)
	if err != nil {
		return row{}, err
	}
	ctx := context.Background()
	modes := []sandbox.Mode{sandbox.Off, sandbox.Secrets, sandbox.Workspace, sandbox.Strict}
	times := make([][]float64, len(modes))
	var sides []func() error
	for i, m := range modes {
		tm := t
		tm.Sandbox = m
		sides = append(sides, sequential(n, &times[i], func() error { return measure.DispatchOK(ctx, d, tm) }))
	}
	if err := interleave(cfg.rounds, sides...); err != nil {
		return row{}, err
	}
	off, sec := median(times[0]), median(times[1])
	return row{ID: "P1-sandbox", Pilot: sec, Baseline: ptr(off), Unit: "ms/job", Ratio: ptr(sec / off), Goal: "<= 1.10", Pass: sec/off <= 1.10,
		Note: fmt.Sprintf("the default sandbox (secrets) against off, ×%d sequential, run directories on %s (-only P1s still names it); workspace %.2f, strict %.2f ms/job", n, fsType(fast), median(times[2]), median(times[3]))}, nil
}

func runP1b(cfg *config) (row, error) {
	// A Python job takes tens of times longer: fewer of them, so that
	// each round gives pilot and os/exec as much time as the stand-in.
	n, pyN := 200, 20
	if cfg.quick {
		n, pyN = 50, 10
	}
	py, err := measure.NewPythonStandIn(filepath.Join(cfg.dir))
	if errors.Is(err, exec.ErrNotFound) {
		return row{ID: "P1b", Unit: "ms/job overhead", Goal: ">= 20", Skipped: true, Pass: true,
			Note: "skipped: python3 is not installed, so the Python baseline cannot run"}, nil
	}
	if err != nil {
		return row{}, err
	}
	d, t, err := trivial(cfg)
	if err != nil {
		return row{}, err
	}
	if err := py.RunOK(measure.TrivialArgv); err != nil { // warm-up
		return row{}, err
	}
	ctx := context.Background()
	var ps, es, ys []float64
	err = interleave(cfg.rounds,
		sequential(n, &ps, func() error { return measure.DispatchOK(ctx, d, t) }),
		sequential(n, &es, func() error { return measure.ExecOK(measure.TrivialArgv) }),
		sequential(pyN, &ys, func() error { return py.RunOK(measure.TrivialArgv) }))
	if err != nil {
		return row{}, err
	}
	// Overheads per round, against that round's os/exec figure.
	var po, yo []float64
	for i := range ps {
		po = append(po, ps[i]-es[i])
		yo = append(yo, ys[i]-es[i])
	}
	p, y := median(po), median(yo)
	note := fmt.Sprintf("overhead = time per job minus os/exec's (%.3f ms) in the same round; ratio = the Python stand-in's overhead / pilot's; %s", median(es), py.Python)
	const floor = 0.01 // ms: below this, pilot's overhead is lost in the noise
	if p < floor {
		note += fmt.Sprintf("; pilot's overhead measured below %.2f ms (the machine's noise), so the ratio is taken against %.2f ms", floor, floor)
	}
	ratio := y / max(p, floor)
	return row{ID: "P1b", Pilot: p, Baseline: ptr(y), Unit: "ms/job overhead", Ratio: ptr(ratio), Goal: ">= 20", Pass: ratio >= 20,
		Note: note}, nil
}

// runP2 measures a Fanout of trivial jobs, run directories on tmpfs,
// against errgroup and os/exec; and, in the same rounds, the same Fanout
// with run directories on the default file system (P2-disk).
func runP2(cfg *config) ([]row, error) {
	jobs, par := 1000, 64
	if cfg.quick {
		jobs = 256
	}
	fast, slow := fastSlow(cfg)
	fanout := func(base string, into *[]float64) (func() error, error) {
		d, t, err := trivialIn(base)
		if err != nil {
			return nil, err
		}
		t.Mode = pilot.ModeReview // jobs share the workdir
		js := make([]pilot.Job, jobs)
		for i := range js {
			js[i] = pilot.Job{Task: t}
		}
		return func() error {
			start := time.Now()
			err := measure.FanoutOK(context.Background(), d, js, par)
			*into = append(*into, ms(time.Since(start)))
			return err
		}, nil
	}
	var ps, es, ds []float64
	pf, err := fanout(fast, &ps)
	if err != nil {
		return nil, err
	}
	sides := []func() error{pf, func() error {
		start := time.Now()
		err := measure.ErrgroupExec(measure.TrivialArgv, jobs, par)
		es = append(es, ms(time.Since(start)))
		return err
	}}
	if slow != "" {
		df, err := fanout(slow, &ds)
		if err != nil {
			return nil, err
		}
		sides = append(sides, df)
	}
	if err := interleave(cfg.rounds, sides...); err != nil {
		return nil, err
	}
	p, e := median(ps), median(es)
	rs := []row{{ID: "P2", Pilot: p, Baseline: ptr(e), Unit: "ms/fanout", Ratio: ptr(p / e), Goal: "<= 1.2", Pass: p/e <= 1.2,
		Note: fmt.Sprintf("%d jobs, parallelism %d, the default sandbox; run directories on %s (%s)", jobs, par, fsType(fast), fast)}}
	if slow != "" {
		q := median(ds)
		rs = append(rs, row{ID: "P2-disk", Pilot: q, Baseline: ptr(e), Unit: "ms/fanout", Ratio: ptr(q / e), Goal: "(reference)", Pass: true,
			Note: fmt.Sprintf("P2 with run directories on the default file system, %s (%s), in the same rounds", fsType(slow), slow)})
	}
	return rs, nil
}

func runP3(cfg *config) ([]row, error) {
	size, big := p3Size(cfg)
	dir := filepath.Join(cfg.dir, "p3")
	cfg.log("P3: writing %d MiB of stream-json", size>>20)
	res, err := streamVsFloor(cfg, dir, agents.RunnerClaude, func(w io.Writer) (int64, error) {
		return measure.ClaudeStream(w, size, big, rand.New(rand.NewPCG(3, 3)))
	})
	if err != nil {
		return nil, err
	}
	peak := slices.Max(res.rss)
	p3m := row{ID: "P3m", Pilot: peak, Unit: "MiB peak RSS", Goal: "<= 64 MiB", Pass: peak <= 64,
		Note: "the largest VmHWM of the pilot process over the P3 rounds (reset before each)"}
	r := res.floorRow("P3")
	r.Note = fmt.Sprintf("%.0f MiB of Claude stream-json (lines 100 B–1 MiB and one of %d MiB) through the claude runner's watcher and stream log on %s; %s",
		res.mib, big>>20, res.fs, res.baselines())
	return []row{r, p3m}, nil
}

// p3Size is the size of P3's streams and of P3's one big line.
func p3Size(cfg *config) (size, big int64) {
	if cfg.quick {
		return 64 << 20, 16 << 20
	}
	return 1 << 30, 100 << 20
}

// runP3Runner is the P3 row of another runner than Claude's: a stream of
// its CLI's JSON events, its recorded stream's event lines repeated to
// P3's size, through a dispatch vs the same stream through the command
// runner (the floor), with cat beside them.
func runP3Runner(runner string) func(*config) (row, error) {
	return func(cfg *config) (row, error) {
		size, _ := p3Size(cfg)
		id := "P3-" + runner
		dir := filepath.Join(cfg.dir, strings.ToLower(id))
		cfg.log("%s: writing %d MiB of %s's JSON stream", id, size>>20, runner)
		res, err := streamVsFloor(cfg, dir, runner, func(w io.Writer) (int64, error) {
			return measure.RecordedStream(w, runner, size)
		})
		if err != nil {
			return row{}, err
		}
		r := res.floorRow(id)
		r.Note = fmt.Sprintf("%.0f MiB of %s's JSON events (%s, its event lines repeated; lines of %s) through the %s runner's watcher and stream log on %s; %s",
			res.mib, runner, measure.RecordedPath(runner), res.lineRange, runner, res.fs, res.baselines())
		return r, nil
	}
}

// runP3Floor is P3-codex's stream through the command runner, which has
// no stream watcher: the share of a dispatch's throughput that reading the
// pipe, splitting lines and writing stream.log leave to a watcher. It has
// no goal of its own: each P3 row measures its own floor, on its own
// stream, in its own rounds.
func runP3Floor(cfg *config) (row, error) {
	size, _ := p3Size(cfg)
	dir := filepath.Join(cfg.dir, "p3-floor")
	cfg.log("P3-floor: writing %d MiB of codex's JSON stream", size>>20)
	res, err := streamVsCatWith(cfg, dir, []func(script, path string) pilot.Provider{floorProvider}, func(w io.Writer) (int64, error) {
		return measure.RecordedStream(w, agents.RunnerCodex, size)
	})
	if err != nil {
		return row{}, err
	}
	r := res.catRow("P3-floor")
	r.Goal, r.Pass = "(reference)", true
	r.Note = fmt.Sprintf("%.0f MiB of codex's JSON events (lines of %s) through the command runner (no watcher: reading, splitting, stream.log) on %s, vs cat into a pipe read to /dev/null: the most a P3 row can reach before its watcher costs anything",
		res.mib, res.lineRange, res.fs)
	return r, nil
}

// floorProvider runs the stand-in CLI through the command runner, which
// watches nothing: a dispatch that keeps every byte of the stream (its
// reading, splitting and stream.log) and no more.
func floorProvider(script, path string) pilot.Provider {
	return pilot.Provider{Name: "stream", Runner: "command", Argv: []string{script}, Env: map[string]string{"PILOT_BENCH_JSONL": path}}
}

// A streamResult is what streamVsCat measured.
type streamResult struct {
	ps, fs2, es []float64 // MiB/s of the runner's dispatch, of the floor's (if measured), of cat
	rss         []float64 // the runner dispatch's peak RSS in MiB
	mib         float64   // the stream's size
	fs          string    // the file system it was read from
	lineRange   string    // its shortest and longest line
}

// p3Goal is the goal of a P3 row: its runner's dispatch keeps this share
// of the floor's throughput (the same stream through the command runner,
// in the same rounds): what the watcher may cost.
const p3Goal = 0.9

// floorRow is a P3 row against its floor; cat's figures go in Extra.
func (r streamResult) floorRow(id string) row {
	p, f, e := median(r.ps), median(r.fs2), median(r.es)
	return row{ID: id, Pilot: p, Baseline: ptr(f), Unit: "MiB/s", Ratio: ptr(p / f), Goal: fmt.Sprintf(">= %.1f× P3-floor", p3Goal), Pass: p/f >= p3Goal,
		Extra: map[string]float64{"cat": e, "cat_ratio": p / e, "floor_cat_ratio": f / e}}
}

// catRow is a row of the first dispatch against cat.
func (r streamResult) catRow(id string) row {
	p, e := median(r.ps), median(r.es)
	return row{ID: id, Pilot: p, Baseline: ptr(e), Unit: "MiB/s", Ratio: ptr(p / e), Goal: ">= 0.5", Pass: p/e >= 0.5}
}

// baselines says what a floorRow's baseline is and what cat did.
func (r streamResult) baselines() string {
	p, f, e := median(r.ps), median(r.fs2), median(r.es)
	return fmt.Sprintf("baseline: the same stream through the command runner (no watcher) in the same rounds; for information, cat into a pipe read to /dev/null ran at %.0f MiB/s: ratio to cat %.2f (the floor's %.2f)", e, p/e, f/e)
}

// streamVsFloor writes a stream with write into dir, then measures, in
// interleaved rounds, a dispatch whose worker (runner's provider, its CLI
// replaced by cat) prints it, the same through the command runner, and
// cat of it into a pipe.
func streamVsFloor(cfg *config, dir, runner string, write func(io.Writer) (int64, error)) (streamResult, error) {
	return streamVsCatWith(cfg, dir, []func(script, path string) pilot.Provider{
		func(script, path string) pilot.Provider { return measure.RunnerStreamProvider(runner, script, path) },
		floorProvider,
	}, write)
}

// streamVsCatWith writes a stream with write into dir and measures, in
// interleaved rounds, a dispatch of each provider (one or two, built from
// the stand-in CLI script and the stream's path: into ps and fs2) against
// cat of it.
func streamVsCatWith(cfg *config, dir string, providers []func(script, path string) pilot.Provider, write func(io.Writer) (int64, error)) (streamResult, error) {
	var res streamResult
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stream.jsonl")
	f, err := os.Create(path)
	if err != nil {
		return res, err
	}
	n, err := write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	res.lineRange, err = lineRange(path)
	if err != nil {
		return res, err
	}
	script, err := measure.CatScript(dir)
	if err != nil {
		return res, err
	}
	runDir := filepath.Join(dir, "runs")
	t := pilot.Task{Provider: "stream", Mode: pilot.ModeReview, Prompt: "x", Workdir: dir}
	ctx := context.Background()
	res.mib = float64(n) / (1 << 20)
	res.fs = fsType(dir)
	var sides []func() error
	for i, provider := range providers {
		d, err := measure.Dispatcher(runDir, time.Second, provider(script, path))
		if err != nil {
			return res, err
		}
		into := &res.ps
		if i == 1 {
			into = &res.fs2
		}
		sides = append(sides, func() error {
			// Each run writes a stream log as big as the input: remove
			// it before the next.
			defer os.RemoveAll(runDir)
			if err := measure.ResetPeakRSS(); err != nil {
				return err
			}
			start := time.Now()
			if err := measure.StreamOK(ctx, d, t, n); err != nil {
				return err
			}
			*into = append(*into, res.mib/time.Since(start).Seconds())
			if i > 0 {
				return nil
			}
			peak, err := measure.PeakRSS()
			res.rss = append(res.rss, float64(peak)/(1<<20))
			return err
		})
	}
	sides = append(sides, func() error {
		start := time.Now()
		got, err := measure.CatPipe(path)
		if err == nil && got != n {
			err = fmt.Errorf("cat gave %d bytes, want %d", got, n)
		}
		res.es = append(res.es, res.mib/time.Since(start).Seconds())
		return err
	})
	return res, interleave(cfg.rounds, sides...)
}

// lineRange returns the shortest and longest line of the file at path,
// newline included, as "100 B–1 MiB".
func lineRange(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	lo, hi, cur := int64(math.MaxInt64), int64(0), int64(0)
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		for _, c := range buf[:n] {
			cur++
			if c == '\n' {
				lo, hi, cur = min(lo, cur), max(hi, cur), 0
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	return size(lo) + "–" + size(hi), nil
}

// size formats a byte count as "100 B", "12 KiB", "1 MiB".
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.3g MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.3g KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// runP7 compares pilot's claude watcher with the Go peers' reader of
// Claude's stream-json (bufio.Scanner with a 10 MiB token limit and
// json.Unmarshal of every line), in process, on P3's stream without its
// big line (the peers' reader cannot read it); then both on a stream with
// one 16 MiB line before the result.
func runP7(cfg *config) (row, error) {
	size, _ := p3Size(cfg)
	dir := filepath.Join(cfg.dir, "p7")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "stream.jsonl")
	write := func(path string, w func(io.Writer) (int64, error)) (int64, error) {
		f, err := os.Create(path)
		if err != nil {
			return 0, err
		}
		n, err := w(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return n, err
	}
	cfg.log("P7: writing %d MiB of stream-json", size>>20)
	n, err := write(path, func(w io.Writer) (int64, error) {
		return measure.ClaudeStream(w, size, 0, rand.New(rand.NewPCG(3, 3)))
	})
	if err != nil {
		return row{}, err
	}
	spill := filepath.Join(dir, "spill")
	if err := os.MkdirAll(spill, 0o700); err != nil {
		return row{}, err
	}
	mib := float64(n) / (1 << 20)
	var ps, es []float64
	err = interleave(cfg.rounds,
		func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			start := time.Now()
			res, err := measure.WatchStream(agents.ClaudeRunner{}, f, 0, spill)
			if err == nil && res.Outcome != pilot.Completed {
				err = fmt.Errorf("pilot's watcher: %s (%s), want completed", res.Outcome, res.Class)
			}
			ps = append(ps, mib/time.Since(start).Seconds())
			return err
		},
		func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			start := time.Now()
			ev, err := measure.PeerReadClaude(f)
			if err == nil && ev.Subtype != "success" {
				err = fmt.Errorf("the peers' reader: result %s, want success", ev.Subtype)
			}
			es = append(es, mib/time.Since(start).Seconds())
			return err
		})
	if err != nil {
		return row{}, err
	}

	// The long line.
	long := filepath.Join(dir, "long.jsonl")
	if _, err := write(long, func(w io.Writer) (int64, error) { return measure.LongLineClaude(w, 16<<20) }); err != nil {
		return row{}, err
	}
	f, err := os.Open(long)
	if err != nil {
		return row{}, err
	}
	res, err := measure.WatchStream(agents.ClaudeRunner{}, f, 0, spill)
	f.Close()
	if err != nil {
		return row{}, err
	}
	pilotLong := fmt.Sprintf("pilot's watcher: %s", res.Outcome)
	gotResult := res.Outcome == pilot.Completed && res.Usage != nil && res.Usage.CostUSD != nil
	if gotResult {
		pilotLong += " with the result's usage"
	}
	if f, err = os.Open(long); err != nil {
		return row{}, err
	}
	_, perr := measure.PeerReadClaude(f)
	f.Close()
	peerLong := "the peers' reader: read the result"
	switch {
	case errors.Is(perr, bufio.ErrTooLong):
		peerLong = "the peers' reader: stopped at the long line (bufio.Scanner: token too long), no result"
	case perr != nil:
		peerLong = "the peers' reader: " + perr.Error()
	}

	p, e := median(ps), median(es)
	return row{ID: "P7", Pilot: p, Baseline: ptr(e), Unit: "MiB/s", Ratio: ptr(p / e), Goal: ">= 1.5, long line read", Pass: p/e >= 1.5 && gotResult,
		Note: fmt.Sprintf("%.0f MiB of P3's Claude stream-json without its big line (lines 100 B–1 MiB), in process from a file on %s: the claude watcher fed as a dispatch feeds it (internal/lines, Diagnostic, Line, Finish; no process, no stream.log) vs the Go peers' reader (bufio.Scanner, 10 MiB token limit, json.Unmarshal of every line into a struct with json.RawMessage sub-messages). Then a 16 MiB assistant line before the result: %s; %s",
			mib, fsType(dir), pilotLong, peerLong)}, nil
}

func runP4(cfg *config) (row, error) {
	big := int64(1 << 30)
	updates := 200
	if cfg.quick {
		big, updates = 32<<20, 50
	}
	dir := filepath.Join(cfg.dir, "p4")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return row{}, err
	}
	defer os.RemoveAll(dir)
	gen := func(name string, size int64) (string, error) {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		measure.PiSession(f, size, rand.New(rand.NewPCG(2, 2)))
		return path, f.Close()
	}
	cfg.log("P4: writing a %d MiB pi session", big>>20)
	smallPath, err := gen("small.jsonl", 1<<20)
	if err != nil {
		return row{}, err
	}
	bigPath, err := gen("big.jsonl", big)
	if err != nil {
		return row{}, err
	}
	small, err := measure.NewPiTail(smallPath)
	if err != nil {
		return row{}, err
	}
	defer small.Close()
	cfg.log("P4: first read of the big session")
	large, err := measure.NewPiTail(bigPath)
	if err != nil {
		return row{}, err
	}
	defer large.Close()
	var ps, ss, es []float64
	upd := func(t *measure.PiTail, into *[]float64) func() error {
		return func() error {
			var ds []float64
			for range updates {
				d, err := t.AppendUpdate()
				if err != nil {
					return err
				}
				ds = append(ds, float64(d)/float64(time.Microsecond))
			}
			*into = append(*into, median(ds))
			return nil
		}
	}
	full := func() error {
		d, err := measure.FullParse(bigPath)
		es = append(es, float64(d)/float64(time.Microsecond))
		return err
	}
	// A full parse of 1 GiB takes seconds: three rounds are plenty.
	if err := interleave(min(cfg.rounds, 3), upd(large, &ps), upd(small, &ss), full); err != nil {
		return row{}, err
	}
	p, s, e := median(ps), median(ss), median(es)
	flat := p <= 2*s+50 // within 2× (plus 50 µs of noise) of the 1 MiB figure
	return row{ID: "P4", Pilot: p, Baseline: ptr(e), Unit: "µs/update", Ratio: ptr(p / e), Goal: "<= 1 ms, flat", Pass: p <= 1000 && flat,
		Note: fmt.Sprintf("%d MiB session; the same update at 1 MiB: %.1f µs (flat: %v); baseline = full re-parse of the %d MiB file", big>>20, s, flat, big>>20)}, nil
}

func runP5(cfg *config) (row, error) {
	grace := 500 * time.Millisecond
	if cfg.quick {
		grace = 200 * time.Millisecond
	}
	d, err := measure.Dispatcher(filepath.Join(cfg.dir, "runs"), grace,
		measure.FakeAgent("tree", cfg.exe, fakeagent.EnvFakeAgent, measure.CancelScript...))
	if err != nil {
		return row{}, err
	}
	t := pilot.Task{Provider: "tree", Mode: pilot.ModeReview, Prompt: "x", Workdir: cfg.dir}
	var ps []float64
	for range cfg.rounds {
		m, err := measure.CancelTree(d, t)
		if err != nil {
			return row{}, err
		}
		ps = append(ps, ms(m))
	}
	p, g := median(ps), ms(grace)
	return row{ID: "P5", Pilot: p, Baseline: ptr(g), Unit: "ms", Ratio: ptr(p / g), Goal: fmt.Sprintf("<= %.0f ms", g+100), Pass: p <= g+100,
		Note: fmt.Sprintf("cancel → Dispatch returned with the tree gone; worker and 2 grandchildren (one in its own session) ignore SIGTERM; slowest %.1f ms", slices.Max(ps))}, nil
}

func runP6(cfg *config) (row, error) {
	const n = 256
	d, err := measure.Dispatcher(filepath.Join(cfg.dir, "runs"), time.Second,
		pilot.Provider{Name: "block", Runner: "command", Argv: measure.BlockingArgv})
	if err != nil {
		return row{}, err
	}
	if _, _, err := trivial(cfg); err != nil { // starts the supervisor
		return row{}, err
	}
	var ps, hs []float64
	for range min(cfg.rounds, 3) {
		rss, heap, err := measure.InFlight(d, n)
		if err != nil {
			return row{}, err
		}
		ps, hs = append(ps, rss), append(hs, heap)
	}
	p := median(ps)
	return row{ID: "P6", Pilot: p, Unit: "KiB/job", Goal: "<= 256 KiB", Pass: p <= 256,
		Note: fmt.Sprintf("resident memory of pilot and its supervisor per running job, %d at once, workers excluded; Go heap alone %.1f KiB/job", n, median(hs))}, nil
}

// heapProfile writes this process's heap profile to path and its memory
// figures, per worker of n, to stderr.
func heapProfile(path string, n int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	k := func(b uint64) float64 { return float64(b) / 1024 / float64(n) }
	fmt.Fprintf(os.Stderr, "bench: P8 midway, KiB per worker: heap in use %.1f (%d objects), stacks %.1f, other runtime %.1f, heap idle not released %.1f; %d goroutines\n",
		k(m.HeapInuse), m.HeapObjects, k(m.StackInuse), k(m.MSpanInuse+m.MCacheInuse+m.BuckHashSys+m.GCSys+m.OtherSys), k(m.HeapIdle-m.HeapReleased), runtime.NumGoroutine())
	f, err := os.Create(path)
	if err == nil {
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if g, gerr := os.Create(path + ".goroutines"); gerr == nil {
		pprof.Lookup("goroutine").WriteTo(g, 1)
		g.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -memprofile: %v\n", err)
	}
}

// runP8 runs one Fanout of many cheap workers at once (the fake agent
// replaying a recorded Claude stream, paced) and measures pilot's CPU,
// memory and descriptors per worker, against the same workers run the
// way the Go peers run theirs, interleaved.
func runP8(cfg *config) (row, error) {
	w := measure.Workers{Exe: cfg.exe, N: 1000, Rate: 20, For: 60 * time.Second}
	if cfg.quick {
		w.N, w.For = 100, 10*time.Second
	}
	if cfg.p8Workers > 0 {
		w.N = cfg.p8Workers
	}
	if cfg.p8For > 0 {
		w.For = cfg.p8For
	}
	root, err := measure.RepoRoot()
	if err != nil {
		return row{}, err
	}
	recording := "testdata/claude/stream/parallel-tools"
	w.Runner = agents.RunnerClaude
	switch cfg.p8Stream {
	case "", "claude":
	case "pi":
		recording, w.Runner = "testdata/pi/stream/tool-use-gen-a", agents.RunnerPi
	default:
		return row{}, fmt.Errorf("-p8-stream %q: want claude or pi", cfg.p8Stream)
	}
	w.Prefix = filepath.Join(root, filepath.FromSlash(recording))
	w.Dir = filepath.Join(cfg.dir, "p8")
	if err := os.MkdirAll(w.Dir, 0o700); err != nil {
		return row{}, err
	}
	defer os.RemoveAll(w.Dir)
	if _, _, err := trivial(cfg); err != nil { // starts the supervisor
		return row{}, err
	}
	if cfg.memprofile != "" {
		var once sync.Once
		w.Midway = func() { once.Do(func() { heapProfile(cfg.memprofile, w.N) }) }
	}
	var ps, es []measure.ManyResult
	runs := filepath.Join(w.Dir, "runs")
	logs := filepath.Join(w.Dir, "logs")
	err = interleave(min(cfg.rounds, 2),
		func() error {
			defer os.RemoveAll(runs)
			cfg.log("P8: %d workers through pilot", w.N)
			var r measure.ManyResult
			var err error
			// The side is a profile label (-tagfocus side=pilot), which
			// the goroutines it starts inherit.
			pprof.Do(context.Background(), pprof.Labels("side", "pilot"), func(context.Context) {
				r, err = w.Pilot(runs)
			})
			if err == nil && r.Wrong > 0 {
				cfg.log("P8: pilot: %d wrong verdicts, the first %s", r.Wrong, r.FirstWrong)
			}
			ps = append(ps, r)
			return err
		},
		func() error {
			defer os.RemoveAll(logs)
			cfg.log("P8: %d workers the peers' way", w.N)
			var r measure.ManyResult
			var err error
			pprof.Do(context.Background(), pprof.Labels("side", "peers"), func(context.Context) {
				r, err = w.Peers(logs)
			})
			if err == nil && r.Wrong > 0 {
				cfg.log("P8: peers: %d wrong verdicts, the first %s", r.Wrong, r.FirstWrong)
			}
			es = append(es, r)
			return err
		})
	if err != nil {
		return row{}, err
	}
	ws := w.WorkerSeconds()
	n := float64(w.N)
	med := func(rs []measure.ManyResult, f func(measure.ManyResult) float64) float64 {
		return median(collect(rs, f))
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / ws }
	p := med(ps, func(r measure.ManyResult) float64 { return us(r.CPU()) })
	e := med(es, func(r measure.ManyResult) float64 { return us(r.CPU()) })
	pSelf := med(ps, func(r measure.ManyResult) float64 { return us(r.Self) })
	pSup := med(ps, func(r measure.ManyResult) float64 { return us(r.Sup) })
	sampling := med(append(slices.Clone(ps), es...), func(r measure.ManyResult) float64 { return us(r.Sampling) })
	rss := slices.Max(collect(ps, func(r measure.ManyResult) float64 { return float64(r.RSS) / 1024 / n }))
	supRSS := slices.Max(collect(ps, func(r measure.ManyResult) float64 { return float64(r.SupRSS) / 1024 / n }))
	eRSS := slices.Max(collect(es, func(r measure.ManyResult) float64 { return float64(r.RSS) / 1024 / n }))
	fds := slices.Max(collect(ps, func(r measure.ManyResult) float64 { return float64(r.FDs) / n }))
	supFDs := slices.Max(collect(ps, func(r measure.ManyResult) float64 { return float64(r.SupFDs) / n }))
	eFDs := slices.Max(collect(es, func(r measure.ManyResult) float64 { return float64(r.FDs) / n }))
	wrong, eWrong := 0, 0
	for _, r := range ps {
		wrong += r.Wrong
	}
	for _, r := range es {
		eWrong += r.Wrong
	}
	wall := med(ps, func(r measure.ManyResult) float64 { return r.Wall.Seconds() })
	// What the descriptors need: pilot's and the supervisor's per worker,
	// times the workers, and some for the process itself.
	need := int(math.Ceil(max(fds, supFDs)*n)) + 64
	pass := p <= 100 && p/e <= 0.5 && rss <= 128 && wrong == 0
	firstWrong := ""
	for i, rs := range [][]measure.ManyResult{ps, es} {
		side := []string{"pilot's", "the peers'"}[i]
		for _, r := range rs {
			if r.FirstWrong != "" {
				firstWrong += fmt.Sprintf("; %s first wrong verdict: %s", side, r.FirstWrong)
				break
			}
		}
	}
	return row{ID: "P8", Pilot: p, Baseline: ptr(e), Unit: "µs CPU/worker-s", Ratio: ptr(p / e),
		Goal: "<= 100 µs and <= 0.5× peers; <= 128 KiB/worker; every verdict right", Pass: pass,
		Extra: map[string]float64{
			"pilot_self_us": pSelf, "supervisor_us": pSup, "sampling_us": sampling,
			"rss_kib_per_worker": rss, "supervisor_rss_kib_per_worker": supRSS, "peers_rss_kib_per_worker": eRSS,
			"fds_per_worker": fds, "supervisor_fds_per_worker": supFDs, "peers_fds_per_worker": eFDs,
			"wrong_verdicts": float64(wrong), "peers_wrong": float64(eWrong),
			"wall_s": wall, "ulimit_n": float64(cfg.nofile),
		},
		Note: fmt.Sprintf("%d workers at once (one Fanout, the %s runner, the default sandbox, run directories on %s), each the fake agent printing %s.stdout's lines at %.0f a second for %s, its result last; %d round(s), medians (memory and descriptors: the most over the rounds). "+
			"Pilot's CPU per worker-second: %.1f µs in this process, %.1f µs in its supervisor; the peers' shape (os/exec, a goroutine per pipe, bufio.Scanner, json.Unmarshal into map[string]any, a log file write per line) %.1f µs; the harness's own looks at memory and descriptors (%.1f µs, on a thread of their own) are left out of both. "+
			"Memory (pilot and its supervisor, resident, growth over idle) %.1f KiB per worker (the supervisor's part %.1f), the peers' %.1f; descriptors per worker: pilot %.1f, its supervisor %.1f, the peers %.1f. "+
			"Wrong verdicts: pilot %d, the peers %d. Needs ulimit -n of about %d (this run: %d, hard %d); wall %.1f s",
			w.N, w.Runner, fsType(w.Dir), recording, w.Rate, w.For, min(cfg.rounds, 2), pSelf, pSup, e, sampling, rss, supRSS, eRSS, fds, supFDs, eFDs, wrong, eWrong, need, cfg.nofile, cfg.nofileMax, wall) + firstWrong}, nil
}

// collect is f of each of rs.
func collect(rs []measure.ManyResult, f func(measure.ManyResult) float64) []float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return xs
}

// fsType names the file system dir is on, as /proc/self/mounts does.
func fsType(dir string) string {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "an unknown file system"
	}
	best, typ := "", "an unknown file system"
	for l := range strings.Lines(string(data)) {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		if (dir == f[1] || strings.HasPrefix(dir, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) >= len(best) {
			best, typ = f[1], f[2]
		}
	}
	return typ
}

// runP9 schedules 200 random graphs on a simulated clock (measure.Makespan),
// each twice: in graph order and in the planned order, with each
// job's estimate its duration off by a factor of up to two either way, as
// a run history's median would be.
func runP9(cfg *config) (row, error) {
	rng := rand.New(rand.NewPCG(9, 9))
	graphs := 200
	if cfg.quick {
		graphs = 50
	}
	var critical, order []float64
	worst := 0.0
	for range graphs {
		g := measure.RandomGraph(rng, 20+rng.IntN(181), 0.15+0.3*rng.Float64())
		slots := []int{2, 4, 8, 16}[rng.IntN(4)]
		est := make([]time.Duration, len(g.Dur))
		for i, d := range g.Dur {
			est[i] = time.Duration(float64(d) * math.Exp2(2*rng.Float64()-1))
		}
		lb := float64(g.LowerBound(slots))
		c := float64(g.Makespan(slots, schedule.NewReadyPlanned(g.Deps, est, g.Writes, slots)))
		o := float64(g.Makespan(slots, schedule.NewReady(g.Deps)))
		critical, order = append(critical, c/lb), append(order, o/lb)
		worst = max(worst, c/o)
	}
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	p, b := mean(critical), mean(order)
	return row{ID: "P9", Pilot: p, Baseline: &b, Unit: "× bound", Ratio: ptr(p / b),
		Goal: "mean <= 1.15× the bound, never 5% worse than graph order", Pass: p <= 1.15 && worst <= 1.05,
		Note: fmt.Sprintf("%d graphs; planned order: max %.2f× the bound; graph order: max %.2f×; worst graph %.3f× its graph-order makespan",
			graphs, slices.Max(critical), slices.Max(order), worst)}, nil
}
