// Package pilottest is a test kit for code built on pilot: a scripted fake
// agent, a fake TaskDispatcher, and the conformance harness pilot's own
// agent CLI runners pass, for the authors of other runners.
//
// The fake agent is the test binary itself. A test package that uses
// FakeProvider or Conformance calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { pilottest.Main(m) }
package pilottest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/supervise"
)

// Main plays the fake agent when the test binary was started as one (by a
// FakeProvider or Conformance worker). Otherwise it runs the tests with
// os/exec's check for commands never waited for (GODEBUG=execwait=2), then
// ends pilot's supervisor ([pilot.Shutdown]) and fails the run if a
// goroutine running pilot's code is left. It exits with the tests' status.
func Main(m *testing.M) {
	ServeFakeAgent()
	os.Setenv("GODEBUG", strings.TrimPrefix(os.Getenv("GODEBUG")+",execwait=2", ","))
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pilot.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pilottest: ending pilot's supervisor:", err)
		code = 1
	}
	left := Goroutines()
	for i := 0; i < 200 && len(left) > 0; i++ {
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // goroutines that are ending
		left = Goroutines()
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "pilottest: %d goroutine(s) of pilot left when every test had ended:\n%s\n", len(left), strings.Join(left, "\n\n"))
		code = 1
	}
	os.Exit(code)
}

// ServeFakeAgent plays the fake agent and exits when this program was started
// as one (by a FakeAgent provider's worker); otherwise it returns at once.
// Main calls it; a program that dispatches to FakeAgent providers outside
// tests (a demo) calls it first thing in main.
func ServeFakeAgent() {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
}

// Alive lists the processes still alive that belong to the run runID (they
// carry PILOT_RUN_ID=runID in their environment, as every worker and its
// descendants do), for a test that nothing of a run outlived it. It reads
// /proc, so it finds nothing on other systems.
func Alive(runID string) []int {
	return procfs.WithEnv("PILOT_RUN_ID=" + runID)
}

// Supervisor returns the pid of the supervisor process that the pilot
// process pid started (pilot starts one for its dispatches and keeps it
// while they run; see [pilot.Shutdown]), or 0 when it has none. A test
// that stops it (SIGSTOP) before killing pid leaves the pilot's workers
// behind, as a crash does, to test what closes such runs out. It reads
// /proc, so it finds nothing on other systems.
func Supervisor(pid int) int {
	for _, c := range procfs.Children(pid) {
		if env, err := procfs.Environ(c); err == nil && bytes.Contains(env, []byte(supervise.EnvSupervisor+"=")) {
			return c
		}
	}
	return 0
}

// Goroutines returns the stacks of the goroutines running pilot's code
// (its packages and their internal ones), other than the caller and the
// test functions themselves: after a test's dispatches have returned and
// pilot.Shutdown, there should be none. Goroutines that have just signalled
// their end may take a moment to return; look again before failing.
func Goroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the caller
		}
		if !strings.Contains(g, "github.com/pilotworkers/pilot.") && !strings.Contains(g, "github.com/pilotworkers/pilot/") {
			continue
		}
		if strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "created by github.com/pilotworkers") {
			continue // a test function itself, not a goroutine it started
		}
		out = append(out, g)
	}
	return out
}

// FakeProvider is a provider of the command runner, named name, whose
// worker is the fake agent (the test binary; see Main) running script, one
// step per argument, in order:
//
//	out=TEXT        print TEXT and a newline on stdout
//	err=TEXT        print TEXT and a newline on stderr
//	raw=TEXT        print TEXT on stdout with no newline
//	bigline=N       print one line of N bytes on stdout
//	flood=N         write at least N bytes of text lines to stderr
//	printenv=NAME   print "NAME=value" or "NAME unset" on stdout
//	stdin           copy stdin to stdout
//	sleep=DURATION  sleep (a Go duration)
//	alloc=SIZE      allocate SIZE bytes ("300MiB"; B, KiB, MiB, GiB), make
//	                them resident, and hold them until the process exits
//	block           wait forever
//	ignore-term     ignore SIGTERM from now on
//	session=PATH    use PATH as the native session file for sess= steps
//	sess=JSON       append JSON and a newline to the session file
//	tick=N/DURATION print N numbered lines on stdout, DURATION apart
//	write=PATH=TEXT write TEXT, a Go string body ("a\nb"), to PATH
//	append=PATH=TEXT append TEXT to PATH
//	move=PATH=DEST  rename PATH to DEST
//	await=PATH      wait until PATH exists
//	signal=N        die from signal N
//	exit=N          exit with status N
//	spawn[:setsid,hold] STEPS... end
//	                start a child fake agent running STEPS and print
//	                "spawned PID" once it runs "ready" (or exits)
//
// After the last step the agent exits 0. Placeholders of the command
// runner ({session_path}, {task_file}, ...) work in steps.
func FakeProvider(t testing.TB, name string, script ...string) pilot.Provider {
	t.Helper()
	p, err := FakeAgent(name, script...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FakeAgent is FakeProvider outside a test: its worker is this program,
// which must call ServeFakeAgent first thing.
func FakeAgent(name string, script ...string) (pilot.Provider, error) {
	exe, err := os.Executable()
	if err != nil {
		return pilot.Provider{}, fmt.Errorf("pilottest: the fake agent is this program, whose path is unknown: %w", err)
	}
	return pilot.Provider{
		Name:   name,
		Runner: "command",
		Argv:   append([]string{exe}, script...),
		Env:    map[string]string{fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0"},
	}, nil
}

// Dispatcher is a Dispatcher over providers ps (and runners rs, beside the
// command runner), with its run directory in t's temporary directory, a
// grace period short enough for a test (a fraction of t's deadline, at most
// 2 s) and a worker environment of PATH alone.
func Dispatcher(t testing.TB, ps []pilot.Provider, rs ...pilot.Runner) *pilot.Dispatcher {
	t.Helper()
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	return &pilot.Dispatcher{
		Providers: reg,
		Runners:   rs,
		RunDir:    t.TempDir(),
		Grace:     grace(t),
		LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.LookupEnv(k)
			}
			return "", false
		},
	}
}

// grace is a grace period long enough for a loaded machine and short
// enough for a test: a twentieth of the time left before t's deadline, at
// most 2 s.
func grace(t testing.TB) time.Duration {
	g := 2 * time.Second
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := tt.Deadline(); ok {
			g = min(g, time.Until(dl)/20)
		}
	}
	return g
}

// DispatchFunc is a pilot.TaskDispatcher made of a function: a fake for
// testing orchestration (Fanout, retries, a scheduler, your own) without
// starting a process.
type DispatchFunc func(ctx context.Context, t pilot.Task) (pilot.Verdict, error)

// Dispatch implements pilot.TaskDispatcher.
func (f DispatchFunc) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	return f(ctx, t)
}

// GitRepo makes a git repository with one (empty) commit in t's temporary
// directory and returns it, for worktree jobs; it skips t when git is not
// installed.
func GitRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=pilot", "-c", "user.email=pilot@example.invalid", "commit", "-q", "--allow-empty", "-m", "start"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// NoSecretIn fails t if any file under dir (a run directory, a worker's
// config dir; symbolic links aside) holds one of secrets, or cannot be
// read; it returns how many files it read and how
// many secrets it found in them.
func NoSecretIn(t testing.TB, dir string, secrets ...string) (files, found int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || de.Type()&fs.ModeSymlink != 0 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			return nil
		}
		files++
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				found++
				t.Errorf("%s holds the secret %q:\n%s", path, s, data)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	return files, found
}
