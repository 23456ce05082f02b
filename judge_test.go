package pilot_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/report"
)

const providerLine = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"

// What decides a verdict, and the proof it keeps, for the command runner:
// the rules of TestProviderStderrRequiresAndPreservesExactEvidence and
// TestExit143IsProcessTerminationNotProviderFailure (the seed's, with pi),
// the weak-line rule and pilot's own timeout.
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

// piStderrDispatch dispatches a pi worker (the fake agent, replaying) that
// writes line on stderr and exits with code, and returns its verdict and
// record.
func piStderrDispatch(t *testing.T, line string, code int) (pilot.Verdict, pilot.Record) {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(prefix+".stderr", []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := replayProvider(t, agents.RunnerPi, prefix)
	p.Env[fakeagent.EnvReplayExit] = strconv.Itoa(code)
	v := dispatch(t, testDispatcher(t, p), task(agents.RunnerPi))
	return v, readRecord(t, v)
}

// The seed's test_provider_stderr_requires_and_preserves_exact_evidence: a
// pi worker's provider line on stderr is a provider-connection failure
// whose evidence is that line, exactly; the record names the dispatching
// program and its executable's hash, and the seed's failure_report_lines
// (package report) render all of it.
func TestProviderStderrRequiresAndPreservesExactEvidence(t *testing.T) {
	v, rec := piStderrDispatch(t, providerLine, 1)
	want := pilot.Failure{
		FailureClass:       pilot.FailProviderConnection,
		FailureSource:      pilot.SourceProviderDiagnostic,
		TransportConfirmed: true,
		EvidenceSource:     "pi:stderr",
		EvidenceExcerpt:    providerLine,
	}
	if diff := cmp.Diff(want, v.Failure); diff != "" {
		t.Errorf("verdict failure (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(intp(1), v.ExitCode); diff != "" {
		t.Errorf("exit code (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, rec.Failure); diff != "" {
		t.Errorf("record failure (-want +got):\n%s", diff)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sum := fileSHA256(t, exe)
	p := rec.Provenance
	if p.Pid != os.Getpid() || p.SourcePath != exe || p.SourceSHA256 != sum || p.CurrentSHA256 != sum || !p.SourceMatchesLoaded {
		t.Errorf("record provenance = %+v; want this process, %s, sha256 %s, matching", p, exe, sum)
	}
	lines := report.FromRecord(rec).Lines()
	for _, want := range []string{
		"failure_class=provider-connection",
		"failure_source=provider-terminal-diagnostic",
		"provider_transport_failure_confirmed=true",
		"failure_evidence_source=pi:stderr",
		"provider_evidence=" + providerLine,
		"dispatcher_pid=" + strconv.Itoa(os.Getpid()),
		"dispatcher_source_sha256=" + sum,
		"dispatcher_source_matches_loaded=true",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("report lacks %q:\n%v", want, lines)
		}
	}
}

// The seed's test_exit_143_is_process_termination_not_provider_failure: the
// same pi worker exiting 143 was terminated by SIGTERM from outside pilot,
// and its provider line proves no provider failure.
func TestExit143IsProcessTerminationNotProviderFailure(t *testing.T) {
	v, rec := piStderrDispatch(t, providerLine, 143)
	want := pilot.Failure{
		FailureClass:              pilot.FailProcessTerminated,
		FailureSource:             pilot.SourceProcessTermination,
		TransportConfirmed:        false,
		TerminationSignal:         "SIGTERM",
		TerminationSignalInferred: true,
		TerminationInitiator:      "unknown",
	}
	if diff := cmp.Diff(want, v.Failure); diff != "" {
		t.Errorf("verdict failure (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(intp(143), v.ExitCode); diff != "" {
		t.Errorf("exit code (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, rec.Failure); diff != "" {
		t.Errorf("record failure (-want +got):\n%s", diff)
	}
	if lines := report.FromRecord(rec).Lines(); !slices.Contains(lines, "provider_transport_failure_confirmed=false") {
		t.Errorf("report lacks provider_transport_failure_confirmed=false:\n%v", lines)
	}
}
