package pilot

import (
	"context"
	"errors"
)

// ClaudeRunner runs the claude CLI. (Being built.)
type ClaudeRunner struct{}

// Name implements Runner.
func (ClaudeRunner) Name() string { return RunnerClaude }

// Command implements Runner.
func (ClaudeRunner) Command(ctx context.Context, a Attempt) (*Command, error) {
	return nil, errors.New("the claude runner is not built yet")
}
