package pilot

import (
	"encoding/json"

	"github.com/pilotworkers/pilot/internal/jsonw"
)

// SessionPhase is what a worker's native session says it is doing. The
// names are part of the CLI's JSON contract.
type SessionPhase string

// The phases of a pi session.
const (
	// PhaseStarting: no session file yet, nothing in it but the header,
	// or no message on the active branch. pi creates the file only once
	// the first assistant message exists, so a missing file is normal
	// while the first model call runs.
	PhaseStarting SessionPhase = "starting"
	// PhaseAwaitingModel: the active branch ends in a user message, or
	// every tool call of the last assistant message has its result: the
	// next thing is a model response.
	PhaseAwaitingModel SessionPhase = "awaiting-model"
	// PhaseToolRunning: the last assistant message asked for tool calls
	// whose results are not all recorded yet.
	PhaseToolRunning SessionPhase = "tool-running"
	// PhaseFinished: the last assistant message stopped ("stop" or
	// "length") without asking for tools.
	PhaseFinished SessionPhase = "finished"
	// PhaseErrored: the last assistant message has stopReason "error" or
	// "aborted". pi may still retry: a retry appends a new assistant
	// message, and the phase moves on.
	PhaseErrored SessionPhase = "errored"
	// PhaseUnknown: the file says something pilot does not understand;
	// Reason says what.
	PhaseUnknown SessionPhase = "unknown"
)

// SessionState is the phase of a worker's native session and the facts
// behind it. Its JSON form is part of the CLI's contract; the id lists are
// always arrays, never null.
type SessionState struct {
	Phase  SessionPhase `json:"phase"`
	Reason string       `json:"reason"`
	// The tool calls of the branch's last assistant message, in its
	// order: all of them, those with a result after it, and the rest. They
	// are empty when the newest message is the user's, and when the phase
	// is errored (pi never runs a failed message's calls).
	ExpectedToolCallIDs  []string `json:"expected_tool_call_ids"`
	CompletedToolCallIDs []string `json:"completed_tool_call_ids"`
	PendingToolCallIDs   []string `json:"pending_tool_call_ids"`
	// Version is the header's format version (0 when no header was read
	// or its version is not a number).
	Version int `json:"version"`
	// LeafID is the id of the last entry (empty when it has none, as in
	// version 1 files).
	LeafID string `json:"leaf_id"`
	// StopReason and ErrorMessage are the last assistant message's, as
	// written.
	StopReason   string `json:"stop_reason"`
	ErrorMessage string `json:"error_message"`
}

// MarshalJSON writes the state with empty id lists as [] rather than null.
func (s SessionState) MarshalJSON() ([]byte, error) {
	type plain SessionState
	p := plain(s)
	p.ExpectedToolCallIDs = nonNil(p.ExpectedToolCallIDs)
	p.CompletedToolCallIDs = nonNil(p.CompletedToolCallIDs)
	p.PendingToolCallIDs = nonNil(p.PendingToolCallIDs)
	return json.Marshal(p)
}

// appendJSON appends s as MarshalJSON writes it.
func (s *SessionState) appendJSON(b []byte) []byte {
	b = append(b, `{"phase":`...)
	b = jsonw.String(b, string(s.Phase))
	b = append(b, `,"reason":`...)
	b = jsonw.String(b, s.Reason)
	b = append(b, `,"expected_tool_call_ids":`...)
	b = jsonw.Strings(b, s.ExpectedToolCallIDs)
	b = append(b, `,"completed_tool_call_ids":`...)
	b = jsonw.Strings(b, s.CompletedToolCallIDs)
	b = append(b, `,"pending_tool_call_ids":`...)
	b = jsonw.Strings(b, s.PendingToolCallIDs)
	b = append(b, `,"version":`...)
	b = jsonw.Int(b, int64(s.Version))
	b = append(b, `,"leaf_id":`...)
	b = jsonw.String(b, s.LeafID)
	b = append(b, `,"stop_reason":`...)
	b = jsonw.String(b, s.StopReason)
	b = append(b, `,"error_message":`...)
	b = jsonw.String(b, s.ErrorMessage)
	return append(b, '}')
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
