package pilot

import "time"

// What the external tests reach of pilot's unexported parts: the defaults,
// the stall clock and actions, the failure sources, and the fallback
// judgement, so that they are tested as they were when they were exported.

const (
	DefaultIdleTimeout        = defaultIdleTimeout
	DefaultStallStart         = defaultStallStart
	DefaultStallModelResponse = defaultStallModelResponse
	DefaultStallTool          = defaultStallTool
	DefaultRetryLoop          = defaultRetryLoop
	StallTailBytes            = stallTailBytes
	ActivityStreaming         = activityStreaming

	StallNone      = stallNone
	StallInspect   = stallInspect
	StallTerminate = stallTerminate

	SourcePilotPolicy        = sourcePilotPolicy
	SourceProcessTermination = sourceProcessTermination
	SourceProviderDiagnostic = sourceProviderDiagnostic
	SourceTerminalDiagnostic = sourceTerminalDiagnostic
	SourceWorkerReport       = sourceWorkerReport
	SourceExitCode           = sourceExitCode
	SourceExitStatus         = sourceExitStatus
	SourceSpawn              = sourceSpawn
)

type (
	StallClock      = stallClock
	StallAction     = stallAction
	ExitCodeWatcher = exitCodeWatcher
)

var (
	DefaultEnvAllow    = defaultEnvAllow
	SignalFromExitCode = signalFromExitCode
	NewStallClock      = newStallClock
	NewStallInspection = newStallInspection
	CurrentProvenance  = currentProvenance
	WorktreeNames      = worktreeNames
)

// StallCheck is p's check of a silence.
func StallCheck(p StallPolicy, phase SessionPhase, silence time.Duration, inspected bool) StallAction {
	return p.check(phase, silence, inspected)
}

// SuppressIdleTimeout is p.suppressIdleTimeout.
func SuppressIdleTimeout(p StallPolicy, phase SessionPhase, silence time.Duration) bool {
	return p.suppressIdleTimeout(phase, silence)
}

// RetryLoopLimit is p.retryLoopLimit.
func RetryLoopLimit(p StallPolicy) (time.Duration, bool) { return p.retryLoopLimit() }

// InspectAfter is p.inspectAfter.
func InspectAfter(p StallPolicy, phase SessionPhase) (time.Duration, bool) {
	return p.inspectAfter(phase)
}

// Label is j.label.
func Label(j Job) string { return j.label() }

// ModeValid is m.valid.
func ModeValid(m Mode) bool { return m.valid() }

// SetLandlockABI makes the sandbox see a kernel offering abi (with err
// when it offers none) until the test ends.
func SetLandlockABI(t interface{ Cleanup(func()) }, abi int, err error) {
	old := landlockABI
	landlockABI = func() (int, error) { return abi, err }
	t.Cleanup(func() { landlockABI = old })
}

// StallTimeout is p's silence after which a worker in phase is ended, and
// whether silence alone ends it there.
func StallTimeout(p StallPolicy, phase SessionPhase) (time.Duration, bool) {
	return p.stallTimeout(phase)
}
