package pilot_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/pilottest"
)

// The test binary doubles as the fake agent and as a dispatching child
// process (for the test that SIGKILLs the dispatcher).
func TestMain(m *testing.M) {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	if os.Getenv(envDispatcherChild) != "" {
		os.Exit(dispatcherChild(os.Args[1:]))
	}
	if os.Getenv(envProbe) != "" {
		os.Exit(probeChild(os.Args[1:]))
	}
	if os.Getenv(envProvenanceChild) != "" {
		os.Exit(provenanceChild())
	}
	// Stop the supervisor as soon as it is idle, so leak checks see a
	// quiet process.
	supervise.SetLinger(0)
	// A race-detector build waits a second at exit by default; the
	// supervisor and the fake agents are this binary.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// os/exec panics (in a finalizer) for a started Cmd never waited for.
	os.Setenv("GODEBUG", strings.TrimPrefix(os.Getenv("GODEBUG")+",execwait=2", ","))
	os.Exit(leakCheckMain(m.Run()))
}

const envDispatcherChild = "PILOT_TEST_DISPATCHER_CHILD"

// fakeProvider is a command-runner provider that runs the fake agent with
// the given script.
func fakeProvider(t testing.TB, name string, script ...string) pilot.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return pilot.Provider{
		Name:   name,
		Runner: "command",
		Argv:   append([]string{exe}, script...),
		Env:    map[string]string{fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0"},
	}
}

// testDispatcher returns a Dispatcher over ps with its run directory in a
// temporary directory and short, test-sized grace periods.
func testDispatcher(t testing.TB, ps ...pilot.Provider) *pilot.Dispatcher {
	t.Helper()
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		t.Fatal(err)
	}
	return &pilot.Dispatcher{
		Runners:   agents.Runners(),
		Providers: reg,
		RunDir:    t.TempDir(),
		Grace:     graceFor(t),
		LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.LookupEnv(k)
			}
			return "", false
		},
	}
}

// graceFor is a grace period long enough for a loaded machine and short
// enough for a test: a fraction of the test's deadline, at most 2 s.
func graceFor(t testing.TB) time.Duration {
	g := 2 * time.Second
	if tt, ok := t.(*testing.T); ok {
		if dl, ok := tt.Deadline(); ok {
			if rem := time.Until(dl) / 20; rem < g {
				g = rem
			}
		}
	}
	return g
}

func task(provider string) pilot.Task {
	return pilot.Task{Provider: provider, Mode: pilot.ModeCode, Prompt: "do the thing"}
}

// onLine returns an OnLine hook that calls f for every stdout line
// matching prefix, once per line, from the reader goroutine.
func onLine(prefix string, f func(line string)) func(string, pilot.Line) {
	return func(_ string, l pilot.Line) {
		if l.Stream == pilot.Stdout && strings.HasPrefix(string(l.Data), prefix) {
			f(string(l.Data))
		}
	}
}

// spawnedPIDs collects "spawned PID" lines.
type spawnedPIDs struct {
	mu   sync.Mutex
	pids []int
}

func (s *spawnedPIDs) hook(_ string, l pilot.Line) {
	if pid, ok := strings.CutPrefix(string(l.Data), "spawned "); ok && l.Stream == pilot.Stdout {
		n, _ := strconv.Atoi(pid)
		s.mu.Lock()
		s.pids = append(s.pids, n)
		s.mu.Unlock()
	}
}

func (s *spawnedPIDs) get() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.pids...)
}

// gone reports whether pid no longer runs (absent or a zombie).
func gone(pid int) bool { return !procfs.Alive(pid) }

// dispatcherChild runs one dispatch of the fake agent script in args and
// reports on stdout: "worker PID" once it started, then "line TEXT" for each
// stdout line of the worker. It is SIGKILLed by the test.
func dispatcherChild(script []string) int {
	exe, _ := os.Executable()
	reg, err := pilot.NewRegistry(pilot.Provider{
		Name:   "fake",
		Runner: "command",
		Argv:   append([]string{exe}, script...),
		Env:    map[string]string{fakeagent.EnvFakeAgent: "1"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out.WriteString(s + "\n")
		out.Flush()
	}
	d := &pilot.Dispatcher{
		Runners:   agents.Runners(),
		Providers: reg,
		RunDir:    os.Getenv("PILOT_TEST_RUN_DIR"),
		Observer: func(e pilot.Event) {
			if e.Started != nil {
				say("worker " + strconv.Itoa(e.Started.Pid))
			}
		},
		OnLine: func(_ string, l pilot.Line) {
			if l.Stream == pilot.Stdout {
				say("line " + string(l.Data))
			}
		},
	}
	_, err = d.Dispatch(context.Background(), pilot.Task{Provider: "fake", Mode: pilot.ModeCode, Prompt: "x", Workdir: filepath.Dir(exe)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// replayProvider is pilottest.ReplayProvider.
func replayProvider(t testing.TB, rn, prefix string) pilot.Provider {
	return pilottest.ReplayProvider(t, rn, prefix)
}

// readCall is how the latest worker of p, a replayProvider, was started,
// and its environment as a map.
func readCall(t testing.TB, p pilot.Provider) (pilottest.Call, map[string]string) {
	t.Helper()
	c := pilottest.LastCall(t, p)
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return c, env
}

// noSecretIn is pilottest.NoSecretIn.
func noSecretIn(t testing.TB, dir string, secrets ...string) (files, found int) {
	t.Helper()
	return pilottest.NoSecretIn(t, dir, secrets...)
}
