package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/size"
)

// validProviders is a providers file using every field.
const validProviders = `{
  "providers": {
    "glm": {
      "runner": "command",
      "argv": ["glm-agent", "--model", "{model}", "{task_file}"],
      "model": "glm-5",
      "credential_env": "GLM_API_KEY",
      "env": {"GLM_REGION": "eu", "NO_COLOR": "1"}
    },
    "local": {"runner": "command", "argv": ["local-agent"], "memory_limit": 1073741824},
    "kimi-k3": {"runner": "kimi", "model": "k3", "credential_env": "KIMI_API_KEY", "memory_limit": "2GiB", "max_parallel": 2}
  }
}
`

var validProvidersWant = []pilot.Provider{
	{
		Name:          "glm",
		Runner:        "command",
		Argv:          []string{"glm-agent", "--model", "{model}", "{task_file}"},
		Model:         "glm-5",
		CredentialEnv: "GLM_API_KEY",
		Env:           map[string]string{"GLM_REGION": "eu", "NO_COLOR": "1"},
	},
	{Name: "kimi-k3", Runner: "kimi", Model: "k3", CredentialEnv: "KIMI_API_KEY", MemoryLimit: 2 * size.GiB, MaxParallel: 2},
	{Name: "local", Runner: "command", Argv: []string{"local-agent"}, MemoryLimit: size.GiB},
}

// writeProviders writes content to a providers file in a fresh directory
// and returns its path.
func writeProviders(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// registryProviders returns every provider of reg, in Names order, as
// Lookup reports them.
func registryProviders(t testing.TB, reg *pilot.Registry) []pilot.Provider {
	t.Helper()
	var ps []pilot.Provider
	for _, name := range reg.Names() {
		p, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("Lookup(%q) = false for a name listed by Names", name)
		}
		ps = append(ps, p)
	}
	return ps
}

// marshalProviders renders ps as a providers file.
func marshalProviders(t testing.TB, ps []pilot.Provider) []byte {
	t.Helper()
	m := map[string]pilot.Provider{}
	for _, p := range ps {
		m[p.Name] = p
	}
	data, err := json.Marshal(map[string]any{"providers": m})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestLoadProviders(t *testing.T) {
	reg, err := config.LoadProviders(writeProviders(t, validProviders))
	if err != nil {
		t.Fatalf("LoadProviders: %v", err)
	}
	if diff := cmp.Diff([]string{"glm", "kimi-k3", "local"}, reg.Names()); diff != "" {
		t.Errorf("Names() mismatch (-want +got):\n%s", diff)
	}
	got := registryProviders(t, reg)
	if diff := cmp.Diff(validProvidersWant, got); diff != "" {
		t.Errorf("providers mismatch (-want +got):\n%s", diff)
	}

	// What Lookup reports, written back as a providers file, parses to
	// the same registry.
	again, err := config.ParseProviders(bytes.NewReader(marshalProviders(t, got)), "round-trip.json")
	if err != nil {
		t.Fatalf("ParseProviders(round trip): %v", err)
	}
	if diff := cmp.Diff(validProvidersWant, registryProviders(t, again)); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}

	if p, ok := reg.Lookup("nope"); ok {
		t.Errorf("Lookup(%q) = %+v, true; want false", "nope", p)
	}
}

func TestLoadProvidersMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.json")
	reg, err := config.LoadProviders(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadProviders(%s) error = %v; want fs.ErrNotExist", path, err)
	}
	if reg != nil {
		t.Errorf("LoadProviders(%s) registry = %v; want nil", path, reg)
	}
}

// TestLoadProvidersErrors checks that every bad file is rejected and that
// the message says which file and what to look at. The message is the
// feature under test here, so the test reads it; callers never should.
func TestLoadProvidersErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		// mention lists what the error must name besides the file path.
		mention []string
	}{
		{name: "empty file", input: ``},
		{name: "only whitespace", input: " \n\t\n"},
		{name: "not JSON", input: `providers: {}`},
		{name: "truncated JSON", input: `{"providers": {"glm": {"runner": "command"`},
		{name: "top-level null", input: `null`, mention: []string{`"providers"`}},
		{name: "missing providers", input: `{}`, mention: []string{`"providers"`}},
		{name: "null providers", input: `{"providers": null}`, mention: []string{`"providers"`}},
		{name: "unknown top-level field", input: `{"providers": {}, "providerz": {}}`, mention: []string{`"providerz"`}},
		{
			name:    "unknown provider field",
			input:   `{"providers": {"glm": {"runner": "command", "argv": ["a"], "modle": "m"}}}`,
			mention: []string{`"glm"`, `"modle"`},
		},
		{
			name:    "Name is not a file field",
			input:   `{"providers": {"glm": {"runner": "command", "argv": ["a"], "Name": "x"}}}`,
			mention: []string{`"glm"`, `"Name"`},
		},
		{name: "providers is an array", input: `{"providers": []}`, mention: []string{`"providers"`}},
		{name: "providers is a string", input: `{"providers": "glm"}`, mention: []string{`"providers"`}},
		{name: "runner is a number", input: `{"providers": {"glm": {"runner": 1}}}`, mention: []string{`"glm"`, `"runner"`}},
		{name: "argv is a string", input: `{"providers": {"glm": {"runner": "command", "argv": "glm-agent"}}}`, mention: []string{`"glm"`, `"argv"`}},
		{name: "argv holds a number", input: `{"providers": {"glm": {"runner": "command", "argv": [1]}}}`, mention: []string{`"glm"`, `"argv"`}},
		{name: "env value is a number", input: `{"providers": {"glm": {"runner": "kimi", "env": {"K": 1}}}}`, mention: []string{`"glm"`, `"env"`}},
		{name: "credential_env is a list", input: `{"providers": {"glm": {"runner": "kimi", "credential_env": ["K"]}}}`, mention: []string{`"glm"`, `"credential_env"`}},
		{name: "memory_limit without a unit it knows", input: `{"providers": {"glm": {"runner": "kimi", "memory_limit": "2 gigs"}}}`, mention: []string{`"glm"`, "memory_limit", `"2 gigs"`, `"2GiB"`}},
		{name: "memory_limit negative", input: `{"providers": {"glm": {"runner": "kimi", "memory_limit": -1}}}`, mention: []string{`"glm"`, "memory_limit", "negative"}},
		{name: "memory_limit a boolean", input: `{"providers": {"glm": {"runner": "kimi", "memory_limit": true}}}`, mention: []string{`"glm"`, "memory_limit"}},
		{name: "max_parallel negative", input: `{"providers": {"glm": {"runner": "kimi", "max_parallel": -2}}}`, mention: []string{`"glm"`, "max_parallel", "negative"}},
		{name: "max_parallel a string", input: `{"providers": {"glm": {"runner": "kimi", "max_parallel": "2"}}}`, mention: []string{`"glm"`, "max_parallel"}},
		{name: "max_parallel a fraction", input: `{"providers": {"glm": {"runner": "kimi", "max_parallel": 1.5}}}`, mention: []string{`"glm"`, "max_parallel"}},
		{name: "trailing garbage", input: `{"providers": {}} x`},
		{name: "trailing second object", input: `{"providers": {}} {"providers": {}}`},
		{name: "trailing number", input: `{"providers": {}} 1`},
		{name: "trailing close brace", input: `{"providers": {}}}`},
		{name: "trailing close bracket", input: `{"providers": {}}]`},
		{name: "trailing non-JSON space", input: "{\"providers\": {}}\u00a0"},
		{name: "provider is null", input: `{"providers": {"glm": null}}`, mention: []string{`"glm"`, "runner"}},
		{name: "no runner", input: `{"providers": {"glm": {"argv": ["a"]}}}`, mention: []string{`"glm"`, "runner"}},
		{name: "command runner without argv", input: `{"providers": {"glm": {"runner": "command"}}}`, mention: []string{`"glm"`, "argv"}},
		{name: "command runner with empty argv", input: `{"providers": {"glm": {"runner": "command", "argv": []}}}`, mention: []string{`"glm"`, "argv"}},
		{name: "argv on another runner", input: `{"providers": {"glm": {"runner": "kimi", "argv": ["a"]}}}`, mention: []string{`"glm"`, "argv", `"kimi"`}},
		{name: "credential_env with a dash", input: `{"providers": {"glm": {"runner": "kimi", "credential_env": "GLM-KEY"}}}`, mention: []string{`"glm"`, `"GLM-KEY"`}},
		{name: "credential_env starting with a digit", input: `{"providers": {"glm": {"runner": "kimi", "credential_env": "1KEY"}}}`, mention: []string{`"glm"`, `"1KEY"`}},
		{name: "credential_env with a space", input: `{"providers": {"glm": {"runner": "kimi", "credential_env": "GLM KEY"}}}`, mention: []string{`"glm"`, `"GLM KEY"`}},
		{name: "env key not a variable name", input: `{"providers": {"glm": {"runner": "kimi", "env": {"A=B": "c"}}}}`, mention: []string{`"glm"`, `"A=B"`}},
		{
			name:    "env sets its own credential",
			input:   `{"providers": {"glm": {"runner": "kimi", "credential_env": "GLM_API_KEY", "env": {"GLM_API_KEY": "sk-live"}}}}`,
			mention: []string{`"glm"`, "GLM_API_KEY"},
		},
		{name: "empty provider name", input: `{"providers": {"": {"runner": "kimi"}}}`, mention: []string{`""`}},
		{name: "provider name with a space", input: `{"providers": {"g l m": {"runner": "kimi"}}}`, mention: []string{`"g l m"`}},
		{name: "provider name starting with a dash", input: `{"providers": {"-glm": {"runner": "kimi"}}}`, mention: []string{`"-glm"`}},
		{name: "provider defined twice", input: `{"providers": {"glm": {"runner": "kimi"}, "glm": {"runner": "pi"}}}`, mention: []string{`"glm"`, "twice"}},
		{name: "field given twice", input: `{"providers": {"glm": {"runner": "kimi", "runner": "pi"}}}`, mention: []string{`"glm"`, `"runner"`, "twice"}},
		{name: "field name in the wrong case", input: `{"providers": {"glm": {"RUNNER": "kimi"}}}`, mention: []string{`"RUNNER"`, `did you mean "runner"`}},
		{name: "top-level key in the wrong case", input: `{"Providers": {}}`, mention: []string{`"Providers"`, `did you mean "providers"`}},
		{name: "provider is an array", input: `{"providers": {"glm": ["command"]}}`, mention: []string{`"glm"`, "an array", "runner"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeProviders(t, tt.input)
			reg, err := config.LoadProviders(path)
			if err == nil {
				t.Fatalf("LoadProviders(%q) = %v, nil; want an error", tt.input, reg.Names())
			}
			if reg != nil {
				t.Errorf("LoadProviders(%q) returned a registry with an error", tt.input)
			}
			for _, s := range append([]string{path}, tt.mention...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("LoadProviders(%q) error %q does not mention %s", tt.input, err, s)
				}
			}
		})
	}
}

func TestEnvCredentials(t *testing.T) {
	env := map[string]string{"GLM_API_KEY": "sk-glm", "EMPTY_KEY": ""}
	creds := config.EnvCredentials{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}
	tests := []struct {
		name       string
		p          pilot.Provider
		wantInfo   config.Info
		wantSecret string
		wantErr    *pilot.CredentialError // nil: Secret succeeds
	}{
		{
			name:       "configured",
			p:          pilot.Provider{Name: "glm", CredentialEnv: "GLM_API_KEY"},
			wantInfo:   config.Info{Configured: true, Source: "env:GLM_API_KEY"},
			wantSecret: "sk-glm",
		},
		{
			name:     "missing",
			p:        pilot.Provider{Name: "kimi", CredentialEnv: "KIMI_API_KEY"},
			wantInfo: config.Info{Configured: false, Source: "env:KIMI_API_KEY"},
			wantErr:  &pilot.CredentialError{Provider: "kimi", Env: "KIMI_API_KEY"},
		},
		{
			name:     "set but empty",
			p:        pilot.Provider{Name: "e", CredentialEnv: "EMPTY_KEY"},
			wantInfo: config.Info{Configured: false, Source: "env:EMPTY_KEY"},
			wantErr:  &pilot.CredentialError{Provider: "e", Env: "EMPTY_KEY"},
		},
		{
			name:     "no credential needed",
			p:        pilot.Provider{Name: "local"},
			wantInfo: config.Info{Configured: true, Source: "none"},
		},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := creds.Info(ctx, tt.p)
			if err != nil {
				t.Fatalf("Info: %v", err)
			}
			if diff := cmp.Diff(tt.wantInfo, info); diff != "" {
				t.Errorf("Info mismatch (-want +got):\n%s", diff)
			}

			sec, err := creds.Secret(ctx, tt.p)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Secret: %v", err)
				}
				if got := sec; got != tt.wantSecret {
					t.Errorf("Secret() = %q; want %q", got, tt.wantSecret)
				}
				return
			}
			var ce *pilot.CredentialError
			if !errors.As(err, &ce) {
				t.Fatalf("Secret error = %T; want *pilot.CredentialError", err)
			}
			if diff := cmp.Diff(tt.wantErr, ce); diff != "" {
				t.Errorf("CredentialError mismatch (-want +got):\n%s", diff)
			}
			if got := sec; got != "" {
				t.Errorf("Secret with an error revealed %q; want empty", got)
			}
		})
	}
}

func TestEnvCredentialsProcessEnv(t *testing.T) {
	const key = "PILOT_TEST_PROVIDER_CREDENTIAL"
	t.Setenv(key, "from-process-env")
	p := pilot.Provider{Name: "p", CredentialEnv: key}
	var creds config.EnvCredentials // the zero value reads the process environment
	info, err := creds.Info(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(config.Info{Configured: true, Source: "env:" + key}, info); diff != "" {
		t.Errorf("Info mismatch (-want +got):\n%s", diff)
	}
	sec, err := creds.Secret(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got := sec; got != "from-process-env" {
		t.Errorf("Secret() = %q; want %q", got, "from-process-env")
	}
}

func FuzzParseProviders(f *testing.F) {
	f.Add([]byte(validProviders))
	f.Add([]byte(`{"providers": {}}`))
	f.Add([]byte(`{"providers": {"a": {"runner": "command", "argv": ["x"]}}}`))
	f.Add([]byte(`{"providers": {"a": {"runner": "x", "argv": [], "env": {}}}}`))
	f.Add([]byte(`{"providers": {"a": {"runner": "x", "credential_env": "K", "env": {"K": "v"}}}}`))
	f.Add([]byte(`{"providers": {"a": {"runner": "command"}}}`))
	f.Add([]byte(`{"providers": {"a": null, "b": {"runner": "y"}}}`))
	f.Add([]byte(`{"providers": {}, "extra": 1}`))
	f.Add([]byte(`{"providers": {}}}`))
	f.Add([]byte(`{"providers": []}`))
	f.Add([]byte(`{"providers":`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const name = "fuzz.json"
		reg, err := config.ParseProviders(bytes.NewReader(data), name)
		if err != nil {
			if reg != nil {
				t.Fatalf("ParseProviders returned a registry with error %v", err)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		names := reg.Names()
		if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
			t.Fatalf("Names() = %q; want sorted and unique", names)
		}
		for _, n := range names {
			want, ok := reg.Lookup(n)
			if !ok {
				t.Fatalf("Lookup(%q) = false for a name from Names", n)
			}
			if want.Name != n {
				t.Fatalf("Lookup(%q).Name = %q", n, want.Name)
			}
			if want.Runner == "" || (want.Runner == "command") != (len(want.Argv) > 0) {
				t.Fatalf("Lookup(%q) = %+v: an invalid provider was accepted", n, want)
			}
			got, _ := reg.Lookup(n)
			for i := range got.Argv {
				got.Argv[i] += "-mutated"
			}
			for k := range got.Env {
				got.Env[k] += "-mutated"
			}
			if got.Env != nil {
				got.Env["PILOT_FUZZ_MUTATED"] = "1"
			}
			again, _ := reg.Lookup(n)
			if diff := cmp.Diff(want, again); diff != "" {
				t.Fatalf("changing Lookup's result changed the registry (-want +got):\n%s", diff)
			}
		}

		// What the registry holds, written back out, parses to the same
		// registry.
		ps := registryProviders(t, reg)
		again, err := config.ParseProviders(bytes.NewReader(marshalProviders(t, ps)), name)
		if err != nil {
			t.Fatalf("re-parsing %+v: %v", ps, err)
		}
		if diff := cmp.Diff(ps, registryProviders(t, again), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip mismatch (-want +got):\n%s", diff)
		}
	})
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
		{"a comma too many", "{\"providers\": {\n  \"glm\": {\"runner\": \"pi\"},\n}}", []string{"invalid JSON at line 3, column 1", "invalid character '}'"}},
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
	// qwen     qwen
}
