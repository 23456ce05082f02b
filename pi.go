package pilot

import (
	"context"
	"errors"
)

// PiRunner runs the pi CLI. (Being built.)
type PiRunner struct{}

// Name implements Runner.
func (PiRunner) Name() string { return RunnerPi }

// Command implements Runner.
func (PiRunner) Command(ctx context.Context, a Attempt) (*Command, error) {
	return nil, errors.New("the pi runner is not built yet")
}
