package pilot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/size"
)

// widths is a fake dispatcher whose providers are bounded as a providers
// file's max_parallel bounds them; run is each job's work.
type widths struct {
	limit map[string]int
	run   func(ctx context.Context, t pilot.Task) (pilot.Verdict, error)
}

func (w widths) Dispatch(ctx context.Context, t pilot.Task) (pilot.Verdict, error) {
	return w.run(ctx, t)
}

func (w widths) Limits(t pilot.Task) pilot.Limits {
	return pilot.Limits{MaxParallel: w.limit[t.Provider], ExpectedRSS: 512 * size.MiB}
}

// running counts the jobs of each provider that run at once, and the most
// that ever did.
type running struct {
	mu   sync.Mutex
	now  map[string]int
	peak map[string]int
}

func (r *running) enter(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now == nil {
		r.now, r.peak = map[string]int{}, map[string]int{}
	}
	r.now[p]++
	r.peak[p] = max(r.peak[p], r.now[p])
}

func (r *running) leave(p string) {
	r.mu.Lock()
	r.now[p]--
	r.mu.Unlock()
}

// Random fanouts over providers of random widths never run more of a
// provider's jobs at once than its max_parallel, nor more jobs than the
// fanout's MaxParallel, and every job runs.
func TestFanoutHonoursEachProvidersMaxParallel(t *testing.T) {
	checkGoroutines(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	for round := range 150 {
		limit := map[string]int{}
		providers := []string{"a", "b", "c"}
		for _, p := range providers {
			limit[p] = rng.IntN(4) // 0: no bound
		}
		var jobs []pilot.Job
		for range 1 + rng.IntN(12) {
			jobs = append(jobs, pilot.Job{Task: pilot.Task{Provider: providers[rng.IntN(3)], Mode: pilot.ModeReview, Prompt: "x"}})
		}
		var r running
		var ran sync.Map
		d := widths{limit: limit, run: func(_ context.Context, task pilot.Task) (pilot.Verdict, error) {
			r.enter(task.Provider)
			r.enter("") // the fanout's own width
			for range 1 + rand.IntN(20) {
				runtime.Gosched()
			}
			r.leave("")
			r.leave(task.Provider)
			ran.Store(task.Prompt, true)
			return pilot.Verdict{Verdict: pilot.Completed, Provider: task.Provider}, nil
		}}
		for i := range jobs {
			jobs[i].Task.Prompt = fmt.Sprint(i)
		}
		maxPar := rng.IntN(5)
		vs, err := (&pilot.Fanout{Dispatcher: d, MaxParallel: maxPar}).Run(context.Background(), jobs)
		if err != nil {
			t.Fatalf("seed %d round %d: %v", seed, round, err)
		}
		for i, v := range vs {
			if v.Verdict.Verdict != pilot.Completed {
				t.Errorf("seed %d round %d: job %d ended %s (%s), want it run", seed, round, i, v.Verdict.Verdict, v.Blocked)
			}
			if _, ok := ran.Load(fmt.Sprint(i)); !ok {
				t.Errorf("seed %d round %d: job %d never ran", seed, round, i)
			}
		}
		for p, n := range r.peak {
			if p == "" {
				if maxPar > 0 && n > maxPar {
					t.Errorf("seed %d round %d: %d jobs ran at once, MaxParallel %d", seed, round, n, maxPar)
				}
				continue
			}
			if limit[p] > 0 && n > limit[p] {
				t.Errorf("seed %d round %d: %d jobs of provider %s ran at once, its max_parallel is %d", seed, round, n, p, limit[p])
			}
		}
	}
}

// A job waiting for its provider's slot holds none of the fanout's: with
// two slots, a's second job waits for a's only one, and b's job runs
// beside a's first (which ends only once b's has started).
func TestFanoutProviderSlotHoldsNoFanoutSlot(t *testing.T) {
	checkGoroutines(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a guard against a hang, not a measure
	defer cancel()
	bStarted := make(chan struct{})
	var r running
	d := widths{limit: map[string]int{"a": 1}, run: func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		r.enter(task.Provider)
		defer r.leave(task.Provider)
		switch task.Prompt {
		case "a1":
			select {
			case <-bStarted:
			case <-ctx.Done():
				return pilot.Verdict{}, fmt.Errorf("b's job never started beside a's: %w", ctx.Err())
			}
		case "b1":
			close(bStarted)
		}
		return pilot.Verdict{Verdict: pilot.Completed, Provider: task.Provider}, nil
	}}
	jobs := []pilot.Job{
		{Task: pilot.Task{Provider: "a", Mode: pilot.ModeReview, Prompt: "a1"}},
		{Task: pilot.Task{Provider: "a", Mode: pilot.ModeReview, Prompt: "a2"}},
		{Task: pilot.Task{Provider: "b", Mode: pilot.ModeReview, Prompt: "b1"}},
	}
	var mu sync.Mutex
	var waits []string
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 2, OnEvent: func(i int, e pilot.Event) {
		if e.Type == event.FanoutJobWaiting {
			mu.Lock()
			waits = append(waits, fmt.Sprintf("%d %s", i, e.Message))
			mu.Unlock()
		}
	}}
	vs, err := f.Run(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v.Verdict.Verdict != pilot.Completed {
			t.Errorf("job %d: %s %s", i, v.Verdict.Verdict, v.EvidenceExcerpt)
		}
	}
	if r.peak["a"] != 1 {
		t.Errorf("%d of a's jobs ran at once, its max_parallel is 1", r.peak["a"])
	}
	want := "1 waiting for a slot of provider a: all 1 of its slots are running"
	if len(waits) != 1 || waits[0] != want {
		t.Errorf("waiting events = %q, want [%q]", waits, want)
	}
}

// A 402 on provider x's first job closes x for the rest of the fanout: no
// further x job starts, each ends blocked with the first failure's
// evidence, and y's jobs drain. Real workers, real classification.
func TestFanoutQuotaFailureClosesItsProvider(t *testing.T) {
	checkGoroutines(t)
	d := testDispatcher(t,
		fakeProvider(t, "x", "err=HTTP 402 Payment Required: insufficient_quota", "exit=1"),
		fakeProvider(t, "y", "out=ok"),
	)
	var mu sync.Mutex
	starts := map[string]int{}
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 1, OnEvent: func(i int, e pilot.Event) {
		if e.Started != nil {
			mu.Lock()
			starts[e.Started.Provider]++
			mu.Unlock()
		}
	}}
	vs, err := f.Run(context.Background(), fanoutJobs(pilot.ModeReview, "x", "x", "y", "x", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].FailureClass != pilot.FailProviderQuota {
		t.Fatalf("x's first job: class %q (%s), want provider-quota", vs[0].FailureClass, vs[0].EvidenceExcerpt)
	}
	if starts["x"] != 1 || starts["y"] != 2 {
		t.Errorf("workers started by provider = %v, want x once, y twice", starts)
	}
	for _, i := range []int{1, 3} {
		v := vs[i]
		if !v.Synthesized || v.RunID != "" || v.FailureClass != pilot.FailProviderQuota {
			t.Errorf("job %d: synthesized %v run %q class %q, want a synthesized provider-quota verdict of a job never run", i, v.Synthesized, v.RunID, v.FailureClass)
		}
		if !strings.HasPrefix(v.Blocked, "provider x quota used up (job x:review): ") || !strings.Contains(v.Blocked, "insufficient_quota") {
			t.Errorf("job %d blocked = %q, want the first failure named with its evidence", i, v.Blocked)
		}
		if v.EvidenceExcerpt != v.Blocked {
			t.Errorf("job %d evidence = %q, want the reason it was blocked", i, v.EvidenceExcerpt)
		}
	}
	for _, i := range []int{2, 4} {
		if vs[i].Verdict.Verdict != pilot.Completed || vs[i].Blocked != "" {
			t.Errorf("y's job %d: %s blocked %q, want it run", i, vs[i].Verdict.Verdict, vs[i].Blocked)
		}
	}
}

// A rate limit with a known reset holds its provider's queued jobs until
// the reset, holding no slot: y's job runs in the only slot meanwhile.
func TestFanoutRateLimitHoldsItsProviderUntilTheReset(t *testing.T) {
	checkGoroutines(t)
	const retryAfter = 300 * time.Millisecond
	var mu sync.Mutex
	var order []string
	var limitedAt, secondAt time.Time
	d := widths{run: func(_ context.Context, task pilot.Task) (pilot.Verdict, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, task.Prompt)
		switch task.Prompt {
		case "x1":
			limitedAt = time.Now()
			return pilot.Verdict{Verdict: pilot.Failed, Provider: "x", Failure: pilot.Failure{
				FailureClass: pilot.FailProviderRateLimit, RetryAfterMS: retryAfter.Milliseconds(), EvidenceExcerpt: "429 Too Many Requests",
			}}, nil
		case "x2":
			secondAt = time.Now()
		}
		return pilot.Verdict{Verdict: pilot.Completed, Provider: task.Provider}, nil
	}}
	var waits []string
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 1, OnEvent: func(i int, e pilot.Event) {
		if e.Type == event.FanoutJobWaiting {
			waits = append(waits, fmt.Sprintf("%d %s", i, e.Message))
		}
	}}
	jobs := []pilot.Job{
		{Task: pilot.Task{Provider: "x", Mode: pilot.ModeReview, Prompt: "x1"}},
		{Task: pilot.Task{Provider: "x", Mode: pilot.ModeReview, Prompt: "x2"}},
		{Task: pilot.Task{Provider: "y", Mode: pilot.ModeReview, Prompt: "y1"}},
	}
	vs, err := f.Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	if vs[1].Verdict.Verdict != pilot.Completed || vs[2].Verdict.Verdict != pilot.Completed {
		t.Fatalf("x2 %s, y1 %s: want both run", vs[1].Verdict.Verdict, vs[2].Verdict.Verdict)
	}
	if got := strings.Join(order, " "); got != "x1 y1 x2" {
		t.Errorf("jobs ran in order %q, want y1 in the slot while x waits: x1 y1 x2", got)
	}
	if secondAt.Sub(limitedAt) < retryAfter {
		t.Errorf("x2 started %v after x1's rate limit, before its reset %v later", secondAt.Sub(limitedAt), retryAfter)
	}
	// Before x1 ends, x2 and y1 wait for the one slot; then x2 waits for
	// x's reset.
	var limit []string
	for _, w := range waits {
		if w != "1 waiting for a slot: all 1 of the fanout's slots are running" && w != "2 waiting for a slot: all 1 of the fanout's slots are running" {
			limit = append(limit, w)
		}
	}
	if len(limit) != 1 || !strings.HasPrefix(limit[0], "1 waiting for provider x's rate limit to reset at ") {
		t.Errorf("waiting events = %q, want the slot's and one for x2 naming the reset", waits)
	}
}

// A job without a slot says so once, as do the jobs behind it; none is
// told again while it waits for the same thing, and a job that found its
// slot at once is told nothing.
func TestFanoutSaysAJobWaitsForASlot(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	d := pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		started <- struct{}{}
		<-release
		return pilot.Verdict{Verdict: pilot.Completed, Provider: task.Provider}, nil
	})
	var mu sync.Mutex
	waits := map[int][]string{}
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: 2, OnEvent: func(i int, e pilot.Event) {
		if e.Type == event.FanoutJobWaiting {
			mu.Lock()
			waits[i] = append(waits[i], e.Message)
			mu.Unlock()
		}
	}}
	jobs := make([]pilot.Job, 4)
	for i := range jobs {
		jobs[i] = pilot.Job{Task: pilot.Task{Provider: "p", Mode: pilot.ModeReview, Prompt: fmt.Sprint("job ", i)}}
	}
	done := make(chan []pilot.JobResult)
	go func() {
		vs, err := f.Run(context.Background(), jobs)
		if err != nil {
			t.Error(err)
		}
		done <- vs
	}()
	<-started
	<-started
	close(release) // the first two end; the last two take their slots
	for i, v := range <-done {
		if v.Verdict.Verdict != pilot.Completed {
			t.Errorf("job %d: %s", i, v.Verdict.Verdict)
		}
	}
	slot := "waiting for a slot: all 2 of the fanout's slots are running"
	want := map[int][]string{2: {slot}, 3: {slot}}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waiting events (-want +got):\n%s", diff)
	}
}
