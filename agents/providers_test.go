package agents_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestDefaultProviders(t *testing.T) {
	ps := agents.Providers()
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		t.Fatalf("the built-in providers do not make a registry: %v", err)
	}
	want := []pilot.Provider{
		{Name: "claude", Runner: agents.RunnerClaude, CredentialEnv: "ANTHROPIC_API_KEY"},
		{Name: "codex", Runner: agents.RunnerCodex, CredentialEnv: "CODEX_API_KEY"},
		{Name: "gemini", Runner: agents.RunnerGemini, CredentialEnv: "GEMINI_API_KEY"},
		{Name: "glm", Runner: agents.RunnerOpencode, Model: "zai-coding-plan/glm-5.2", CredentialEnv: "ZHIPU_API_KEY"},
		{Name: "kimi-k3", Runner: agents.RunnerOpencode, Model: "moonshotai/kimi-k3", CredentialEnv: "MOONSHOT_API_KEY"},
		{Name: "pi", Runner: agents.RunnerPi},
		{Name: "qwen", Runner: agents.RunnerQwen},
	}
	if diff := cmp.Diff(want, registryProviders(t, reg)); diff != "" {
		t.Errorf("built-in providers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Errorf("DefaultProviders is not sorted by name (-want +got):\n%s", diff)
	}
	// Each call is a fresh slice.
	ps[0].Model = "changed"
	if again := agents.Providers(); again[0].Model != "" {
		t.Error("changing DefaultProviders' result changed the next call's")
	}
}
