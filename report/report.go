// Package report writes a run's failure as the key=value lines the seed
// dispatcher printed and kept (failure_report_lines): the class, where its
// evidence came from, how the process ended and which build judged it.
package report

import (
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
)

// A Failure is the key=value summary of a failed run that the seed
// dispatcher printed (failure_report_lines) and kept in its record: the
// classification, where its evidence came from, how the process ended and
// which pilot build judged it.
type Failure struct {
	Class pilot.FailureClass
	// Source says what decided Class: "provider-terminal-diagnostic" (a
	// provider line from the worker), "process-termination",
	// "exit-code", "pilot", ...
	Source string
	// EvidenceSource is where the evidence line came from ("pi:stderr").
	EvidenceSource string
	// Evidence is the line itself. The report does not redact it: pass it
	// through the Dispatcher's redaction first.
	Evidence           string
	TransportConfirmed bool
	RetryAfter         time.Duration

	// TerminationSignal names the signal that ended the worker
	// ("SIGTERM"); TerminationSignalInferred is set when it was read from
	// a 128+N exit code rather than seen;
	// TerminationInitiator is "pilot" or "unknown".
	TerminationSignal         string
	TerminationSignalInferred bool
	TerminationInitiator      string

	// DispatcherPID is the judging process; DispatcherSourceSHA256 the
	// digest of the pilot executable it loaded and
	// DispatcherCurrentSHA256 the digest of the file now, which differ
	// when it was rebuilt while running (a "hot edit" the running process
	// does not reflect).
	DispatcherPID           int
	DispatcherSourceSHA256  string
	DispatcherCurrentSHA256 string
}

// FromClassification is the report of c, its evidence read from
// evidenceSource ("pi:stderr"). When c has evidence, Source is
// "provider-terminal-diagnostic" for a provider class or context-limit and
// "terminal-diagnostic" for a recognised error of no narrower class;
// otherwise the caller sets it.
func FromClassification(c pilot.Classification, evidenceSource string) Failure {
	r := Failure{
		Class:              c.Class,
		Evidence:           c.Evidence,
		TransportConfirmed: c.TransportConfirmed,
		RetryAfter:         c.RetryAfter,
	}
	if c.Evidence != "" {
		r.Source = "terminal-diagnostic"
		if c.Class.Provider() || c.Class == pilot.FailContextLimit || c.TransportConfirmed {
			r.Source = "provider-terminal-diagnostic"
		}
		r.EvidenceSource = evidenceSource
	}
	return r
}

// Lines returns the report as key=value lines, in a fixed order, leaving out
// what is unset: failure_class, failure_source,
// provider_transport_failure_confirmed (always), failure_evidence_source,
// provider_evidence (evidence from a provider diagnostic) or
// failure_evidence (other evidence), retry_after, termination_signal,
// termination_signal_inferred, termination_initiator, dispatcher_pid,
// dispatcher_source_sha256, dispatcher_source_current_sha256 and
// dispatcher_source_matches_loaded (when both digests are known). Newlines
// and carriage returns in values are written as \n and \r, so every key
// stays on one line.
func (r Failure) Lines() []string {
	var out []string
	add := func(k, v string) { out = append(out, k+"="+reportEscaper.Replace(v)) }
	add("failure_class", string(r.Class))
	if r.Source != "" {
		add("failure_source", r.Source)
	}
	add("provider_transport_failure_confirmed", strconv.FormatBool(r.TransportConfirmed))
	if r.EvidenceSource != "" {
		add("failure_evidence_source", r.EvidenceSource)
	}
	if r.Evidence != "" {
		if r.Source == "provider-terminal-diagnostic" {
			add("provider_evidence", r.Evidence)
		} else {
			add("failure_evidence", r.Evidence)
		}
	}
	if r.RetryAfter > 0 {
		add("retry_after", r.RetryAfter.String())
	}
	if r.TerminationSignal != "" {
		add("termination_signal", r.TerminationSignal)
		add("termination_signal_inferred", strconv.FormatBool(r.TerminationSignalInferred))
	}
	if r.TerminationInitiator != "" {
		add("termination_initiator", r.TerminationInitiator)
	}
	if r.DispatcherPID != 0 {
		add("dispatcher_pid", strconv.Itoa(r.DispatcherPID))
	}
	if r.DispatcherSourceSHA256 != "" {
		add("dispatcher_source_sha256", r.DispatcherSourceSHA256)
	}
	if r.DispatcherCurrentSHA256 != "" {
		add("dispatcher_source_current_sha256", r.DispatcherCurrentSHA256)
	}
	if r.DispatcherSourceSHA256 != "" && r.DispatcherCurrentSHA256 != "" {
		add("dispatcher_source_matches_loaded", strconv.FormatBool(r.DispatcherSourceSHA256 == r.DispatcherCurrentSHA256))
	}
	return out
}

var reportEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`)

// FromRecord is the report of a record's failure for humans and logs (its
// Lines are key=value).
func FromRecord(r pilot.Record) Failure {
	f := r.Failure
	return Failure{
		Class:                     f.FailureClass,
		Source:                    f.FailureSource,
		EvidenceSource:            f.EvidenceSource,
		Evidence:                  f.EvidenceExcerpt,
		TransportConfirmed:        f.TransportConfirmed,
		RetryAfter:                time.Duration(f.RetryAfterMS) * time.Millisecond,
		TerminationSignal:         f.TerminationSignal,
		TerminationSignalInferred: f.TerminationSignalInferred,
		TerminationInitiator:      f.TerminationInitiator,
		DispatcherPID:             r.Provenance.Pid,
		DispatcherSourceSHA256:    r.SourceSHA256,
		DispatcherCurrentSHA256:   r.CurrentSHA256,
	}
}
