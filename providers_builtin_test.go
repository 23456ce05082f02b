package pilot_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
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

func TestLoadRegistry(t *testing.T) {
	builtin := agents.Providers()
	var withMine []pilot.Provider // sorted by name, as registryProviders lists them
	for _, p := range builtin {
		switch p.Name {
		case "glm":
			p = pilot.Provider{Name: "glm", Runner: agents.RunnerOpencode, Model: "zai-coding-plan/glm-4.7"}
		case "pi":
			withMine = append(withMine, pilot.Provider{Name: "mine", Runner: agents.RunnerPi, Model: "m"})
		}
		withMine = append(withMine, p)
	}
	const file = `{"providers": {
		"glm": {"runner": "opencode", "model": "zai-coding-plan/glm-4.7"},
		"mine": {"runner": "pi", "model": "m"}}}`

	t.Run("no default file", func(t *testing.T) {
		t.Setenv("XDG_CONFIG_HOME", t.TempDir())
		reg, err := config.LoadRegistry("")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(builtin, registryProviders(t, reg)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("no config dir", func(t *testing.T) {
		t.Setenv("XDG_CONFIG_HOME", "")
		t.Setenv("HOME", "")
		reg, err := config.LoadRegistry("")
		if err != nil || len(reg.Names()) != len(builtin) {
			t.Errorf("LoadRegistry(\"\") = %v, %v; want the built-ins", reg.Names(), err)
		}
	})
	t.Run("default file", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", home)
		os.MkdirAll(filepath.Join(home, "pilot"), 0o700)
		os.WriteFile(filepath.Join(home, "pilot", "providers.json"), []byte(file), 0o644)
		reg, err := config.LoadRegistry("")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(withMine, registryProviders(t, reg)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("explicit file", func(t *testing.T) {
		t.Setenv("XDG_CONFIG_HOME", t.TempDir())
		reg, err := config.LoadRegistry(writeProviders(t, file))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(withMine, registryProviders(t, reg)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("explicit file missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "providers.json")
		_, err := config.LoadRegistry(path)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("error = %v; want one matching fs.ErrNotExist that names %s", err, path)
		}
	})
}

// Every problem in a providers file is an error that names the file,
// whether LoadRegistry was given it or found it in the default place.
func TestLoadRegistryFileErrors(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string
	}{
		{"invalid JSON", `{"providers": {`, []string{"invalid JSON"}},
		{"not an object", `[]`, []string{"expected a JSON object"}},
		{"no providers", `{}`, []string{`no "providers" object`}},
		{"unknown top-level field", `{"providers": {}, "extra": 1}`, []string{`unknown field "extra"`}},
		{"unknown provider field", `{"providers": {"glm": {"runner": "opencode", "modle": "x"}}}`, []string{`provider "glm"`, `unknown field "modle"`, "known: runner, argv, model"}},
		{"misspelt field case", `{"providers": {"glm": {"runner": "opencode", "Model": "x"}}}`, []string{`did you mean "model"`}},
		{"provider twice", `{"providers": {"glm": {"runner": "pi"}, "glm": {"runner": "codex"}}}`, []string{`provider "glm" appears twice`}},
		{"field twice", `{"providers": {"glm": {"runner": "pi", "runner": "codex"}}}`, []string{`field "runner" appears twice`}},
		{"wrong type", `{"providers": {"glm": {"runner": "pi", "args": "--x"}}}`, []string{`field "args" has the wrong type`}},
		{"no runner", `{"providers": {"glm": {"model": "x"}}}`, []string{`provider "glm" has no runner`}},
		{"bad base_url", `{"providers": {"glm": {"runner": "codex", "base_url": "127.0.0.1:8080"}}}`, []string{"base_url", "not an http(s) URL"}},
		{"secret in env", `{"providers": {"glm": {"runner": "opencode", "credential_env": "K", "env": {"K": "v"}}}}`, []string{"keep secrets out of the providers file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			explicit := writeProviders(t, tt.content)
			home := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", home)
			os.MkdirAll(filepath.Join(home, "pilot"), 0o700)
			def := filepath.Join(home, "pilot", "providers.json")
			os.WriteFile(def, []byte(tt.content), 0o644)
			for path, arg := range map[string]string{explicit: explicit, def: ""} {
				reg, err := config.LoadRegistry(arg)
				if err == nil || reg != nil {
					t.Fatalf("LoadRegistry(%q) = %v, %v; want an error", arg, reg, err)
				}
				for _, w := range append([]string{path}, tt.want...) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("LoadRegistry(%q) error %q does not mention %q", arg, err, w)
					}
				}
			}
		})
	}
}

// A providers file adds providers and replaces built-in ones by name.
func ExampleLoadRegistry() {
	dir, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "providers.json")
	os.WriteFile(path, []byte(`{"providers": {
		"glm":   {"runner": "opencode", "model": "zai-coding-plan/glm-4.7", "credential_env": "ZHIPU_API_KEY"},
		"local": {"runner": "codex", "model": "my-model", "base_url": "http://127.0.0.1:8080/v1", "credential_env": "LOCAL_API_KEY"}}}`), 0o644)
	reg, err := config.LoadRegistry(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		fmt.Println(strings.TrimSpace(fmt.Sprintf("%-8s %-8s %s", name, p.Runner, p.Model)))
	}
	// Output:
	// claude   claude
	// codex    codex
	// gemini   gemini
	// glm      opencode zai-coding-plan/glm-4.7
	// kimi-k3  opencode moonshotai/kimi-k3
	// local    codex    my-model
	// pi       pi
}
