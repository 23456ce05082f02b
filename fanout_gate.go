package pilot

import (
	"time"

	"github.com/pilotworkers/pilot/internal/gate"
)

// A Fanout's provider gates are the scheduler's (package gate): a
// provider's MaxParallel, a rate limit's known reset that holds its queued
// jobs back, and a used-up quota that closes it for the rest of the fanout.

// gated is job with every attempt's verdict told to gates as it comes: a
// quota used up closes the provider while a retry layer above the attempt
// is still deciding what to do.
func gated(job Job, gates *gate.Set) Job {
	orig := job.Task.Observer
	provider := job.Task.Provider
	label := job.label()
	job.Task.Observer = func(e Event) {
		if e.Verdict != nil {
			f := gateFailure(*e.Verdict)
			f.Job = label
			gates.Learn(provider, f, time.Now())
		}
		if orig != nil {
			orig(e)
		}
	}
	return job
}

// gateFailure is what verdict v says of its provider's gate.
func gateFailure(v Verdict) gate.Failure {
	return gate.Failure{
		RateLimit:  v.FailureClass == FailProviderRateLimit,
		Quota:      v.FailureClass == FailProviderQuota,
		RetryAfter: time.Duration(v.RetryAfterMS) * time.Millisecond,
		Text:       v.EvidenceExcerpt + "\n" + v.StderrTail,
		Job:        v.Job,
		Evidence:   v.EvidenceExcerpt,
	}
}

// blocked is the result of a job that never started because its
// provider's gate closed: why, the first failure's evidence.
func blocked(job Job, why string) JobResult {
	r := synthesized(job, nil, "", false)
	r.FailureClass = FailProviderQuota
	r.EvidenceSource, r.EvidenceExcerpt = "pilot", why
	r.StderrTail = "pilot: " + why
	r.Blocked = why
	return r
}
