// Package temporal runs pilot's jobs across many machines on Temporal, with
// fenced ownership so that no job's work runs twice.
//
// # The activity
//
// [Activities.RunJob] runs one [Job] through a pilot.TaskDispatcher on the
// worker where it lands, in the job's git worktree on that host. Ownership
// of a job is a fence: the ref FenceRefPrefix+name in the job's repository,
// pointing to an [Owner] record (generation, host, pid and its start time,
// the pilot run, and once done the verdict). Every change to it is a
// compare-and-swap of the ref. An attempt first reads the fence:
//
//   - a generation done with a success (or a failure pilot's retry policy
//     does not retry) is the job's verdict: nothing is launched;
//   - a generation running in a live process on this host is attached to:
//     the attempt waits for its verdict instead of starting a second
//     worker;
//   - otherwise the attempt commits generation N+1 to the fence, and only
//     then launches the worker.
//
// A generation whose fence moved on ends its worker at its next heartbeat
// tick, and can publish nothing: a successful verdict's work (the commits
// on the job's work branch) becomes the job's branch, BranchPrefix+name,
// in the same ref transaction that closes the fence, and that branch is
// created once. Heartbeats come from a goroutine of their own and carry
// [Progress] (phase, last activity, pilot's latest stall inspection) from
// the dispatch's events, as long as the worker lives: an inspection of a
// silent worker stops nothing (a slow model may yet answer, and a
// workflow's cancel reaches the activity only in a heartbeat's reply);
// pilot's stall policy ending the worker ends the run, and so the
// heartbeats. Failed verdicts are errors whose type is the failure class,
// non-retryable where pilot's retry policy never retries (provider-auth,
// provider-quota, spawn-failed, cancelled); a retried session-stall or
// context-limit resumes the failed generation's session.
//
// # The workflow
//
// [RunJobs] runs a group of jobs, a plain fanout or a dependency graph, as
// RunJob activities with bounded parallelism, each on the task queue of its
// capability, and returns one [Result] per job in job order. Provider gates
// live in the workflow, so they hold across every machine: a rate-limited
// provider's jobs wait out its retry-after before any more of them start.
//
// # What it does not do
//
// The fence and the job branches live in one git repository that every
// worker reaches by path (one host, or shared storage); attaching to a
// live run works on its own host only, elsewhere a replacement takes the
// fence and the old generation stops at its next tick. Effects a worker has
// outside its worktree (a network call, a file elsewhere) are not fenced:
// only the job's branch is published at most once.
package temporal
