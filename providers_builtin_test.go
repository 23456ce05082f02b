package pilot_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestRegistryWith(t *testing.T) {
	base, err := pilot.NewRegistry(
		pilot.Provider{Name: "glm", Runner: agents.RunnerOpencode, Model: "zai/glm", CredentialEnv: "ZHIPU_API_KEY",
			Env: map[string]string{"REGION": "eu"}, Args: []string{"--thinking"}},
		pilot.Provider{Name: "pi", Runner: agents.RunnerPi},
	)
	if err != nil {
		t.Fatal(err)
	}
	before := registryProviders(t, base)
	got, err := base.With(
		pilot.Provider{Name: "glm", Runner: "command", Argv: []string{"glm-agent"}},
		pilot.Provider{Name: "local", Runner: agents.RunnerCodex, Model: "m", BaseURL: "http://127.0.0.1:8080/v1", CredentialEnv: "LOCAL_KEY"},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []pilot.Provider{
		// Replaced whole: nothing of the old glm (model, env, args) is left.
		{Name: "glm", Runner: "command", Argv: []string{"glm-agent"}},
		{Name: "local", Runner: agents.RunnerCodex, Model: "m", BaseURL: "http://127.0.0.1:8080/v1", CredentialEnv: "LOCAL_KEY"},
		{Name: "pi", Runner: agents.RunnerPi},
	}
	if diff := cmp.Diff(want, registryProviders(t, got)); diff != "" {
		t.Errorf("With (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, registryProviders(t, base)); diff != "" {
		t.Errorf("With changed the registry it was called on (-want +got):\n%s", diff)
	}

	var empty *pilot.Registry
	if got, err := empty.With(pilot.Provider{Name: "pi", Runner: agents.RunnerPi}); err != nil || len(got.Names()) != 1 {
		t.Errorf("nil.With = %v, %v; want a registry holding pi", got, err)
	}
	for _, tt := range []struct {
		name string
		ps   []pilot.Provider
		want string
	}{
		{"twice in one call", []pilot.Provider{{Name: "x", Runner: "pi"}, {Name: "x", Runner: "codex"}}, `"x" is defined twice`},
		{"invalid", []pilot.Provider{{Name: "x", Runner: "command"}}, "no argv"},
		{"no name", []pilot.Provider{{Runner: "pi"}}, "name"},
	} {
		if got, err := base.With(tt.ps...); err == nil || got != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("With(%s) = %v, %v; want an error mentioning %q", tt.name, got, err, tt.want)
		}
	}
}
