package pilot_test

import (
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/pisession"
)

// checkGoroutines fails t if, when t and its subtests have ended, a
// goroutine running pilot's code is left that was not there when
// checkGoroutines was called. Goroutines that have signalled their end may
// take a moment to return: the check looks again, briefly, before failing.
// It is exact for tests that do not run in parallel with others (the
// Dispatcher and Fanout tests); TestMain checks the whole package at its
// end.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := map[string]bool{}
	for _, g := range pilotGoroutines() {
		before[goroutineID(g)] = true
	}
	t.Cleanup(func() {
		var left []string
		for i := 0; i < 200; i++ {
			left = left[:0]
			for _, g := range pilotGoroutines() {
				if !before[goroutineID(g)] {
					left = append(left, g)
				}
			}
			if len(left) == 0 {
				return
			}
			runtime.Gosched()
			time.Sleep(5 * time.Millisecond)
		}
		t.Errorf("%d goroutine(s) of pilot outlived the test:\n%s", len(left), strings.Join(left, "\n\n"))
	})
}

// pilotGoroutines returns the stacks of the goroutines running pilot's code
// (pilottest.Goroutines).
func pilotGoroutines() []string { return pilottest.Goroutines() }

// goroutineID is "goroutine N" from a stack's first line.
func goroutineID(stack string) string {
	id, _, _ := strings.Cut(stack, " [")
	return id
}

// leakCheckMain runs at the end of TestMain: no goroutine of pilot may be
// left, and os/exec's execwait check (GODEBUG=execwait=2, set by TestMain)
// gets its chance to find a started exec.Cmd that was never waited for: its
// finalizer panics, failing the test binary. It returns the exit status.
func leakCheckMain(code int) int {
	if left := pilotGoroutines(); len(left) > 0 {
		// Give goroutines that are ending a moment, then report.
		for i := 0; i < 200 && len(left) > 0; i++ {
			runtime.Gosched()
			time.Sleep(5 * time.Millisecond)
			left = pilotGoroutines()
		}
		if len(left) > 0 {
			os.Stderr.WriteString("goroutines of pilot left when every test had ended:\n" + strings.Join(left, "\n\n") + "\n")
			code = 1
		}
	}
	// Collect every unreachable exec.Cmd and let the finalizers run: a
	// sentinel's finalizer, queued behind them, says when they have.
	done := make(chan struct{})
	sentinel := new(int)
	runtime.SetFinalizer(sentinel, func(*int) { close(done) })
	sentinel = nil
	runtime.GC()
	runtime.GC()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	return code
}

// TestLeakCheckSeesAPilotGoroutine: the checker is not blind. A goroutine
// blocked in pilot's code (a session parse waiting for input) is listed
// until it returns.
func TestLeakCheckSeesAPilotGoroutine(t *testing.T) {
	before := map[string]bool{}
	for _, g := range pilotGoroutines() {
		before[goroutineID(g)] = true
	}
	r, w := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pisession.Parse(r)
	}()
	w.Write([]byte(`{"type":"session","id":"s"}` + "\n")) // it is reading now
	found := false
	for _, g := range pilotGoroutines() {
		if !before[goroutineID(g)] && strings.Contains(g, "pisession.Parse") {
			found = true
		}
	}
	w.Close()
	<-done
	if !found {
		t.Errorf("the goroutine blocked in pisession.Parse was not listed")
	}
}
