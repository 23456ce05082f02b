package schedule

import (
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/membudget"
	"github.com/pilotworkers/pilot/size"
)

// The scheduler's memory budget (Scheduler.MemoryBudget): the rules are
// the membudget package's, which Fanout shares.

// memoryState is a run's budget; nil for none.
type memoryState struct {
	budget  *membudget.Budget
	expect  map[string]size.Bytes // by provider and limit
	changed <-chan struct{}       // the budget's, as of the last pass
	waiting bool                  // a job waits for memory
}

func (s *Scheduler) memory() *memoryState {
	if s.MemoryBudget <= 0 {
		return nil
	}
	return &memoryState{budget: membudget.New(int64(s.MemoryBudget)), expect: map[string]size.Bytes{}}
}

// pass begins a pass: no job waits for memory yet, and a change from now
// on wakes the run.
func (m *memoryState) pass() {
	if m != nil {
		m.changed, m.waiting = m.budget.Changed(), false
	}
}

// wake is what the run waits on for room, while a job waits for memory.
func (m *memoryState) wake() <-chan struct{} {
	if m == nil || !m.waiting {
		return nil
	}
	return m.changed
}

// admit returns jb's hold on the budget, or nil and why it waits (nil and
// "" without a budget).
func (r *runState) admit(jb *job) (*membudget.Hold, string) {
	m := r.mem
	if m == nil {
		return nil, ""
	}
	t := jb.Task
	key := t.Provider + "\x00" + t.MemoryLimit.String()
	want, ok := m.expect[key]
	if !ok {
		want = pilot.LimitsOf(r.s.Dispatcher, t).ExpectedRSS
		m.expect[key] = want
	}
	h, u := m.budget.TryAcquire(int64(want))
	if h != nil {
		return h, ""
	}
	m.waiting = true
	return nil, u.Waiting(int64(want))
}

// forMemory is job.deferred while a job waits for memory: the reason's
// figures change as the running trees do, and it is said once.
const forMemory = "\x00memory"

// deferForMemory says, once per wait, that jb, and each pending job that
// became ready since the last pass, waits for memory: why.
func (r *runState) deferForMemory(jb *job, why string) {
	say := func(j *job) {
		if j.deferred != forMemory {
			j.deferred = forMemory
			r.emit(Event{Type: EventDeferred, Job: j.ID, Reason: why, Provider: j.Task.Provider, ForMemory: true})
		}
	}
	say(jb)
	for _, k := range r.fresh {
		if fj := r.jobs[k]; fj != jb && fj.state == stPending && fj.deferred == "" {
			say(fj)
		}
	}
}

// followMemory counts e, an event of the job holding h, against h.
func followMemory(h *membudget.Hold, e pilot.Event) {
	switch {
	case e.Memory != nil:
		h.Observe(e.Memory.RSSBytes)
	case e.Verdict != nil:
		h.Observe(0) // the attempt's tree is gone
	}
}
