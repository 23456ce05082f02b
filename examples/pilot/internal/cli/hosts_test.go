package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostHome isolates every host's config dir and pilot's data dir.
func hostHome(t *testing.T) map[string]string {
	t.Helper()
	d := t.TempDir()
	dirs := map[string]string{
		"claude":   filepath.Join(d, "claude"),
		"codex":    filepath.Join(d, "codex"),
		"opencode": filepath.Join(d, "xdg", "opencode"),
		"gemini":   filepath.Join(d, "gemini-home", ".gemini"),
		"pi":       filepath.Join(d, "pi"),
	}
	t.Setenv("CLAUDE_CONFIG_DIR", dirs["claude"])
	t.Setenv("CODEX_HOME", dirs["codex"])
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(d, "xdg"))
	t.Setenv("GEMINI_CLI_HOME", filepath.Join(d, "gemini-home"))
	t.Setenv("PI_CODING_AGENT_DIR", dirs["pi"])
	t.Setenv("XDG_DATA_HOME", filepath.Join(d, "data"))
	return dirs
}

func TestInstallOnEveryHostHonoursItsConfigDir(t *testing.T) {
	dirs := hostHome(t)
	want := map[string]string{
		"claude":   "skills/pilot-glm/SKILL.md",
		"codex":    "skills/pilot-glm/SKILL.md",
		"opencode": "skills/pilot-glm/SKILL.md",
		"gemini":   "skills/pilot-glm/SKILL.md",
		"pi":       "skills/pilot-glm/SKILL.md",
	}
	for h, rel := range want {
		code, out, errOut := runCLI("install", "glm", "on", h)
		path := filepath.Join(dirs[h], filepath.FromSlash(rel))
		if code != 0 || !strings.Contains(out, path+": written") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %s written", h, code, out, errOut, path)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, must := range []string{"pilot-glm", `pilot dispatch --provider glm --mode code`, "session-stall", "143", "Never kill pilot", "--max-failures"} {
			if !strings.Contains(text, must) {
				t.Errorf("%s's integration lacks %q", h, must)
			}
		}
		if !strings.HasPrefix(text, "---\nname: pilot-glm\ndescription: \"Hand a bounded coding task") || strings.Contains(text, "$ARGUMENTS") {
			t.Errorf("%s skill's frontmatter:\n%s", h, text)
		}
		if h == "gemini" {
			cmd := filepath.Join(dirs[h], "commands", "pilot", "glm.toml")
			data, err := os.ReadFile(cmd)
			if text := string(data); err != nil || !strings.HasPrefix(text, "description = \"") || !strings.Contains(text, "prompt = \"\"\"") || !strings.Contains(text, "{{args}}") {
				t.Errorf("gemini's command %s (%v):\n%s", cmd, err, text)
			}
		}
	}
	m, err := readManifest()
	if err != nil || len(m.Files) != 6 {
		t.Errorf("manifest %+v, %v; want the 6 files", m, err)
	}
}

func TestInstallIsIdempotentAndUninstallRemovesOnlyItsOwn(t *testing.T) {
	dirs := hostHome(t)
	skill := filepath.Join(dirs["claude"], "skills", "pilot-glm", "SKILL.md")
	if code, _, errOut := runCLI("install", "glm", "on", "claude"); code != 0 {
		t.Fatalf("install: %d %s", code, errOut)
	}
	before, _ := os.ReadFile(skill)
	st1, _ := os.Stat(skill)
	code, out, _ := runCLI("install", "glm", "on", "claude")
	st2, _ := os.Stat(skill)
	if code != 0 || !strings.Contains(out, "unchanged") || !st1.ModTime().Equal(st2.ModTime()) {
		t.Errorf("second install: exit %d, %q; the file changed: %v", code, out, !st1.ModTime().Equal(st2.ModTime()))
	}
	// A changed provider updates its file.
	pf := filepath.Join(t.TempDir(), "providers.json")
	os.WriteFile(pf, []byte(`{"providers":{"glm":{"runner":"opencode","model":"zai-coding-plan/glm-6","credential_env":"ZHIPU_API_KEY"}}}`), 0o644)
	code, out, _ = runCLI("install", "glm", "on", "claude", "--providers-file", pf)
	after, _ := os.ReadFile(skill)
	if code != 0 || !strings.Contains(out, "updated") || string(after) == string(before) || !strings.Contains(string(after), "glm-6") {
		t.Errorf("changed provider: exit %d, %q", code, out)
	}
	// A file the user edited since is left on both install and uninstall.
	os.WriteFile(skill, append(after, "\nmy own note\n"...), 0o644)
	if _, out, _ := runCLI("install", "glm", "on", "claude"); !strings.Contains(out, "left alone: edited since pilot wrote it") {
		t.Errorf("install over an edit: %q", out)
	}
	if _, out, _ := runCLI("uninstall", "glm", "on", "claude"); !strings.Contains(out, "left alone: edited since") {
		t.Errorf("uninstall of an edit: %q", out)
	}
	if data, _ := os.ReadFile(skill); !strings.Contains(string(data), "my own note") {
		t.Error("the user's edit is gone")
	}
	// A file pilot did not write is never touched.
	other := filepath.Join(dirs["claude"], "skills", "pilot-kimi-k3", "SKILL.md")
	os.MkdirAll(filepath.Dir(other), 0o755)
	os.WriteFile(other, []byte("mine\n"), 0o644)
	if _, out, _ := runCLI("install", "kimi-k3", "on", "claude"); !strings.Contains(out, "left alone: the file exists and pilot did not write it") {
		t.Errorf("install over a file of the user's: %q", out)
	}
	if _, out, _ := runCLI("uninstall", "kimi-k3", "on", "claude"); !strings.Contains(out, "left alone: pilot did not write it") {
		t.Errorf("uninstall of a file of the user's: %q", out)
	}
	if data, _ := os.ReadFile(other); string(data) != "mine\n" {
		t.Errorf("the user's file became %q", data)
	}
	// Unedited: uninstall removes the file and its skill directory.
	os.WriteFile(skill, after, 0o644)
	code, out, _ = runCLI("uninstall", "glm", "on", "claude", "--dry-run")
	if _, err := os.Stat(skill); err != nil || !strings.Contains(out, "would be removed") {
		t.Errorf("dry-run uninstall: exit %d %q, %v", code, out, err)
	}
	code, out, _ = runCLI("uninstall", "glm", "on", "claude")
	if _, err := os.Stat(filepath.Dir(skill)); code != 0 || !os.IsNotExist(err) || !strings.Contains(out, "removed") {
		t.Errorf("uninstall: exit %d %q; the skill dir: %v", code, out, err)
	}
	m, _ := readManifest()
	for _, e := range m.Files {
		if e.Path == skill {
			t.Errorf("the manifest still lists %s", skill)
		}
	}
}

func TestInstallDryRunAndProjectScope(t *testing.T) {
	dirs := hostHome(t)
	code, out, _ := runCLI("install", "glm", "on", "pi", "--dry-run")
	if code != 0 || !strings.Contains(out, "would be written") {
		t.Errorf("dry run: exit %d %q", code, out)
	}
	if _, err := os.Stat(dirs["pi"]); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote: %v", err)
	}
	if _, err := os.Stat(manifestPath()); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote the manifest: %v", err)
	}
	proj := t.TempDir()
	code, out, errOut := runCLI("install", "glm", "on", "gemini", "--scope", "project", "--project-dir", proj)
	want := filepath.Join(proj, ".gemini", "commands", "pilot", "glm.toml")
	if _, err := os.Stat(want); code != 0 || err != nil {
		t.Errorf("project scope: exit %d %q %q; %v", code, out, errOut, err)
	}
	for _, bad := range [][]string{
		{"install", "glm", "on", "vim"}, {"install", "nobody", "on", "claude"}, {"install", "glm", "on", "claude", "--scope", "team"}, {"install", "glm", "claude"},
	} {
		if code, _, errOut := runCLI(bad...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and why", bad, code, errOut)
		}
	}
}

func TestInstallAllMeansConfiguredProvidersOnHostsFound(t *testing.T) {
	hostHome(t)
	bin := t.TempDir()
	for _, h := range []string{"claude", "pi"} {
		os.WriteFile(filepath.Join(bin, h), []byte("#!/bin/sh\n"), 0o755)
	}
	t.Setenv("PATH", bin)
	t.Setenv("ZHIPU_API_KEY", "sk-test")
	for _, k := range []string{"ANTHROPIC_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "MOONSHOT_API_KEY"} {
		t.Setenv(k, "")
	}
	code, out, errOut := runCLI("install", "all", "on", "all")
	if code != 0 {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	m, _ := readManifest()
	got := map[string]bool{}
	for _, e := range m.Files {
		got[e.Host+"/"+e.Provider] = true
	}
	for _, want := range []string{"claude/glm", "pi/glm", "claude/pi", "pi/pi"} {
		if !got[want] {
			t.Errorf("install all did not cover %s; got %v", want, got)
		}
	}
	for k := range got {
		if strings.HasPrefix(k, "codex/") || strings.HasPrefix(k, "gemini/") || strings.HasSuffix(k, "/kimi-k3") || strings.HasSuffix(k, "/claude") {
			t.Errorf("install all covered %s: no such host on PATH, or no credential", k)
		}
	}
	data, _ := json.Marshal(m)
	if strings.Contains(string(data), "sk-test") {
		t.Error("the manifest holds a secret")
	}
}
