// Package event names the types of pilot's events (pilot.Event.Type, and
// the "type" of the started and verdict lines): their strings are part of
// the events.log and CLI contracts. It holds constants only, so any layer
// may use it.
package event

// The event types.
const (
	Started           = "worker_runner.started"
	Verdict           = "worker_runner.verdict"
	Phase             = "worker_runner.phase"
	StallInspection   = "worker_runner.stall_inspection"
	IdleDeferred      = "worker_runner.idle_deferred"
	Terminate         = "worker_runner.terminate"
	Leftovers         = "worker_runner.leftovers"
	Memory            = "worker_runner.memory"
	Dropped           = "worker_runner.events_dropped"
	FanoutWarning     = "fanout.warning"
	FanoutJobStarting = "fanout.job_starting"
	FanoutJobWaiting  = "fanout.job_waiting"
)
