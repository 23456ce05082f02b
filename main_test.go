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
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/supervise"
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
	if os.Getenv(envProvenanceChild) != "" {
		os.Exit(provenanceChild())
	}
	// Stop the supervisor as soon as it is idle, so leak checks see a
	// quiet process.
	supervise.SetLinger(0)
	// A race-detector build waits a second at exit by default; the
	// supervisor and the fake agents are this binary.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
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
		Runner: pilot.RunnerCommand,
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

// waitGone waits, without polling, until every pid has exited or the
// deadline passes; it returns the pids still alive.
func waitGone(t *testing.T, pids []int, timeout time.Duration) []int {
	t.Helper()
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	live := map[int32]int{}
	for _, pid := range pids {
		fd, _, errno := syscall.Syscall(434 /* pidfd_open */, uintptr(pid), 0, 0)
		if errno != 0 {
			continue // already gone
		}
		defer syscall.Close(int(fd))
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			t.Fatal(err)
		}
		live[int32(fd)] = pid
	}
	deadline := time.Now().Add(timeout)
	events := make([]syscall.EpollEvent, 8)
	for len(live) > 0 {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			break
		}
		n, err := syscall.EpollWait(ep, events, ms)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events[:n] {
			delete(live, ev.Fd)
			syscall.EpollCtl(ep, syscall.EPOLL_CTL_DEL, int(ev.Fd), nil)
		}
	}
	var left []int
	for _, pid := range live {
		if !gone(pid) {
			left = append(left, pid)
		}
	}
	return left
}

// dispatcherChild runs one dispatch of the fake agent script in args and
// reports on stdout: "worker PID" once it started, then "line TEXT" for each
// stdout line of the worker. It is SIGKILLed by the test.
func dispatcherChild(script []string) int {
	exe, _ := os.Executable()
	reg, err := pilot.NewRegistry(pilot.Provider{
		Name:   "fake",
		Runner: pilot.RunnerCommand,
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

// feed hands lines to w as stdout lines, as the Dispatcher would.
func feed(w pilot.Watcher, lines ...string) {
	for _, l := range lines {
		w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l))})
	}
}
