package e2e_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
)

// TestGeminiRetryBackoffIsNoStall runs gemini-cli against HTTP 500 on every
// request under a model-stall threshold (3 s) shorter than its retry
// backoff (5 s, ±30%). gemini's stderr notice for that retry ("Attempt 1
// failed with status 500. Retrying with backoff...") prints no delay;
// pilot must still read it as a retry in progress, not end the worker as
// a stalled session, and report the server error gemini ends with.
func TestGeminiRetryBackoffIsNoStall(t *testing.T) {
	t.Parallel()
	s := scenario{name: "server-error-model-stall",
		model: "HTTP 500 on every request; a model-stall threshold shorter than gemini's backoff"}
	runScenario(t, s, cliNamed(t, "gemini"), expect{
		verdict: pilot.Failed, class: pilot.FailProviderServerError, source: "gemini:stdout", phase: pilot.PhaseErrored,
		why: "gemini waits out its backoff in silence: a retry, not a stall"}, setup{})
}
