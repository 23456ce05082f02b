package pilot

import (
	"context"
	"errors"
)

// CodexRunner runs the codex CLI. (Being built.)
type CodexRunner struct{}

// Name implements Runner.
func (CodexRunner) Name() string { return RunnerCodex }

// Command implements Runner.
func (CodexRunner) Command(ctx context.Context, a Attempt) (*Command, error) {
	return nil, errors.New("the codex runner is not built yet")
}
