//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/supervise"
)

// The long run: go test ./tools/chaos -run Chaos -chaos.runs 1000.
var (
	chaosRuns = flag.Int("chaos.runs", 50, "runs of TestChaos")
	chaosSeed = flag.Uint64("chaos.seed", 0, "seed of TestChaos (0: the run's number in CI, else 1)")
)

// The test binary is the fake agent and the child pilot, as the chaos
// program is.
func TestMain(m *testing.M) {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	supervise.SetLinger(0)
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// os/exec panics (in a finalizer) for a started Cmd never waited for:
	// the child pilots are this test's own.
	os.Setenv("GODEBUG", strings.TrimPrefix(os.Getenv("GODEBUG")+",execwait=2", ","))
	os.Exit(m.Run())
}

// TestChaos is the short run: every kind is drawn, and every promise must
// hold.
func TestChaos(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = 1
		if n, err := strconv.ParseUint(os.Getenv("GITHUB_RUN_NUMBER"), 10, 64); err == nil {
			seed = n
		}
	}
	cfg := Config{Runs: *chaosRuns, Seed: seed, Parallel: 4, Dir: t.TempDir(), Exe: exe, BigLine: 100 << 20}
	rep := Run(cfg)
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Logf("go test ./tools/chaos -chaos.runs %d -chaos.seed %d:\n%s", cfg.Runs, seed, text.String())
	if !rep.OK() {
		t.Errorf("a promise was broken (seed %d)", seed)
	}
	if rep.Jobs < rep.Runs {
		t.Errorf("%d jobs in %d runs: every run has at least one job", rep.Jobs, rep.Runs)
	}
	if rep.Processes < rep.Runs {
		t.Errorf("%d processes seen in %d runs: the checks saw no workers", rep.Processes, rep.Runs)
	}
	if *chaosRuns >= 50 && len(rep.Kinds) < 10 {
		t.Errorf("only %d kinds were drawn in %d runs: %v", len(rep.Kinds), rep.Runs, rep.Kinds)
	}
}

// TestEveryKind runs each kind once and checks that its checks see what
// they are meant to: a killed pilot leaves records running (and the count
// says so rather than the open-records figure), an injected write error
// reaches the verdicts, and every kind's processes were seen.
func TestEveryKind(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			if skip := skips[k.name]; skip != nil {
				if why := skip(); why != "" {
					t.Skip(why)
				}
			}
			cfg := Config{Runs: 1, Seed: 7, Parallel: 1, Dir: t.TempDir(), Exe: exe, BigLine: 1 << 20, Kinds: []string{k.name}}
			rep := Run(cfg)
			data, _ := json.Marshal(rep)
			if !rep.OK() || rep.Kinds[k.name] != 1 {
				t.Fatalf("%s", data)
			}
			if rep.Processes == 0 {
				t.Errorf("no process seen: %s", data)
			}
			switch k.name {
			case "pilot-sigkilled-mid-fanout":
				if rep.KilledPilotRecords == 0 {
					t.Errorf("the killed pilot's records were not found running: %s", data)
				}
			case "run-dir-unwritable-mid-run":
				if rep.PilotErrors == 0 {
					t.Errorf("the write error reached no verdict: %s", data)
				}
			}
		})
	}
}

func TestJSONAndExitStatus(t *testing.T) {
	var out, errOut bytes.Buffer
	code := cli([]string{"-runs", "3", "-seed", "5", "-json", "-kinds", "sigsegv,torn-final-line"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, k := range []string{"runs", "kinds", "orphans", "missing_verdicts", "open_records", "half_written"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, out.String())
		}
	}
	if got["runs"] != 3.0 {
		t.Errorf("runs = %v, want 3", got["runs"])
	}
	if code := cli([]string{"-runs", "0"}, &out, &errOut); code != 2 {
		t.Errorf("-runs 0: exit %d, want 2", code)
	}
}

// TestChecksSeeBrokenPromises: the checks are not blind. A live process
// with the run's tag, a job without a verdict, a record still running, a
// temporary file and a torn events.log are each counted.
func TestChecksSeeBrokenPromises(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &runCtx{cfg: &Config{Exe: exe, Dir: dir}, kind: "broken", dir: dir, tag: envTag + "=broken-" + strconv.Itoa(os.Getpid()), pids: map[int]bool{}, jobs: 1}
	cmd := exec.Command(exe, "out=ready", "block")
	cmd.Env = append(os.Environ(), fakeagent.EnvFakeAgent+"=1", c.tag)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // "ready"
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run-1")
	os.MkdirAll(run, 0o700)
	os.WriteFile(filepath.Join(run, "record.json"), []byte(`{"run_id":"x","status":"running"}`), 0o600)
	os.WriteFile(filepath.Join(run, ".record.json.tmp-123"), []byte(`{"run_id"`), 0o600)
	os.WriteFile(filepath.Join(run, "events.log"), []byte("{\"type\":\"a\"}\n{\"ty"), 0o600)
	res := c.check()
	cmd.Wait() // check SIGKILLs what it finds
	want := result{orphans: 1, missing: 1, open: 1, half: 2, jobs: 1, records: 1}
	got := result{orphans: res.orphans, missing: res.missing, open: res.open, half: res.half, jobs: res.jobs, records: res.records}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("check found %+v, want %+v; problems:\n%s", got, want, strings.Join(res.problems, "\n"))
	}
}

// A kind that cannot run on this machine is left out of the mix, named or
// not, and the report says why.
func TestSkippedKindIsLeftOut(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	skips["sigsegv"] = func() string { return "not here" }
	defer delete(skips, "sigsegv")
	rep := Run(Config{Runs: 3, Seed: 1, Parallel: 1, Dir: t.TempDir(), Exe: exe, BigLine: 1, Kinds: []string{"sigsegv"}})
	if rep.Runs != 0 || len(rep.Kinds) != 0 || rep.Skipped["sigsegv"] != "not here" || !rep.OK() {
		t.Errorf("only a skipped kind named: %d runs of %v, skipped %v; want none run, sigsegv skipped", rep.Runs, rep.Kinds, rep.Skipped)
	}
	rep = Run(Config{Runs: 2, Seed: 1, Parallel: 1, Dir: t.TempDir(), Exe: exe, BigLine: 1, Kinds: []string{"sigsegv", "torn-final-line"}})
	if rep.Runs != 2 || rep.Kinds["sigsegv"] != 0 || rep.Kinds["torn-final-line"] != 2 || !rep.OK() {
		t.Errorf("a skipped kind beside another: %d runs of %v; want 2 of torn-final-line", rep.Runs, rep.Kinds)
	}
}

// Two chaos runs of one seed at once (two test processes, or the command
// beside the tests) must not take each other's processes for their own:
// a process tagged as another run's job 0 of seed 1 is neither counted
// nor killed by this run's job 0 of seed 1.
func TestARunLeavesAnotherRunsProcessesAlone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("/bin/sh", "-c", "echo ready; read x")
	other.Env = append(os.Environ(), envTag+"=1-0") // what job 0 of seed 1 was tagged before runs had tokens
	stdin, _ := other.StdinPipe()
	stdout, _ := other.StdoutPipe()
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); other.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the other run's process: %q, %v", line, err)
	}
	rep := Run(Config{Runs: 1, Seed: 1, Parallel: 1, Dir: t.TempDir(), Exe: exe, BigLine: 1, Kinds: []string{"sigsegv"}})
	if rep.Orphans != 0 || !rep.OK() {
		var text bytes.Buffer
		rep.WriteText(&text)
		t.Errorf("this run counted another's process:\n%s", text.String())
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the other run's process was killed: %v", err)
	}
}
