package pilot_test

import (
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// A retry notice's reason is a failed model call: it is classified with
// that provider context, while the notice itself, read as an ordinary
// diagnostic line, proves nothing (the worker is still trying).
func TestClassifyRetried(t *testing.T) {
	for _, tc := range []struct {
		text string
		want pilot.FailureClass
	}{
		// codex 0.171.0 on a refused connection (e2e run, 2026-11-30).
		{"Reconnecting... waiting for network (Connection failed: error sending request)", pilot.FailProviderConnection},
		{"Reconnecting... 2/5 (stream disconnected before completion: error decoding response body)", pilot.FailProviderStreamDisconnect},
		{"Reconnecting... 1/5 (unexpected status 500 Internal Server Error: boom)", pilot.FailProviderServerError},
		// claudeRetryReason's forms of api_retry.
		{"status 500: server_error", pilot.FailProviderServerError},
		{"status 429: rate_limit", pilot.FailProviderRateLimit},
		{"status 401: authentication_failed", pilot.FailProviderAuth},
		{"unknown", pilot.FailGeneric},
		{"", pilot.FailGeneric},
		// pi's auto_retry_start errorMessage.
		{"Connection error.", pilot.FailProviderConnection},
		{"429 Rate limit reached for requests per min (RPM)", pilot.FailProviderRateLimit},
		{"terminated", pilot.FailProviderStreamDisconnect},
	} {
		if got := pilot.ClassifyRetryNotice(tc.text).Class; got != tc.want {
			t.Errorf("ClassifyRetried(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	for _, notice := range []string{
		"Reconnecting... waiting for network (Connection failed: error sending request)",
		"Reconnecting... 2/5 (stream disconnected before completion: error decoding response body)",
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
