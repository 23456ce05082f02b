package schedule_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
	"github.com/pilotworkers/pilot/size"
)

// outcome is what a job of a random graph does when dispatched.
type outcome int

const (
	succeeds outcome = iota
	fails
	blocks
	rateLimitedOnce // rate limited with a known reset, then succeeds on resume
	quota           // its provider's quota is used up
)

type randomGraph struct {
	g        schedule.Graph
	outcomes map[string]outcome
	files    map[string][]string // normalized write sets; nil: writes nothing
	unknown  map[string]bool
	deps     map[string][]string
	limits   map[string]int // each provider's max_parallel; 0: no bound
}

// limited is a fake dispatcher whose providers have the graph's limits.
type limited struct {
	pilottest.DispatchFunc
	limits map[string]int
}

func (l limited) Limits(t pilot.Task) pilot.Limits {
	return pilot.Limits{MaxParallel: l.limits[t.Provider], ExpectedRSS: 512 * size.MiB}
}

func newRandomGraph(rng *rand.Rand, ws string, n int) randomGraph {
	rg := randomGraph{g: schedule.Graph{Workdir: ws}, outcomes: map[string]outcome{}, files: map[string][]string{},
		unknown: map[string]bool{}, deps: map[string][]string{}, limits: map[string]int{}}
	providers := []string{"p0", "p1", "p2"}
	for _, p := range providers {
		rg.limits[p] = rng.IntN(3)
	}
	for i := range n {
		id := fmt.Sprintf("j%03d", i)
		j := job(id)
		j.Task.Provider = providers[rng.IntN(len(providers))]
		for k := 0; k < i && len(j.Deps) < 3; k++ {
			if rng.IntN(n) < 2 {
				j.Deps = append(j.Deps, fmt.Sprintf("j%03d", k))
			}
		}
		switch x := rng.IntN(20); {
		case x == 0:
			j.WriteSet = []string{"src/"} // unknown
			rg.unknown[id] = true
		case x < 4:
			// writes nothing
		default:
			for range 1 + rng.IntN(2) {
				j.WriteSet = append(j.WriteSet, fmt.Sprintf("./src/f%d.go", rng.IntN(12)))
			}
			set, _, _ := schedule.WriteSet(ws, j.WriteSet)
			rg.files[id] = set
		}
		switch x := rng.IntN(40); {
		case x < 3:
			rg.outcomes[id] = fails
		case x < 5:
			rg.outcomes[id] = blocks
		case x < 9:
			rg.outcomes[id] = rateLimitedOnce
		case x < 10:
			rg.outcomes[id] = quota
		}
		rg.deps[id] = j.Deps
		rg.g.Jobs = append(rg.g.Jobs, j)
	}
	return rg
}

func (rg randomGraph) overlap(a, b string) bool {
	writes := func(id string) bool { return rg.unknown[id] || len(rg.files[id]) > 0 }
	if rg.unknown[a] || rg.unknown[b] {
		return writes(a) && writes(b)
	}
	for _, f := range rg.files[a] {
		if slices.Contains(rg.files[b], f) {
			return true
		}
	}
	return false
}

// A property test over random graphs (up to 200 jobs, random dependencies,
// overlapping write sets, failures, blocks, rate limits and quotas) on a
// fake dispatcher whose calls end in a random order: no dependency is ever
// violated, no two overlapping write sets are ever active, the parallelism
// is never exceeded (nor any provider's max_parallel), every job ends complete, failed, blocked or waiting
// with the right reason, and whenever a ready job waits, the parallelism
// is full, a running job's write set overlaps (and is named), all of its
// provider's slots run, or its provider is gated.
func TestRandomGraphsKeepEveryRule(t *testing.T) {
	ws := t.TempDir()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(200)
		rg := newRandomGraph(rng, ws, n)
		maxPar := rng.IntN(6) // 0: unbounded
		t.Run(fmt.Sprintf("seed%d_n%d_par%d", seed, n, maxPar), func(t *testing.T) {
			checkRandomGraph(t, rg, maxPar, rng)
		})
	}
}

func checkRandomGraph(t *testing.T, rg randomGraph, maxPar int, rng *rand.Rand) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	active := map[string]chan struct{}{}
	activeOf := map[string]int{} // active calls by provider
	completed := map[string]bool{}
	attempts := map[string]int{}
	var pmu sync.Mutex
	var problems []string
	fail := func(format string, a ...any) {
		pmu.Lock()
		problems = append(problems, fmt.Sprintf(format, a...))
		pmu.Unlock()
	}
	fake := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		id := tk.Label
		release := make(chan struct{})
		mu.Lock()
		for _, d := range rg.deps[id] {
			if !completed[d] {
				fail("%s started before its dependency %s completed", id, d)
			}
		}
		for other := range active {
			if rg.overlap(id, other) {
				fail("%s started while %s, whose write set overlaps, runs", id, other)
			}
		}
		if maxPar > 0 && len(active) >= maxPar {
			fail("%s started with %d running (parallelism %d)", id, len(active), maxPar)
		}
		if limit := rg.limits[tk.Provider]; limit > 0 && activeOf[tk.Provider] >= limit {
			fail("%s started with %d of provider %s's jobs running (max_parallel %d)", id, activeOf[tk.Provider], tk.Provider, limit)
		}
		activeOf[tk.Provider]++
		active[id] = release
		attempts[id]++
		n := attempts[id]
		cond.Broadcast()
		mu.Unlock()
		<-release
		mu.Lock()
		defer mu.Unlock()
		delete(active, id)
		activeOf[tk.Provider]--
		v := pilot.Verdict{Provider: tk.Provider, Verdict: pilot.Completed}
		switch rg.outcomes[id] {
		case fails:
			v.Verdict, v.FailureClass = pilot.Failed, pilot.FailGeneric
		case blocks:
			v.Verdict = pilot.Failed
			why := "budget exhausted: " + id
			tk.Observer(pilot.Event{Type: retry.EventBlocked, Message: why, Retry: &retry.Info{Key: id, Reason: why}})
		case rateLimitedOnce:
			if n == 1 {
				v.Verdict, v.FailureClass, v.RetryAfterMS, v.Resume = pilot.Failed, pilot.FailProviderRateLimit, 1000+int64(rng.IntN(5000)), "sess-"+id
			} else if tk.Resume != "sess-"+id {
				fail("%s's attempt %d did not resume its session (resume %q)", id, n, tk.Resume)
			}
		case quota:
			v.Verdict, v.FailureClass, v.EvidenceExcerpt = pilot.Failed, pilot.FailProviderQuota, "quota used up"
		}
		if v.Verdict == pilot.Completed {
			completed[id] = true
		}
		return v, nil
	})
	// The driver ends active calls in a random order until Run returns.
	stop := make(chan struct{})
	driverDone := make(chan struct{})
	go func() {
		defer close(driverDone)
		for {
			mu.Lock()
			for len(active) == 0 {
				select {
				case <-stop:
					mu.Unlock()
					return
				default:
				}
				cond.Wait()
			}
			ids := make([]string, 0, len(active))
			for id := range active {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			close(active[id])
			active[id] = nil // released, not yet returned
			delete(active, id)
			mu.Unlock()
		}
	}()

	// The events, in the scheduler's own order, say what ran when.
	running := map[string]bool{}
	providerOf := map[string]string{}
	runningOf := func(p string) (n int) {
		for id := range running {
			if providerOf[id] == p {
				n++
			}
		}
		return n
	}
	closed := map[string]bool{} // providers whose quota the scheduler saw used up
	gatedUntil := map[string]time.Time{}
	clock := &fakeClock{now: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)}
	s := &schedule.Scheduler{
		Dispatcher:  limited{fake, rg.limits},
		MaxParallel: maxPar,
		Now:         clock.Now,
		After:       clock.After,
		OnEvent: func(e schedule.Event) {
			switch e.Type {
			case schedule.EventSelected:
				running[e.Job] = true
				providerOf[e.Job] = e.Provider
				if closed[e.Provider] {
					fail("%s started after the scheduler saw provider %s's quota used up", e.Job, e.Provider)
				}
			case schedule.EventBlocked:
				delete(running, e.Job)
				if strings.Contains(e.Reason, "quota used up") {
					closed[e.Provider] = true
				}
			case schedule.EventDone:
				delete(running, e.Job)
			case schedule.EventGated:
				delete(running, e.Job)
				gatedUntil[e.Provider] = e.Until
			case schedule.EventDeferred:
				switch {
				case strings.HasPrefix(e.Reason, "waiting for a slot of provider "):
					p := providerOf[e.Job]
					if e.Provider != "" {
						p = e.Provider
					}
					want := fmt.Sprintf("waiting for a slot of provider %s: all %d of its slots are running", p, rg.limits[p])
					if e.Reason != want || runningOf(p) < rg.limits[p] {
						fail("%s deferred %q with %d of provider %s's jobs running (max_parallel %d)", e.Job, e.Reason, runningOf(p), p, rg.limits[p])
					}
				case strings.HasPrefix(e.Reason, "all ") && strings.HasSuffix(e.Reason, " slots are running"):
					if maxPar == 0 || len(running) < maxPar {
						fail("%s deferred for full slots with %d of %d running", e.Job, len(running), maxPar)
					}
				case e.Conflict != "":
					if !running[e.Conflict] || !rg.overlap(e.Job, e.Conflict) {
						fail("%s deferred behind %s, which is not running with an overlapping write set (%s)", e.Job, e.Conflict, e.Reason)
					}
				default:
					fail("%s deferred for no named reason: %q", e.Job, e.Reason)
				}
			}
		},
	}
	rs, err := s.Run(context.Background(), rg.g)
	mu.Lock()
	close(stop)
	cond.Broadcast()
	mu.Unlock()
	<-driverDone
	if err != nil {
		t.Fatal(err)
	}

	// Every job's end is the right one.
	byID := map[string]schedule.Result{}
	for _, r := range rs {
		byID[r.ID] = r
	}
	for _, j := range rg.g.Jobs {
		r := byID[j.ID]
		depsOK := true
		for _, d := range j.Deps {
			if byID[d].Status != schedule.StatusComplete {
				depsOK = false
			}
		}
		switch {
		case !depsOK:
			if r.Status != schedule.StatusWaiting || len(r.WaitingOn) == 0 {
				fail("%s: %v; want waiting, its dependencies did not complete", j.ID, r)
			}
			for _, w := range r.WaitingOn {
				if byID[w].Status == schedule.StatusComplete || !slices.Contains(j.Deps, w) {
					fail("%s waits on %s, which is not an incomplete dependency", j.ID, w)
				}
			}
		case r.Status == schedule.StatusBlocked && strings.Contains(r.BlockedReason, "quota used up"):
			// Its own quota failure, or its provider's gate closed first.
		case rg.outcomes[j.ID] == succeeds, rg.outcomes[j.ID] == rateLimitedOnce:
			if r.Status != schedule.StatusComplete {
				fail("%s: %v; want complete", j.ID, r)
			}
		case rg.outcomes[j.ID] == fails:
			if r.Status != schedule.StatusFailed {
				fail("%s: %v; want failed", j.ID, r)
			}
		case rg.outcomes[j.ID] == blocks:
			if r.Status != schedule.StatusBlocked || r.BlockedReason != "budget exhausted: "+j.ID {
				fail("%s: %v; want blocked with its budget's reason", j.ID, r)
			}
		default:
			fail("%s: %v; want blocked by its provider's quota", j.ID, r)
		}
	}
	pmu.Lock()
	defer pmu.Unlock()
	if len(problems) > 0 {
		t.Errorf("%d problem(s):\n%s", len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
}
