package schedule

import "time"

// Claim takes job id for this process, as a Scheduler does before it
// starts a job, for a caller that runs its jobs itself (the task loop):
// claimed is false when another live process owns the job, and holder
// then says who and how that is known. A record whose owner is gone is
// taken over. A job recorded complete is claimed like any other: the
// caller decides what it runs again. A dry-run store claims without
// writing.
func (s *Store) Claim(id string, now time.Time) (claimed bool, holder string, err error) {
	c, err := s.claim(id, "", "", true, Writes{}, now)
	return c.claimed, c.holder, err
}

// Started records the worker of job id, which this process has claimed:
// while agentPid runs, or streamLog moves within the store's Stall window,
// the owner counts as live to others even when its own pid is gone.
func (s *Store) Started(id string, agentPid int, streamLog string, now time.Time) error {
	return s.started(id, "", agentPid, streamLog, now)
}

// Release ends this process's claim of job id: complete records the job
// done (a Scheduler sharing the store will not run it again), otherwise
// the record is removed and another process may claim the job. A job this
// process does not own is left as it is. A job released complete this
// way carries no definition: a Scheduler takes it as complete whatever its
// definition now is.
func (s *Store) Release(id string, complete bool, now time.Time) error {
	return s.release(id, "", complete, "", "", now)
}
