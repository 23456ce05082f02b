package pilot_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
)

// An observer stuck on the started event (for minutes, in the chaos
// suite) does not delay the worker's supervision: the timeout ends the
// worker and pilot judges it while the observer is still stuck; the
// observer then gets every event in order, and Dispatch returns after it.
func TestABlockedObserverDoesNotDelaySupervision(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "slow", "out=hello", "block"))
	var types []string
	judgedWhileStuck := false
	d.Observer = func(e pilot.Event) {
		types = append(types, e.Type)
		if e.Started == nil {
			return
		}
		// Stuck until pilot has written its verdict to events.log, which
		// it could not do while supervision waited on this observer.
		log := filepath.Join(e.Started.RunDir, "events.log")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			if data, _ := os.ReadFile(log); strings.Contains(string(data), `"type":"worker_runner.verdict"`) {
				judgedWhileStuck = true
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond): // polling pilot's file, not waiting on the worker
			}
		}
	}
	tk := task("slow")
	tk.Timeout = 200 * time.Millisecond
	v := dispatch(t, d, tk)
	if v.FailureClass != pilot.FailTimeout {
		t.Errorf("verdict %s/%s, want the timeout", v.Verdict, v.FailureClass)
	}
	if !judgedWhileStuck {
		t.Fatal("pilot did not judge the worker while the observer was stuck")
	}
	if len(types) < 3 || types[0] != "worker_runner.started" || types[len(types)-1] != "worker_runner.verdict" || !slices.Contains(types, event.Terminate) {
		t.Errorf("events %q; want started first, a terminate, the verdict last", types)
	}
}
