// Package temporal runs pilot's jobs across many machines on Temporal, with
// fenced ownership so that at most one generation's agent of a job runs at
// a time and its work is published at most once.
//
// # The activity
//
// [Activities.RunJob] runs one [Job] through a pilot.TaskDispatcher on the
// worker where it lands, in a git worktree of the job's generation on that
// host. Ownership of a job is a fence: the ref FenceRefPrefix+name in the
// job's repository, pointing to an [Owner] record (generation, host, pid
// and its start time, boot id, the pilot run, its lease, the job's base,
// and once done the verdict). Every change to it is a compare-and-swap of
// the ref. An attempt first reads the fence:
//
//   - a generation done with a success (or a failure pilot's retry policy
//     does not retry) is the job's verdict: nothing is launched;
//   - a running generation holds the job while it renews its lease: the
//     attempt waits for its verdict (attached) instead of starting a second
//     worker. On the owner's host a run whose processes are all gone is
//     taken over at once; from another host, only once no renewal has come
//     for the lease and a quarter more, on the taker's own clock;
//   - otherwise the attempt commits generation N+1 to the fence, and only
//     then launches.
//
// The running generation renews its lease every heartbeat interval (the
// lease is four); one that cannot renew for two intervals, or finds a
// newer generation in its fence, ends its worker's tree, well before a
// taker elsewhere may launch. It can publish nothing once the fence moved:
// a successful verdict's work (the commits on the generation's work branch,
// from a clean tree on the job's base) becomes the job's branch,
// BranchPrefix+name, in the same ref transaction that closes the fence, and
// that branch is created once. Heartbeats come from a goroutine of their
// own and carry [Progress] (phase, last activity, pilot's latest stall
// inspection) from the dispatch's events, as long as the worker lives: an
// inspection of a silent worker stops nothing (a slow model may yet answer,
// and a workflow's cancel reaches the activity only in a heartbeat's
// reply); pilot's stall policy ending the worker ends the run, and so the
// heartbeats. Failed verdicts are errors whose type is the failure class,
// non-retryable where pilot's retry policy never retries (provider-auth,
// provider-quota, spawn-failed, cancelled); a retried session-stall or
// context-limit resumes the failed generation's session.
//
// The repository is a path every worker reaches, or a git URL: then each
// worker works in a clone of its own ([Activities.CacheDir]) and every
// fence change is one atomic push whose expected old values the server
// checks (--force-with-lease per ref), the compare-and-swap a local
// update-ref gives; a server without atomic pushes is refused.
//
// # The workflow
//
// [RunJobs] runs a group of jobs, a plain fanout or a dependency graph, as
// RunJob activities with bounded parallelism, each on the task queue of its
// capability, and returns one [Result] per job in job order. Provider gates
// live in the workflow, so they hold across every machine: a rate-limited
// provider's jobs wait out its retry-after before any more of them start.
// Send it [Input.WithDefaults]; what is still zero it resolves once and
// records in the history.
//
// # What it does not do
//
// RunJobs keeps jobs whose Writes overlap apart across every machine, by
// schedule's rule, and starts each job from its dependencies' branches
// merged, but takes its jobs, not a schedule.Graph. A generation whose host dies or is cut off
// before it pushed its work leaves none to the next on a remote: it starts
// from the last pushed work. Effects a worker has
// outside its worktree (a network call, a file elsewhere) are not fenced:
// only the job's branch is published at most once. An owner process stopped
// past its lease (SIGSTOP, a frozen machine) cannot end its agent: on its
// own host the taker ends the run's processes first; from another host the
// old agent works on, in its own worktree, unable to publish, until its
// owner resumes and its lapsed timer ends it.
package temporal
