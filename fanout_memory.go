package pilot

import (
	"os"
	"path/filepath"

	"github.com/pilotworkers/pilot/internal/membudget"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/size"
)

// defaultExpectedRSS, 512 MiB, is the peak a memory budget expects of a job's tree
// when neither its provider's run history nor a memory limit says more: a
// little over what the agent CLIs but opencode were measured to peak at
// (see the README).
const defaultExpectedRSS = 512 * size.MiB

// historyRuns is how many of a provider's latest runs LimitsOf reads.
const historyRuns = 10

// Limits are what a fleet (a Fanout, the schedule package's Scheduler)
// holds a task's worker to beside the task's own caps.
type Limits struct {
	// MaxParallel bounds how many workers of the task's provider run at
	// once; zero means no bound.
	MaxParallel int
	// ExpectedRSS is the peak a memory budget expects the worker's tree to
	// reach.
	ExpectedRSS size.Bytes
}

// LimitsOf is what d says of t's limits, when d (or a layer beneath it,
// found through Unwrap() TaskDispatcher methods) has a Limits(Task)
// Limits method, as a fake may, or is a [*Dispatcher]. A Dispatcher's
// MaxParallel is t's provider's; its ExpectedRSS the largest
// peak_rss_bytes among the latest 10 finished runs of the provider in
// RunDir, and no more than its memory limit (Task.MemoryLimit, else the
// provider's); without such runs, the limit; without a limit, 512 MiB. It
// reads the run directory's records, the newest first, and starts
// nothing. Without either, no provider is bounded, and t's tree is
// expected to peak at its MemoryLimit, else at 512 MiB.
func LimitsOf(d TaskDispatcher, t Task) Limits {
	if l, ok := capability[interface{ Limits(Task) Limits }](d); ok {
		return l.Limits(t)
	}
	if pd, ok := capability[*Dispatcher](d); ok {
		return pd.limits(t)
	}
	if t.MemoryLimit > 0 {
		return Limits{ExpectedRSS: t.MemoryLimit}
	}
	return Limits{ExpectedRSS: defaultExpectedRSS}
}

// limits is LimitsOf for d.
func (d *Dispatcher) limits(t Task) Limits {
	p, _ := d.Providers.Lookup(t.Provider)
	p.Name = t.Provider
	return Limits{MaxParallel: p.MaxParallel, ExpectedRSS: d.expectedRSS(t, p)}
}

func (d *Dispatcher) expectedRSS(t Task, p Provider) size.Bytes {
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
	return defaultExpectedRSS
}

// observedPeak is the largest peak of the latest historyRuns finished runs
// of provider in runDir that have one, or 0.
func observedPeak(runDir, provider string) size.Bytes {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return 0
	}
	// A run id is "<UTC time>-<provider>-<8 hex digits>", the time 23
	// characters long: the provider is found without opening the record.
	const timeLen, randLen = 23, 8
	safe := text.SafeName(provider, '_')
	var peak size.Bytes
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
		peak = max(peak, size.Bytes(rec.PeakRSSBytes))
	}
	return peak
}

// memoryFollowedKey marks the context of a Fanout job whose tree's
// memory its budget follows: the dispatch samples it at every heartbeat.
type memoryFollowedKey struct{}

// fanoutMemory is a Fanout's memory budget; nil for none.
type fanoutMemory struct {
	f      *Fanout
	budget *membudget.Budget
	expect map[string]size.Bytes // by provider and limit, as expected once per Run
}

func (f *Fanout) memory() *fanoutMemory {
	if f.MemoryBudget <= 0 {
		return nil
	}
	return &fanoutMemory{f: f, budget: membudget.New(int64(f.MemoryBudget)), expect: map[string]size.Bytes{}}
}

// tryAcquire returns job's hold on the budget (nil without one), or nil
// and why it waits for memory.
func (m *fanoutMemory) tryAcquire(job Job) (*membudget.Hold, string) {
	if m == nil {
		return nil, ""
	}
	key := job.Task.Provider + "\x00" + job.Task.MemoryLimit.String()
	want, ok := m.expect[key]
	if !ok {
		want = LimitsOf(m.f.Dispatcher, job.Task).ExpectedRSS
		m.expect[key] = want
	}
	h, u := m.budget.TryAcquire(int64(want))
	if h == nil {
		return nil, u.Waiting(int64(want))
	}
	return h, ""
}

// changed is closed when room may have been made (nil without a budget).
func (m *fanoutMemory) changed() <-chan struct{} {
	if m == nil {
		return nil
	}
	return m.budget.Changed()
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
