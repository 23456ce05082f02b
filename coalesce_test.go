package pilot_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// A worker printing a line every few milliseconds is read in groups, a
// read about every tick rather than one per line, and loses none of them.
// (Before, each line was a read of its own: a wake-up of the reader, a
// read and a stream.log write, most of what pilot spends on a worker that
// streams.)
func TestAChattyWorkerIsReadInGroups(t *testing.T) {
	const lines = 100
	p := fakeProvider(t, "chatty", fmt.Sprintf("tick=%d/5ms", lines))
	d := testDispatcher(t, p)
	var (
		mu   sync.Mutex
		seen []string
		at   []time.Time
	)
	d.OnLine = onLine("tick ", func(l string) {
		mu.Lock()
		seen = append(seen, l)
		at = append(at, time.Now())
		mu.Unlock()
	})
	v, err := d.Dispatch(context.Background(), task("chatty"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != pilot.Completed {
		t.Errorf("verdict %s, want completed", v.Verdict)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != lines {
		t.Fatalf("OnLine saw %d lines, want %d", len(seen), lines)
	}
	for i, l := range seen {
		if want := fmt.Sprintf("tick %d", i+1); l != want {
			t.Fatalf("line %d is %q, want %q", i, l, want)
		}
	}
	// The lines of one read reach OnLine back to back; the worker prints
	// them 5 ms apart.
	groups := 1
	for i := 1; i < len(at); i++ {
		if at[i].Sub(at[i-1]) > 2*time.Millisecond {
			groups++
		}
	}
	if groups > lines/4 {
		t.Errorf("the %d lines came in %d groups, want at most %d: read one by one", lines, groups, lines/4)
	}
	stream, err := os.ReadFile(readRecord(t, v).StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(stream), "out tick "); got != lines {
		t.Errorf("stream.log has %d of the %d lines", got, lines)
	}
}
