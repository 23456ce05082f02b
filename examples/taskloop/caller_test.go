package main

import (
	"os"
	"strings"
	"testing"
)

func TestCallerLifecycleIsNotBoundToChildDispatcherExit(t *testing.T) {
	data, err := os.ReadFile("CALLER.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(data)), " ")
	for _, want := range []string{
		"The lifecycle belongs to the caller agent itself, not to the child dispatcher process",
		"The child's exit, a yield, or a lost session or cell alone is no reason for the caller to send its final answer",
		"exit code `3` is the non-terminal tracking state: another dispatcher owns an active task",
		"health and progress come first from the worker's real stdout/stderr in its run's `stream.log`",
		"Record the dispatcher PID and the agent PID at once",
		"only when every `toolCall.id` of the last assistant message has a matching `toolResult.toolCallId`",
		"When the stream stops for 3 minutes outside a tool's run, the dispatcher inspects the last part of the stream",
		"share a budget of 10 consecutive automatic recovery failures",
		"the 10th failure blocks the task, and nothing resumes it on a cooldown",
		"`session-stall` is a timeout of the dispatcher's policy, not a provider error",
		"An exit code `143` without real provider terminal evidence is not classified as a provider error",
		"One attempt of `pi -p` in a fresh, isolated session is not generalized to the pi TUI or to an outage of the whole provider",
		"provider_transport_failure_confirmed",
		"`connection refused`, `dial tcp` or a `curl` peer failure in a tool's or test's stderr alone never makes a provider error",
		"A running dispatcher does not pick up edits to its own program",
		"dispatcher_source_sha256",
		"`dispatcher_source_matches_loaded=false`",
		"A `session-stall` or `context-limit` is resumed in the same session",
		"Never kill the dispatcher to stop a worker",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("CALLER.md does not say %q", want)
		}
	}
}
