package report_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/report"
)

func TestClassifyFailureReportLines(t *testing.T) {
	tests := []struct {
		name string
		why  string
		r    report.Failure
		want []string
	}{
		{
			// ReviewControlTest.test_dispatcher_source_provenance_detects_hot_edit
			name: "seed hot edit provenance",
			why:  "a rebuilt executable no longer matches the loaded one",
			r: report.Failure{
				Class:                   pilot.FailGeneric,
				DispatcherSourceSHA256:  strings.Repeat("a", 64),
				DispatcherCurrentSHA256: strings.Repeat("f", 64),
			},
			want: []string{
				"failure_class=generic-error",
				"provider_transport_failure_confirmed=false",
				"dispatcher_source_sha256=" + strings.Repeat("a", 64),
				"dispatcher_source_current_sha256=" + strings.Repeat("f", 64),
				"dispatcher_source_matches_loaded=false",
			},
		},
		{
			name: "recognised API error is not provider evidence",
			why:  "generic-error evidence is reported under failure_evidence",
			r:    report.FromClassification(pilot.ClassifyFailure("API Error: 400 Bad Request: nope"), "codex:stdout"),
			want: []string{
				"failure_class=generic-error",
				"failure_source=terminal-diagnostic",
				"provider_transport_failure_confirmed=false",
				"failure_evidence_source=codex:stdout",
				"failure_evidence=API Error: 400 Bad Request: nope",
			},
		},
		{
			name: "quota with retry after",
			why:  "quota is a provider class without a transport failure; the delay is reported",
			r:    report.FromClassification(pilot.ClassifyFailure("You've hit your usage limit. Try again in 90s."), "codex:stdout"),
			want: []string{
				"failure_class=provider-quota",
				"failure_source=provider-terminal-diagnostic",
				"provider_transport_failure_confirmed=false",
				"failure_evidence_source=codex:stdout",
				"provider_evidence=You've hit your usage limit. Try again in 90s.",
				"retry_after=1m30s",
			},
		},
		{
			name: "no evidence",
			why:  "a classification without evidence reports no source",
			r:    report.FromClassification(pilot.ClassifyFailure("dial tcp 127.0.0.1:9999: connect: connection refused"), "pi:stderr"),
			want: []string{
				"failure_class=generic-error",
				"provider_transport_failure_confirmed=false",
			},
		},
		{
			name: "newlines in values are escaped",
			why:  "every key stays on one line",
			r:    report.Failure{Class: pilot.FailSpawn, Source: "pilot", Evidence: "exec: \"x\":\nnot found\r"},
			want: []string{
				"failure_class=spawn-failed",
				"failure_source=pilot",
				"provider_transport_failure_confirmed=false",
				`failure_evidence=exec: "x":\nnot found\r`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.r.Lines()); diff != "" {
				t.Errorf("Lines() mismatch (-want +got):\n%s\nwhy: %s", diff, tc.why)
			}
		})
	}
}

func ExampleFailure_Lines() {
	c := pilot.ClassifyFailure("API Error: Connection error.")
	for _, l := range report.FromClassification(c, "pi:stderr").Lines() {
		fmt.Println(l)
	}
	// Output:
	// failure_class=provider-connection
	// failure_source=provider-terminal-diagnostic
	// provider_transport_failure_confirmed=true
	// failure_evidence_source=pi:stderr
	// provider_evidence=API Error: Connection error.
}
