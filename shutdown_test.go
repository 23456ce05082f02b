//go:build unix

package pilot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/supervise"
)

// lingerAsShipped gives the supervisor its default linger for the test:
// TestMain stops it after every job, which would leave Shutdown nothing to
// do. The test ends with no supervisor, as TestMain's leak check wants.
func lingerAsShipped(t *testing.T) {
	supervise.SetLinger(5 * time.Second)
	t.Cleanup(func() {
		supervise.SetLinger(0)
		if err := pilot.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown in cleanup: %v", err)
		}
	})
}

// shellDispatcher dispatches /bin/sh -c script through the public API.
func shellDispatcher(t *testing.T, script string, args ...string) (*pilot.Dispatcher, pilot.Task) {
	t.Helper()
	reg, err := pilot.NewRegistry(pilot.Provider{
		Name:   "sh",
		Runner: "command",
		Argv:   append([]string{"/bin/sh", "-c", script, "sh"}, args...),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &pilot.Dispatcher{Providers: reg, RunDir: t.TempDir()}
	return d, pilot.Task{Provider: "sh", Mode: pilot.ModeExplore, Prompt: "x", Workdir: t.TempDir()}
}

// children lists this process's child processes, or nil where they cannot
// be listed (Linux only: /proc/self/task/*/children).
func children(t *testing.T) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		return nil
	}
	files, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) { // a thread may exit meanwhile
			t.Fatal(err)
		}
		pids = append(pids, strings.Fields(string(b))...)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// goroutinesBackTo waits for the goroutine count to fall to base, polling
// (a goroutine that signalled its end may not have returned yet), and
// reports whether it did.
func goroutinesBackTo(base int) bool {
	for range 200 {
		if runtime.NumGoroutine() <= base {
			return true
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
	return runtime.NumGoroutine() <= base
}

func TestShutdownLeavesNoGoroutineOrProcess(t *testing.T) {
	lingerAsShipped(t)
	baseGoroutines, baseChildren := runtime.NumGoroutine(), children(t)

	d, tk := shellDispatcher(t, "echo ok")
	v, err := d.Dispatch(context.Background(), tk)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Verdict.Success() {
		t.Fatalf("verdict = %s (%s), want a success", v.Verdict, v.FailureClass)
	}
	if runtime.GOOS == "linux" && len(children(t)) <= len(baseChildren) {
		t.Fatalf("no supervisor lingers after Dispatch (children %v, before %v): nothing for Shutdown to end", children(t), baseChildren)
	}

	if err := pilot.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	// Shutdown has reaped the supervisor: no waiting for it.
	if got := children(t); !slices.Equal(got, baseChildren) {
		t.Errorf("child processes after Shutdown = %v, want %v", got, baseChildren)
	}
	if !goroutinesBackTo(baseGoroutines) {
		t.Errorf("%d goroutines after Shutdown, %d before the dispatch", runtime.NumGoroutine(), baseGoroutines)
	}

	// A later dispatch starts a new supervisor.
	if v, err := d.Dispatch(context.Background(), tk); err != nil || !v.Verdict.Success() {
		t.Fatalf("dispatch after Shutdown = %s, %v", v.Verdict, err)
	}
}

func TestShutdownLeavesARunningDispatchAlone(t *testing.T) {
	lingerAsShipped(t)
	// The worker blocks opening a FIFO until the test opens it too.
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	d, tk := shellDispatcher(t, `echo ready; cat "$1" >/dev/null; echo done`, fifo)
	ready := make(chan struct{})
	var once sync.Once
	d.OnLine = onLine("ready", func(string) { once.Do(func() { close(ready) }) })
	type result struct {
		v   pilot.Verdict
		err error
	}
	res := make(chan result, 1)
	go func() {
		v, err := d.Dispatch(context.Background(), tk)
		res <- result{v, err}
	}()
	select {
	case <-ready:
	case r := <-res:
		t.Fatalf("the dispatch ended before the worker was released: %s, %v", r.v.Verdict, r.err)
	}

	cause := errors.New("the test gave up")
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := pilot.Shutdown(cancelled); err != cause {
		t.Errorf("Shutdown(cancelled ctx) = %v, want its cause %v", err, cause)
	}
	short, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	if err := pilot.Shutdown(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown(short ctx) = %v, want %v", err, context.DeadlineExceeded)
	}

	// The dispatch goes on: release the worker, and it finishes normally.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.v.Verdict != pilot.Completed || r.v.ExitCode == nil || *r.v.ExitCode != 0 || r.v.TerminationInitiator != "" {
		t.Errorf("verdict = %s (%s, termination by %q), want completed with exit 0, ended by the worker itself", r.v.Verdict, r.v.FailureClass, r.v.TerminationInitiator)
	}
	if err := pilot.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the dispatch = %v", err)
	}
}
