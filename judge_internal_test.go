package pilot

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVerdictOf(t *testing.T) {
	const line = "provider_tunnel_error: dial tcp 192.0.2.1:8001: connect: connection refused"
	provider := &Classification{Class: FailProviderConnection, Evidence: line, Source: "command:stderr", TransportConfirmed: true}
	retried := RetryLoop{
		Diagnostic: Classification{Class: FailProviderServerError, Evidence: "Reconnecting... 1/5 (unexpected status 500 Internal Server Error: boom)", Source: "codex:stdout", TransportConfirmed: true},
		Since:      t0,
		Retries:    2,
	}
	session := Result{SessionID: "s1", Resume: "/runs/s1.jsonl", Usage: &Usage{InputTokens: 3}}
	withSession := func(r Result) Result {
		r.SessionID, r.Resume, r.Usage = session.SessionID, session.Resume, session.Usage
		return r
	}
	// pilotEnded is a worker pilot ended for reason, killed by SIGTERM.
	pilotEnded := func(reason FailureClass) Exit {
		return Exit{Started: true, Code: -1, Signal: 15, Terminated: true, Reason: reason, StdoutBytes: 10}
	}
	pilotTerm := func(reason FailureClass) Failure {
		return Failure{TerminationSignal: "SIGTERM", TerminationInitiator: "pilot", TerminationReason: reason}
	}

	tests := []struct {
		name          string
		exit          Exit
		said          Result
		loop          RetryLoop
		retrying      bool
		finishedFirst bool
		want          Result
		wantFailure   Failure
	}{
		{
			name: "exit 0 with output, no judgement from the watcher: completed",
			exit: Exit{Started: true, StdoutBytes: 5},
			want: Result{Outcome: Completed},
		},
		{
			name: "no judgement: judged by the exit, keeping the session",
			exit: Exit{Started: true},
			said: session,
			want: withSession(Result{Outcome: Empty}),
		},
		{
			name: "failed without a class: judged by the exit and its diagnostic",
			exit: Exit{Started: true, Code: 1, Diagnostic: provider},
			said: Result{Outcome: Failed},
			want: diagnosticResult(*provider),
			wantFailure: Failure{
				FailureClass:       FailProviderConnection,
				FailureSource:      sourceProviderDiagnostic,
				TransportConfirmed: true,
				EvidenceSource:     "command:stderr",
				EvidenceExcerpt:    line,
			},
		},
		{
			name:        "a failure the worker's stream reports is a worker report",
			exit:        Exit{Started: true, Code: 1},
			said:        Result{Outcome: Failed, Classification: Classification{Class: FailContextLimit}},
			want:        Result{Outcome: Failed, Classification: Classification{Class: FailContextLimit}, DecidedBy: sourceWorkerReport},
			wantFailure: Failure{FailureClass: FailContextLimit, FailureSource: sourceWorkerReport},
		},
		{
			name: "exit 143 after a provider line: the signal wins, inferred",
			exit: Exit{Started: true, Code: 143, Diagnostic: provider},
			want: Result{Outcome: Failed, Classification: Classification{Class: FailProcessTerminated}, DecidedBy: sourceProcessTermination},
			wantFailure: Failure{
				FailureClass:              FailProcessTerminated,
				FailureSource:             sourceProcessTermination,
				TerminationSignal:         "SIGTERM",
				TerminationSignalInferred: true,
				TerminationInitiator:      "unknown",
			},
		},
		{
			name: "a watcher that blames the provider for a SIGKILL: transport not confirmed",
			exit: Exit{Started: true, Code: -1, Signal: 9},
			said: Result{Outcome: Failed, Classification: Classification{Class: FailProcessTerminated, Evidence: line, Source: "pi:stderr", TransportConfirmed: true}, DecidedBy: sourceProcessTermination},
			want: Result{Outcome: Failed, Classification: Classification{Class: FailProcessTerminated, Evidence: line, Source: "pi:stderr", TransportConfirmed: true}, DecidedBy: sourceProcessTermination},
			wantFailure: Failure{
				FailureClass:         FailProcessTerminated,
				FailureSource:        sourceProcessTermination,
				EvidenceSource:       "pi:stderr",
				EvidenceExcerpt:      line,
				TerminationSignal:    "SIGKILL",
				TerminationInitiator: "unknown",
			},
		},
		{
			name: "pilot's timeout, whatever the worker printed",
			exit: pilotEnded(FailTimeout),
			said: withSession(diagnosticResult(*provider)),
			want: withSession(Result{Outcome: Failed, Classification: Classification{Class: FailTimeout}, DecidedBy: sourcePilotPolicy}),
			wantFailure: func() Failure {
				f := pilotTerm(FailTimeout)
				f.FailureClass, f.FailureSource = FailTimeout, sourcePilotPolicy
				return f
			}(),
		},
		{
			name:          "ended after it had finished, its stream says completed: the work stands",
			exit:          pilotEnded(FailIdleTimeout),
			said:          withSession(Result{Outcome: Completed}),
			finishedFirst: true,
			want:          withSession(Result{Outcome: Completed}),
			wantFailure:   pilotTerm(FailIdleTimeout),
		},
		{
			name:          "ended after it had finished, step-capped: the work stands",
			exit:          pilotEnded(FailSessionStall),
			said:          Result{Outcome: StepCappedPartial},
			finishedFirst: true,
			want:          Result{Outcome: StepCappedPartial},
			wantFailure:   pilotTerm(FailSessionStall),
		},
		{
			name:          "ended after it had finished, no judgement: judged as a clean exit",
			exit:          pilotEnded(FailIdleTimeout),
			finishedFirst: true,
			want:          Result{Outcome: Completed},
			wantFailure:   pilotTerm(FailIdleTimeout),
		},
		{
			name:          "ended after it had finished, its stream says failed: pilot's reason",
			exit:          pilotEnded(FailIdleTimeout),
			said:          Result{Outcome: Failed, Classification: Classification{Class: FailIncomplete}},
			finishedFirst: true,
			want:          Result{Outcome: Failed, Classification: Classification{Class: FailIdleTimeout}, DecidedBy: sourcePilotPolicy},
			wantFailure: func() Failure {
				f := pilotTerm(FailIdleTimeout)
				f.FailureClass, f.FailureSource = FailIdleTimeout, sourcePilotPolicy
				return f
			}(),
		},
		{
			name:     "ended while retrying a failing model call: the retried class",
			exit:     pilotEnded(FailTimeout),
			said:     session,
			loop:     retried,
			retrying: true,
			want:     withSession(diagnosticResult(retried.Diagnostic)),
			wantFailure: func() Failure {
				f := pilotTerm(FailTimeout)
				f.FailureClass, f.FailureSource = FailProviderServerError, sourceProviderDiagnostic
				f.EvidenceSource, f.EvidenceExcerpt = "codex:stdout", retried.Diagnostic.Evidence
				return f // TransportConfirmed false: pilot ended it
			}(),
		},
		{
			name:     "ended by the retry-loop limit: the retried class is the reason too",
			exit:     pilotEnded(FailProviderServerError),
			loop:     retried,
			retrying: true,
			want:     diagnosticResult(retried.Diagnostic),
			wantFailure: func() Failure {
				f := pilotTerm(FailProviderServerError)
				f.FailureClass, f.FailureSource = FailProviderServerError, sourceProviderDiagnostic
				f.EvidenceSource, f.EvidenceExcerpt = "codex:stdout", retried.Diagnostic.Evidence
				return f
			}(),
		},
		{
			name:     "cancelled while retrying: cancelled",
			exit:     pilotEnded(FailCancelled),
			loop:     retried,
			retrying: true,
			want:     Result{Outcome: Failed, Classification: Classification{Class: FailCancelled}, DecidedBy: sourcePilotPolicy},
			wantFailure: func() Failure {
				f := pilotTerm(FailCancelled)
				f.FailureClass, f.FailureSource = FailCancelled, sourcePilotPolicy
				return f
			}(),
		},
		{
			name: "pilot ended it and it exited 0 on SIGTERM: the signal is pilot's SIGTERM",
			exit: Exit{Started: true, Terminated: true, Reason: FailCancelled},
			want: Result{Outcome: Failed, Classification: Classification{Class: FailCancelled}, DecidedBy: sourcePilotPolicy},
			wantFailure: Failure{
				FailureClass: FailCancelled, FailureSource: sourcePilotPolicy,
				TerminationSignal: "SIGTERM", TerminationInitiator: "pilot", TerminationReason: FailCancelled,
			},
		},
		{
			name: "pilot's SIGKILL after the grace period",
			exit: Exit{Started: true, Code: -1, Signal: 9, Terminated: true, Reason: FailTimeout},
			want: Result{Outcome: Failed, Classification: Classification{Class: FailTimeout}, DecidedBy: sourcePilotPolicy},
			wantFailure: Failure{
				FailureClass: FailTimeout, FailureSource: sourcePilotPolicy,
				TerminationSignal: "SIGKILL", TerminationInitiator: "pilot", TerminationReason: FailTimeout,
			},
		},
		{
			name: "never started: spawn-failed, no termination",
			exit: Exit{Err: errors.New(`executable "nope" not found in the worker's PATH`)},
			want: Result{Outcome: Failed, Classification: Classification{Class: FailSpawn, Source: "pilot", Evidence: `executable "nope" not found in the worker's PATH`}, DecidedBy: sourceSpawn},
			wantFailure: Failure{
				FailureClass: FailSpawn, FailureSource: sourceSpawn,
				EvidenceSource: "pilot", EvidenceExcerpt: `executable "nope" not found in the worker's PATH`,
			},
		},
		{
			name:        "a rate limit keeps its retry-after",
			exit:        Exit{Started: true, Code: 1},
			said:        Result{Outcome: Failed, Classification: Classification{Class: FailProviderRateLimit, RetryAfter: 30 * time.Second, TransportConfirmed: true}, DecidedBy: sourceProviderDiagnostic},
			want:        Result{Outcome: Failed, Classification: Classification{Class: FailProviderRateLimit, RetryAfter: 30 * time.Second, TransportConfirmed: true}, DecidedBy: sourceProviderDiagnostic},
			wantFailure: Failure{FailureClass: FailProviderRateLimit, FailureSource: sourceProviderDiagnostic, RetryAfterMS: 30000, TransportConfirmed: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gotFailure := verdictOf(tt.exit, tt.said, tt.loop, tt.retrying, tt.finishedFirst)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFailure, gotFailure); diff != "" {
				t.Errorf("failure (-want +got):\n%s", diff)
			}
		})
	}
}

// The watcher of a worker pilot ended after it had finished judges a clean
// exit; any other exit is judged as it is.
func TestSeenExit(t *testing.T) {
	ended := Exit{Started: true, Code: -1, Signal: 15, Terminated: true, Reason: FailIdleTimeout, StdoutBytes: 7}
	if diff := cmp.Diff(Exit{Started: true, StdoutBytes: 7}, seenExit(ended, true)); diff != "" {
		t.Errorf("finished first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ended, seenExit(ended, false)); diff != "" {
		t.Errorf("not finished first (-want +got):\n%s", diff)
	}
	exited := Exit{Started: true, Code: 143}
	if diff := cmp.Diff(exited, seenExit(exited, true)); diff != "" {
		t.Errorf("not terminated (-want +got):\n%s", diff)
	}
}

func TestEvidenceNoteStaysApartFromTheExcerpt(t *testing.T) {
	d := Classification{Class: FailProviderStreamDisconnect, Evidence: "APIError: Connection reset by server",
		Source: "x:stdout", Note: "the provider reset the stream", TransportConfirmed: true}
	f := failureOf(Exit{Started: true, Code: 1}, diagnosticResult(d))
	if f.EvidenceExcerpt != d.Evidence || f.EvidenceNote != d.Note || f.EvidenceSource != d.Source {
		t.Errorf("failure = excerpt %q, note %q, source %q; want %q, %q, %q",
			f.EvidenceExcerpt, f.EvidenceNote, f.EvidenceSource, d.Evidence, d.Note, d.Source)
	}
}
