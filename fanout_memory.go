package pilot

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/membudget"
	"github.com/pilotworkers/pilot/internal/text"
)

// DefaultExpectedRSS is the peak a memory budget expects of a job's tree
// when neither its provider's run history nor a memory limit says more: a
// little over what the agent CLIs but opencode were measured to peak at
// (see the README).
const DefaultExpectedRSS = 512 * MiB

// historyRuns is how many of a provider's latest runs ExpectedRSS reads.
const historyRuns = 10

// ExpectedRSS is the peak a memory budget expects the tree of t's worker
// to reach: what d expects, when d (or a layer beneath it, found through
// Unwrap() TaskDispatcher methods) has an ExpectedRSS(Task) Bytes method,
// as [*Dispatcher] has; else t's MemoryLimit; else [DefaultExpectedRSS].
func ExpectedRSS(d TaskDispatcher, t Task) Bytes {
	if e, ok := capability[interface{ ExpectedRSS(Task) Bytes }](d); ok {
		return e.ExpectedRSS(t)
	}
	if t.MemoryLimit > 0 {
		return t.MemoryLimit
	}
	return DefaultExpectedRSS
}

// ExpectedRSS is the peak the tree of t's worker is expected to reach: the
// largest peak_rss_bytes among the latest 10 finished runs of its provider
// in RunDir, and no more than its memory limit (Task.MemoryLimit, else the
// provider's); without such runs, the limit; without a limit,
// [DefaultExpectedRSS]. It reads the run directory's records, the newest
// first, and starts nothing.
func (d *Dispatcher) ExpectedRSS(t Task) Bytes {
	p, _ := d.Providers.Lookup(t.Provider)
	p.Name = t.Provider
	limit := memoryLimitOf(t, p)
	runDir := d.RunDir
	if runDir == "" {
		runDir = DefaultRunDir()
	}
	if peak := observedPeak(runDir, p.Name); peak > 0 {
		if limit > 0 {
			return min(peak, limit)
		}
		return peak
	}
	if limit > 0 {
		return limit
	}
	return DefaultExpectedRSS
}

// observedPeak is the largest peak of the latest historyRuns finished runs
// of provider in runDir that have one, or 0.
func observedPeak(runDir, provider string) Bytes {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return 0
	}
	// A run id is "<UTC time>-<provider>-<8 hex digits>", the time 23
	// characters long: the provider is found without opening the record.
	const timeLen, randLen = 23, 8
	safe := text.SafeName(provider, '_')
	var peak Bytes
	found, read := 0, 0
	for i := len(ents) - 1; i >= 0 && found < historyRuns && read < 5*historyRuns; i-- {
		name := ents[i].Name()
		if len(name) != timeLen+1+len(safe)+1+randLen || name[timeLen+1:len(name)-randLen-1] != safe {
			continue
		}
		read++
		rec, err := ReadRecord(filepath.Join(runDir, name, "record.json"))
		if err != nil || rec.Status == statusRunning || rec.PeakRSSBytes <= 0 || rec.Provider != provider {
			continue
		}
		found++
		peak = max(peak, Bytes(rec.PeakRSSBytes))
	}
	return peak
}

// fanoutMemory is a Fanout's memory budget; nil for none.
type fanoutMemory struct {
	f      *Fanout
	budget *membudget.Budget
	expect map[string]Bytes // by provider and limit, as expected once per Run
}

func (f *Fanout) memory() *fanoutMemory {
	if f.MemoryBudget <= 0 {
		return nil
	}
	return &fanoutMemory{f: f, budget: membudget.New(int64(f.MemoryBudget)), expect: map[string]Bytes{}}
}

// acquire waits until job i fits the budget and returns its hold (nil
// without a budget); a job that must wait says so first, in a
// FanoutJobWaiting event.
func (m *fanoutMemory) acquire(ctx context.Context, i int, job Job) (*membudget.Hold, error) {
	if m == nil {
		return nil, nil
	}
	key := job.Task.Provider + "\x00" + job.Task.MemoryLimit.String()
	want, ok := m.expect[key]
	if !ok {
		want = ExpectedRSS(m.f.Dispatcher, job.Task)
		m.expect[key] = want
	}
	return m.budget.Acquire(ctx, int64(want), func(u membudget.Usage) {
		if m.f.OnEvent != nil {
			m.f.OnEvent(i, Event{Type: event.FanoutJobWaiting, Time: time.Now().UTC(), Message: u.Waiting(int64(want))})
		}
	})
}

// follow is job with its task's memory events counted against hold: what
// its tree holds now, and nothing once an attempt's verdict says the tree
// is gone.
func (m *fanoutMemory) follow(job Job, hold *membudget.Hold) Job {
	if m == nil {
		return job
	}
	orig := job.Task.Observer
	job.Task.Observer = func(e Event) {
		switch {
		case e.Memory != nil:
			hold.Observe(e.Memory.RSSBytes)
		case e.Verdict != nil:
			hold.Observe(0)
		}
		if orig != nil {
			orig(e)
		}
	}
	return job
}
