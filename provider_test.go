package pilot_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
)

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

func TestNewRegistryErrors(t *testing.T) {
	ok := pilot.Provider{Name: "glm", Runner: "command", Argv: []string{"glm-agent"}}
	tests := []struct {
		name string
		ps   []pilot.Provider
	}{
		{name: "duplicate", ps: []pilot.Provider{ok, ok}},
		{name: "duplicate with different settings", ps: []pilot.Provider{ok, {Name: "glm", Runner: "kimi"}}},
		{name: "no name", ps: []pilot.Provider{{Runner: "kimi"}}},
		{name: "no runner", ps: []pilot.Provider{{Name: "glm"}}},
		{name: "command without argv", ps: []pilot.Provider{{Name: "glm", Runner: "command"}}},
		{name: "argv on another runner", ps: []pilot.Provider{{Name: "glm", Runner: "kimi", Argv: []string{"a"}}}},
		{name: "bad credential_env", ps: []pilot.Provider{{Name: "glm", Runner: "kimi", CredentialEnv: "A-B"}}},
		{name: "env sets credential", ps: []pilot.Provider{{Name: "glm", Runner: "kimi", CredentialEnv: "K", Env: map[string]string{"K": "v"}}}},
		{name: "bad env key", ps: []pilot.Provider{{Name: "glm", Runner: "kimi", Env: map[string]string{"": "v"}}}},
		{name: "one bad among good", ps: []pilot.Provider{ok, {Name: "kimi"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := pilot.NewRegistry(tt.ps...)
			if err == nil {
				t.Fatalf("NewRegistry(%+v) = %v, nil; want an error", tt.ps, reg.Names())
			}
			if reg != nil {
				t.Errorf("NewRegistry(%+v) returned a registry with an error", tt.ps)
			}
		})
	}
}

func TestRegistryCopies(t *testing.T) {
	in := pilot.Provider{
		Name:   "glm",
		Runner: "command",
		Argv:   []string{"glm-agent", "{task_file}"},
		Env:    map[string]string{"K": "v"},
	}
	want := pilot.Provider{
		Name:   "glm",
		Runner: "command",
		Argv:   []string{"glm-agent", "{task_file}"},
		Env:    map[string]string{"K": "v"},
	}
	reg, err := pilot.NewRegistry(in)
	if err != nil {
		t.Fatal(err)
	}

	// Changing the caller's value after NewRegistry does not reach the
	// registry.
	in.Argv[0] = "changed"
	in.Env["K"] = "changed"
	in.Env["NEW"] = "x"

	// Neither does changing what Lookup returned.
	got, _ := reg.Lookup("glm")
	got.Argv[0] = "changed"
	got.Argv = append(got.Argv, "more")
	got.Env["K"] = "changed"
	got.Env["NEW"] = "x"

	again, ok := reg.Lookup("glm")
	if !ok {
		t.Fatal(`Lookup("glm") = false`)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("registry changed through a copy (-want +got):\n%s", diff)
	}
}

func TestRegistryEmpty(t *testing.T) {
	empty, err := pilot.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := config.ParseProviders(strings.NewReader(`{"providers": {}}`), "empty.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, reg := range map[string]*pilot.Registry{"nil": nil, "NewRegistry()": empty, "empty file": fromFile} {
		if got := reg.Names(); len(got) != 0 {
			t.Errorf("%s: Names() = %q; want none", name, got)
		}
		if p, ok := reg.Lookup("glm"); ok || !cmp.Equal(pilot.Provider{}, p) {
			t.Errorf("%s: Lookup(%q) = %+v, %v; want zero, false", name, "glm", p, ok)
		}
	}
}

func TestModeValid(t *testing.T) {
	tests := []struct {
		mode pilot.Mode
		want bool
	}{
		{pilot.ModeCode, true},
		{pilot.ModeExplore, true},
		{pilot.ModeTest, true},
		{pilot.ModeReview, true},
		{pilot.ModeResume, true},
		{"", false},
		{"Code", false},
		{"code ", false},
		{"deploy", false},
	}
	for _, tt := range tests {
		if got := pilot.ModeValid(tt.mode); got != tt.want {
			t.Errorf("Mode(%q).Valid() = %v; want %v", tt.mode, got, tt.want)
		}
	}
	for _, m := range []pilot.Mode{pilot.ModeCode, pilot.ModeExplore, pilot.ModeTest, pilot.ModeReview, pilot.ModeResume} {
		if !pilot.ModeValid(m) {
			t.Errorf("Mode(%q) from Modes is not Valid", m)
		}
	}
}

func TestCredentialError(t *testing.T) {
	var err error = &pilot.CredentialError{Provider: "glm", Env: "GLM_API_KEY"}
	wrapped := fmt.Errorf("dispatching: %w", err)
	for _, e := range []error{err, wrapped} {
		if errors.Is(e, io.EOF) {
			t.Errorf("errors.Is(%v, io.EOF) = true; want false", e)
		}
		var ce *pilot.CredentialError
		if !errors.As(e, &ce) || ce.Provider != "glm" || ce.Env != "GLM_API_KEY" {
			t.Errorf("errors.As(%v) = %+v; want the CredentialError for glm", e, ce)
		}
	}
	// The message tells the user which variable to set.
	for _, s := range []string{"glm", "GLM_API_KEY"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Error() = %q; want it to mention %s", err, s)
		}
	}
}
