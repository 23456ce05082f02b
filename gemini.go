package pilot

import (
	"context"
	"errors"
)

// GeminiRunner runs the gemini CLI. (Being built.)
type GeminiRunner struct{}

// Name implements Runner.
func (GeminiRunner) Name() string { return RunnerGemini }

// Command implements Runner.
func (GeminiRunner) Command(ctx context.Context, a Attempt) (*Command, error) {
	return nil, errors.New("the gemini runner is not built yet")
}
