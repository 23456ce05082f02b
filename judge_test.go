package pilot_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/report"
)

const providerLine = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"

// Ports test_provider_stderr_requires_and_preserves_exact_evidence,
// test_exit_143_is_process_termination_not_provider_failure and the weak-line
// rule to the Dispatcher: what decides a verdict, and the proof it keeps.
func TestVerdictFailureEvidenceAndTermination(t *testing.T) {
	tests := []struct {
		name    string
		script  []string
		timeout time.Duration
		want    pilot.Failure
		code    *int
	}{
		{
			name:   "provider line on stderr, exit 1",
			script: []string{"err=unrelated warning", "err=" + providerLine, "exit=1"},
			want: pilot.Failure{
				FailureClass:       pilot.FailProviderConnection,
				FailureSource:      pilot.SourceProviderDiagnostic,
				TransportConfirmed: true,
				EvidenceSource:     "command:stderr",
				EvidenceExcerpt:    providerLine,
			},
			code: intp(1),
		},
		{
			name:   "the same line, exit 143: the signal wins",
			script: []string{"err=" + providerLine, "exit=143"},
			want: pilot.Failure{
				FailureClass:              pilot.FailProcessTerminated,
				FailureSource:             pilot.SourceProcessTermination,
				TerminationSignal:         "SIGTERM",
				TerminationSignalInferred: true,
				TerminationInitiator:      "unknown",
			},
			code: intp(143),
		},
		{
			name:   "a weak line is not provider evidence",
			script: []string{"err=dial tcp 127.0.0.1:9999: connect: connection refused", "exit=1"},
			want:   pilot.Failure{FailureClass: pilot.FailGeneric, FailureSource: pilot.SourceExitStatus},
			code:   intp(1),
		},
		{
			name:   "provider words on the command runner's stdout are not diagnostics",
			script: []string{"out=" + providerLine, "exit=1"},
			want:   pilot.Failure{FailureClass: pilot.FailGeneric, FailureSource: pilot.SourceExitStatus},
			code:   intp(1),
		},
		{
			name:    "a timeout pilot enforced, whatever the worker prints",
			script:  []string{"err=" + providerLine, "block"},
			timeout: 300 * time.Millisecond,
			want: pilot.Failure{
				FailureClass:         pilot.FailTimeout,
				FailureSource:        pilot.SourcePilotPolicy,
				TerminationSignal:    "SIGTERM",
				TerminationInitiator: "pilot",
				TerminationReason:    pilot.FailTimeout,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testDispatcher(t, fakeProvider(t, "w", tt.script...))
			tk := task("w")
			tk.Timeout = tt.timeout
			v := dispatch(t, d, tk)
			if diff := cmp.Diff(tt.want, v.Failure); diff != "" {
				t.Errorf("verdict failure (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.code, v.ExitCode); diff != "" {
				t.Errorf("exit code (-want +got):\n%s", diff)
			}
			rec := readRecord(t, v)
			if diff := cmp.Diff(v.Failure, rec.Failure); diff != "" {
				t.Errorf("record failure differs from the verdict's (-verdict +record):\n%s", diff)
			}
		})
	}
}

// The seed's failure_report_lines: a record renders as key=value lines
// naming the class, its proof and the pilot that judged it.
func TestRecordFailureReport(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "w", "err="+providerLine, "exit=1"))
	rec := readRecord(t, dispatch(t, d, task("w")))
	lines := report.FromRecord(rec).Lines()
	for _, want := range []string{
		"failure_class=provider-connection",
		"failure_source=provider-terminal-diagnostic",
		"provider_transport_failure_confirmed=true",
		"failure_evidence_source=command:stderr",
		"provider_evidence=" + providerLine,
		"dispatcher_pid=" + strconv.Itoa(rec.Provenance.Pid),
		"dispatcher_source_sha256=" + rec.SourceSHA256,
		"dispatcher_source_matches_loaded=true",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("report lacks %q:\n%v", want, lines)
		}
	}
}
