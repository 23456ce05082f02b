package pilot

import (
	"context"
	"errors"
)

// OpencodeRunner runs the opencode CLI. (Being built.)
type OpencodeRunner struct{}

// Name implements Runner.
func (OpencodeRunner) Name() string { return RunnerOpencode }

// Command implements Runner.
func (OpencodeRunner) Command(ctx context.Context, a Attempt) (*Command, error) {
	return nil, errors.New("the opencode runner is not built yet")
}
