package pilot_test

import (
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// A failed model call's error (a CLI's error event, the reason in its retry
// notice) is classified with that provider context, and its status when
// given apart, while a retry notice read as an ordinary line proves
// nothing (the worker is still trying). The CLIs' own forms are agents'
// (TestRetryReasons).
func TestClassifyProviderError(t *testing.T) {
	for _, tc := range []struct {
		text   string
		status int
		want   pilot.FailureClass
	}{
		{"Connection failed: error sending request", 0, pilot.FailProviderConnection},
		{"stream disconnected before completion: error decoding response body", 0, pilot.FailProviderStreamDisconnect},
		{"stream disconnected before completion: error sending request for url", 0, pilot.FailProviderConnection},
		{"unexpected status 500 Internal Server Error: boom", 0, pilot.FailProviderServerError},
		{"500 upstream boom", 0, pilot.FailProviderServerError},
		{"server_error", 500, pilot.FailProviderServerError},
		{"rate_limit", 429, pilot.FailProviderRateLimit},
		{"Unauthorized", 401, pilot.FailProviderAuth},
		{"Request rejected (429)", 400, pilot.FailGeneric},
		{"Connection error.", 0, pilot.FailProviderConnection},
		{"429 Rate limit reached for requests per min (RPM)", 0, pilot.FailProviderRateLimit},
		{"retrying in 5s: connection refused", 0, pilot.FailProviderConnection},
	} {
		c := pilot.ClassifyProviderError(tc.text, tc.status)
		if c.Class != tc.want || c.Evidence != tc.text {
			t.Errorf("ClassifyProviderError(%q, %d) = %s from %q, want %s from the text", tc.text, tc.status, c.Class, c.Evidence, tc.want)
		}
	}
	for _, text := range []string{"unknown", "", "boom"} {
		if c := pilot.ClassifyProviderError(text, 0); c.Class != pilot.FailGeneric || c.Evidence != "" {
			t.Errorf("ClassifyProviderError(%q, 0) = %+v, want generic without evidence", text, c)
		}
	}
	for _, notice := range []string{
		"retrying in 5s (connection refused by the provider)",
		"Attempt 1 failed with status 429. Retrying with backoff...",
	} {
		if c := pilot.ClassifyFailure(notice); c.Evidence != "" {
			t.Errorf("ClassifyFailure(%q) = %q from %q: a retry notice is not a failure", notice, c.Class, c.Evidence)
		}
	}
}

func TestStallPolicyRetryLoopLimit(t *testing.T) {
	for _, tc := range []struct {
		set    time.Duration
		want   time.Duration
		wantOn bool
	}{
		{0, pilot.DefaultRetryLoop, true},
		{7 * time.Second, 7 * time.Second, true},
		{-1, 0, false},
	} {
		d, on := pilot.RetryLoopLimit(pilot.StallPolicy{RetryLoop: tc.set})
		if d != tc.want || on != tc.wantOn {
			t.Errorf("RetryLoop %v: RetryLoopLimit() = %v, %v; want %v, %v", tc.set, d, on, tc.want, tc.wantOn)
		}
	}
}
