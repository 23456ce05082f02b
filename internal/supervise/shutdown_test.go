//go:build unix

package supervise

import (
	"context"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot/internal/procfs"
)

// Jobs start and end while Shutdown runs again and again, so that the
// supervisor is stopped between jobs and spawned anew: every job ends
// normally, and a final Shutdown leaves no supervisor. Run with -race.
func TestShutdownRacesWithStart(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0") // the supervisor is this binary
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	const workers, jobs = 2, 20
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				j, err := Start(Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", "exit 3"}, Cookie: "X=1", Env: []string{"X=1"}}, null, null, null)
				if err != nil {
					t.Error(err)
					return
				}
				<-j.Done()
				if err := j.Err(); err != nil || j.Status().ExitStatus() != 3 {
					t.Errorf("job: status %v, err %v; want exit 3", j.Status(), err)
				}
				j.Close()
			}
		}()
	}
	stop := make(chan struct{})
	shutdowns := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				shutdowns <- n
				return
			default:
			}
			if err := Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	wg.Wait()
	close(stop)
	t.Logf("%d shutdowns", <-shutdowns)
	if err := Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	c, live, busy := shared.c, len(shared.live), shared.busy
	shared.mu.Unlock()
	if c != nil || live != 0 || busy != 0 {
		t.Errorf("after Shutdown: client %v, %d live, busy %d; want none", c, live, busy)
	}
	if runtime.GOOS == "linux" {
		if kids := procfs.Children(os.Getpid()); len(kids) > 0 {
			t.Errorf("child processes after Shutdown: %v", kids)
		}
	}
}
