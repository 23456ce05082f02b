package pilot

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/jsonskim"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
)

// Record is the content of a run's record.json. It is written when the
// worker starts, with Status "running", and replaced when the dispatch ends
// with the final status; Dispatch never returns while it still says
// "running".
type Record struct {
	RunID    string `json:"run_id"`
	Provider string `json:"provider"`
	Mode     Mode   `json:"mode"`
	Label    string `json:"label,omitempty"`
	// Group and GroupJob are the task's: the fanout or graph the run is
	// a job of, and the job's name in it.
	Group    string `json:"group,omitempty"`
	GroupJob string `json:"group_job,omitempty"`
	Runner   string `json:"runner"`
	Model    string `json:"model,omitempty"`

	// Status is "running" until the dispatch ends, then the verdict
	// ("completed", "step_capped_partial", "empty" or "error"), or
	// "abandoned" when its pilot died first (SIGKILL, a crash) and a
	// later pilot closed the record out, with the proof in the
	// failure_evidence fields.
	Status string `json:"status"`

	// Argv is the worker's command line with secret values replaced by
	// "[REDACTED]".
	Argv     []string `json:"argv"`
	Workdir  string   `json:"workdir"`
	TaskFile string   `json:"task_file"`
	// EnvKeys lists the names (never the values) of the worker's
	// environment.
	EnvKeys []string `json:"env_keys"`

	// Provenance is the dispatching program: its pid, executable, build
	// and whether the executable on disk still is the one running.
	Provenance

	Pid       int `json:"pid,omitempty"`
	Pgid      int `json:"pgid,omitempty"`
	Leftovers int `json:"leftovers,omitempty"`

	// MemoryLimitBytes is the limit on the tree's resident memory, if
	// any; PeakRSSBytes and PeakRSSProcess are the verdict's.
	MemoryLimitBytes int64         `json:"memory_limit_bytes,omitempty"`
	PeakRSSBytes     int64         `json:"peak_rss_bytes,omitempty"`
	PeakRSSProcess   *size.Process `json:"peak_rss_process,omitempty"`

	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`

	Timeout     float64 `json:"timeout_s"`
	IdleTimeout float64 `json:"idle_timeout_s"`

	ExitCode *int    `json:"exit_code"`
	Signal   string  `json:"signal,omitempty"`
	Verdict  Outcome `json:"verdict,omitempty"`
	Failure
	OutputIncomplete bool `json:"output_incomplete,omitempty"`
	// PilotError is set when pilot itself failed during the dispatch.
	PilotError string `json:"pilot_error,omitempty"`

	// Sandbox is what confined the worker (see package sandbox).
	Sandbox *sandbox.Report `json:"sandbox,omitempty"`

	// SessionID, Resume and Usage are the verdict's.
	SessionID string `json:"session_id,omitempty"`
	Resume    string `json:"resume,omitempty"`
	Usage     *Usage `json:"usage,omitempty"`

	// SessionRecord is the worker's session phase and silences.
	*SessionRecord

	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// RunDirBytes is the size of the run directory's files when the record
	// was closed out (the final record itself aside); 0 while it runs.
	RunDirBytes int64 `json:"run_dir_bytes"`

	StreamLog string `json:"stream_log"`
	EventsLog string `json:"events_log"`

	// RetryKey, Attempt and the links below are a retry layer's
	// Task.Lineage: the task's key in the retry state, the attempt's
	// number (1 for the first), the record of the attempt before it,
	// ResumedFrom when this attempt continues that attempt's session, and
	// ResumeFallback when a resume found its session gone and this
	// attempt starts afresh instead (it says why).
	RetryKey       string `json:"retry_key,omitempty"`
	Attempt        int    `json:"attempt,omitempty"`
	PreviousRecord string `json:"previous_record,omitempty"`
	ResumedFrom    string `json:"resumed_from,omitempty"`
	ResumeFallback string `json:"resume_fallback,omitempty"`
}

// statusRunning is Record.Status while a worker runs.
const statusRunning = "running"

// ReadRecord reads a record.json.
func ReadRecord(path string) (Record, error) {
	var r Record
	data, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	err = json.Unmarshal(data, &r)
	return r, err
}

// writeRecord replaces path with r, through p when it is prepared.
func writeRecord(path string, p *atomicfile.Pending, r *Record) error {
	compact, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// As json.MarshalIndent(r, "", "  ") writes it, in a fifth of the time.
	data := append(jsonskim.Indent(make([]byte, 0, 2*len(compact)), compact), '\n')
	if p != nil {
		return p.Commit(data, 0o600)
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// DefaultRunDir is where run directories go when Dispatcher.RunDir is empty:
// $XDG_STATE_HOME/pilot/runs, or ~/.local/state/pilot/runs.
func DefaultRunDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "pilot", "runs")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "pilot", "runs")
	}
	return filepath.Join(os.TempDir(), "pilot", "runs")
}

// newRunID returns "<UTC time>-<provider>-<random>", which sorts by start
// time and is unique.
func newRunID(now time.Time, provider string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000000Z") + "-" + text.SafeName(provider, '_') + "-" + hex.EncodeToString(b[:])
}

// SessionRecord is what a record says about the worker's native session
// and its silences.
type SessionRecord struct {
	// NativeSessionPath is the session file pilot followed, and
	// NativeSessionMtimeNS its modification time when last seen (null
	// when it never appeared).
	NativeSessionPath    string `json:"native_session_path,omitempty"`
	NativeSessionMtimeNS *int64 `json:"native_session_mtime_ns,omitempty"`
	// SessionPhase and the rest are the session's state when the worker
	// ended (see SessionState).
	SessionPhase         SessionPhase `json:"session_phase"`
	SessionPhaseReason   string       `json:"session_phase_reason"`
	ExpectedToolCallIDs  []string     `json:"expected_tool_call_ids"`
	CompletedToolCallIDs []string     `json:"completed_tool_call_ids"`
	PendingToolCallIDs   []string     `json:"pending_tool_call_ids"`
	// StallTimeoutSeconds is the silence after which that phase is ended
	// as a stall; null when silence alone never ends it.
	StallTimeoutSeconds *float64 `json:"stall_timeout_seconds"`
	// ActivityState says what the worker's last activity was: "streaming"
	// (output), "session" (its session file grew) or "none".
	ActivityState string `json:"activity_state"`
	// SilenceInspection is the last stall check that acted, if any.
	SilenceInspection *StallInspection `json:"silence_inspection,omitempty"`
}
