package pilot

import (
	"fmt"
	"syscall"
)

// seenExit is the exit a watcher judges: e, except that a worker pilot
// ended after it had already finished (finishedFirst) is judged as if it
// had exited 0 by itself: how it ended was pilot's doing, not the worker's.
func seenExit(e Exit, finishedFirst bool) Exit {
	if e.Terminated && finishedFirst {
		e.Terminated, e.Reason, e.Signal, e.Code = false, "", 0, 0
	}
	return e
}

// verdictOf is pilot's judgement of an attempt: its Result and the
// verdict's Failure part, from how it ended (e), what its watcher said
// (said: the watcher's Finish of seenExit(e, finishedFirst)), the worker's
// own retry loop when it ended, and whether it had finished when pilot
// began to end it. It is pure; the caller redacts the evidence excerpt.
//
// A watcher that gave no judgement, or no class, leaves it to [JudgeExit],
// keeping what it said about the session. A worker pilot ended is judged by
// why pilot ended it, whatever it printed on the way out (or, when it was
// retrying a failing model call then, by that failure, unless pilot ended
// it for a cancel or its memory), unless it had already finished when
// pilot began to end it (a CLI that hangs after its final result, as
// Claude Code's -p mode is known to) and its own stream says the task
// succeeded. Then the work stands; the Failure's termination fields still
// say pilot ended it.
func verdictOf(e Exit, said Result, loop RetryLoop, retrying, finishedFirst bool) (Result, Failure) {
	res := said
	switch {
	case res.Outcome == "", res.Outcome == Failed && res.Class == "":
		fb := JudgeExit(seenExit(e, finishedFirst))
		fb.SessionID, fb.Resume, fb.Usage, fb.SessionGone = res.SessionID, res.Resume, res.Usage, res.SessionGone
		res = fb
	case res.Outcome == Failed && res.DecidedBy == "":
		res.DecidedBy = sourceWorkerReport
	}
	var out Result
	switch {
	case !e.Terminated, finishedFirst && res.Outcome.Success(), e.Reason == reasonFinished:
		return res, failureOf(e, res)
	case retrying && e.Reason != FailCancelled && e.Reason != FailBudget && e.Reason != FailMemoryLimit:
		// Pilot ended a worker that was retrying a failing model call
		// (for too long, or past a deadline): that failure is why the
		// work did not get done. (Not when the memory limit ended it:
		// the memory is why.)
		out = diagnosticResult(loop.Diagnostic)
	default:
		out = failedBy(e.Reason, sourcePilotPolicy)
	}
	// What the worker said about its session holds whatever the verdict.
	out.SessionID, out.Resume, out.Usage, out.SessionGone = res.SessionID, res.Resume, res.Usage, res.SessionGone
	return out, failureOf(e, out)
}

// reasonFinished is why pilot ends a worker that printed its final result
// and did not exit within the Dispatcher's FinishGrace (the verdict's
// termination_reason): its verdict is its stream's.
const reasonFinished FailureClass = "finished-not-exited"

// failureOf is the Failure part of the verdict: the judgement's class and
// evidence (not redacted), and how the process ended.
func failureOf(e Exit, res Result) Failure {
	var f Failure
	if res.Outcome == Failed {
		f.FailureClass = res.Class
		f.FailureSource = res.DecidedBy
		f.TransportConfirmed = res.TransportConfirmed
		f.RetryAfterMS = res.RetryAfter.Milliseconds()
		if res.Evidence != "" {
			f.EvidenceSource = res.Classification.Source
			f.EvidenceExcerpt, f.EvidenceNote = res.Evidence, res.Note
		}
	}
	if !e.Started {
		return f
	}
	sig, inferred := syscall.Signal(e.Signal), false
	if sig == 0 {
		sig, inferred = signalFromExitCode(e.Code)
	}
	if sig != 0 {
		f.TerminationSignal = signalName(sig)
		f.TerminationSignalInferred = inferred
	}
	switch {
	case e.Terminated:
		f.TerminationInitiator = "pilot"
		f.TerminationReason = e.Reason
		if sig == 0 {
			// The worker handled pilot's SIGTERM and exited on its own.
			f.TerminationSignal = "SIGTERM"
		}
	case sig != 0:
		f.TerminationInitiator = "unknown"
	}
	if f.FailureClass == FailProcessTerminated || e.Terminated {
		// The line only explains; the signal decided.
		f.TransportConfirmed = false
	}
	return f
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}
