//go:build unix

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctorSaysWhichProvidersCanRun(t *testing.T) {
	bin := t.TempDir()
	script := func(name, version string) {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho '"+version+"'\n"), 0o755)
	}
	script("opencode", "1.18.33")
	script("claude", "2.0.1 (Claude Code)")
	t.Setenv("PATH", bin)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	for k, v := range map[string]string{"ZHIPU_API_KEY": "sk-zhipu-1234567", "ANTHROPIC_API_KEY": "sk-ant-1234567", "CODEX_API_KEY": "sk-codex-1234567",
		"GEMINI_API_KEY": "", "MOONSHOT_API_KEY": ""} {
		t.Setenv(k, v)
	}
	code, out, errOut := runCLI("doctor", "--json", "--run-dir", filepath.Join(t.TempDir(), "not", "yet"))
	if code != exitFailed {
		t.Errorf("exit %d (stderr %q), want 1: codex has a credential and no CLI", code, errOut)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]doctorCheck{}
	for _, c := range rep.Providers {
		got[c.Provider] = c
	}
	if c := got["glm"]; c.Status != "ok" || c.Version != "1.18.33" || c.Tested != "1.18.33" || c.Problem != "" {
		t.Errorf("glm: %+v; want ok at the tested version", c)
	}
	if c := got["claude"]; c.Status != "ok" || !strings.Contains(c.Problem, "pilot is tested with 2.1.332") {
		t.Errorf("claude: %+v; want ok, with the version difference said", c)
	}
	if c := got["codex"]; c.Status != "cannot run" || c.BinaryFound || !strings.Contains(c.Problem, "pilot install runner codex") {
		t.Errorf("codex: %+v; want cannot run, with the fix", c)
	}
	if c := got["gemini"]; c.Status != "not configured" || c.Credential {
		t.Errorf("gemini: %+v; want not configured", c)
	}
	if c := got["pi"]; c.Status != "not installed" {
		t.Errorf("pi: %+v; want not installed (it needs no credential)", c)
	}
	if rep.Problems != 1 || rep.FreeBytes <= 0 {
		t.Errorf("problems %d, free %d; want 1 and the run dir's free space", rep.Problems, rep.FreeBytes)
	}
	for _, secret := range []string{"sk-zhipu-1234567", "sk-ant-1234567", "sk-codex-1234567"} {
		if strings.Contains(out, secret) {
			t.Errorf("doctor printed a secret")
		}
	}
	// The table says the same, and 'pilot providers' no longer calls codex
	// configured.
	if _, out, _ := runCLI("doctor"); !strings.Contains(out, "codex: its CLI codex is not found on PATH") || !strings.Contains(out, "free") {
		t.Errorf("doctor's table:\n%s", out)
	}
	if _, out, _ := runCLI("providers"); !strings.Contains(out, "no CLI") {
		t.Errorf("providers does not say codex has no CLI:\n%s", out)
	}
}
