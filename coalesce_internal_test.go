package pilot

import (
	"testing"
	"time"
)

func TestCoalescerWaitsOnlyForAChattyStream(t *testing.T) {
	const every = 100 * time.Millisecond
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type read struct {
		issued time.Time // when the read was issued: the time after the last wait
		at     time.Time // when it got its data
		n      int
		full   bool
		want   time.Duration
	}
	for _, tt := range []struct {
		name  string
		reads []read
	}{
		{"a first read never waits", []read{{at: at(0), n: 10, want: 0}}},
		{"a line long after the read was issued: read as soon as it is printed", []read{
			{issued: at(0), at: at(5 * time.Second), n: 100, want: 0},
			{issued: at(5 * time.Second), at: at(9 * time.Second), n: 100, want: 0},
		}},
		{"a line soon after: wait for the next tick", []read{
			{issued: at(0), at: at(30 * time.Millisecond), n: 100, want: 70 * time.Millisecond},
			{issued: at(100 * time.Millisecond), at: at(100 * time.Millisecond), n: 200, want: 100 * time.Millisecond},
		}},
		{"a read that filled its buffer: read on", []read{
			{issued: at(0), at: at(10 * time.Millisecond), n: 4096, full: true, want: 0},
		}},
		{"a stream that gives the burst over a tick and the last: read on while it does", []read{
			{issued: at(0), at: at(1 * time.Millisecond), n: 10 << 10, want: 99 * time.Millisecond},
			{issued: at(100 * time.Millisecond), at: at(100 * time.Millisecond), n: 10 << 10, want: 0},
			{issued: at(100 * time.Millisecond), at: at(150 * time.Millisecond), n: 100, want: 0},
			{issued: at(150 * time.Millisecond), at: at(220 * time.Millisecond), n: 100, want: 80 * time.Millisecond},
			{issued: at(300 * time.Millisecond), at: at(310 * time.Millisecond), n: 100, want: 90 * time.Millisecond},
			{issued: at(400 * time.Millisecond), at: at(420 * time.Millisecond), n: 100, want: 80 * time.Millisecond},
		}},
		{"a clock stepped back: still never more than a tick", []read{
			{issued: at(time.Second), at: at(time.Second + 10*time.Millisecond), n: 100, want: 90 * time.Millisecond},
			{issued: at(time.Second + 100*time.Millisecond), at: at(-time.Hour + 30*time.Millisecond), n: 100, want: 70 * time.Millisecond},
			{issued: at(-time.Hour + 100*time.Millisecond), at: at(-time.Hour + 140*time.Millisecond), n: 100, want: 60 * time.Millisecond},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := coalescer{every: every}
			for i, r := range tt.reads {
				if !r.issued.IsZero() {
					c.issued = r.issued
				}
				if got := c.after(r.n, r.full, r.at); got != r.want {
					t.Errorf("read %d: wait %v, want %v", i, got, r.want)
				}
			}
		})
	}
	t.Run("never for a dispatch that turned it off", func(t *testing.T) {
		c := coalescer{}
		c.after(10, false, t0)
		if got := c.after(10, false, t0.Add(time.Millisecond)); got != 0 {
			t.Errorf("wait %v, want 0", got)
		}
	})
}

// A dispatch whose timeouts or stall policy act on a short silence lets
// output wait in the pipe for a tenth of the shortest at most, so that the
// silence pilot sees is never the reader's own.
func TestCoalesceEveryIsATenthOfTheShortestSilence(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    Dispatcher
		task Task
		want time.Duration
	}{
		{"the defaults", Dispatcher{}, Task{}, coalesceTick},
		{"an idle timeout of 500 ms", Dispatcher{IdleTimeout: 500 * time.Millisecond}, Task{}, 50 * time.Millisecond},
		{"a task's idle timeout", Dispatcher{}, Task{IdleTimeout: 300 * time.Millisecond}, 30 * time.Millisecond},
		{"a finish grace of 200 ms", Dispatcher{FinishGrace: 200 * time.Millisecond}, Task{}, 20 * time.Millisecond},
		{"a heartbeat of 100 ms", Dispatcher{Heartbeat: 100 * time.Millisecond}, Task{}, 10 * time.Millisecond},
		{"a stall policy's tool silence", Dispatcher{Stall: StallPolicy{Tool: 400 * time.Millisecond}}, Task{}, 40 * time.Millisecond},
		{"a model stall", Dispatcher{Stall: StallPolicy{ModelStall: 250 * time.Millisecond}}, Task{}, 25 * time.Millisecond},
		{"too short to be worth a wait", Dispatcher{IdleTimeout: 5 * time.Millisecond}, Task{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &run{d: tt.d.withDefaults(), task: tt.task}
			if got := r.coalesceEvery(); got != tt.want {
				t.Errorf("coalesceEvery() = %v, want %v", got, tt.want)
			}
		})
	}
}
