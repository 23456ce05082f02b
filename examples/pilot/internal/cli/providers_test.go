package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/templates"
)

// configHome gives the test a config dir of its own and returns the
// credentials dir under it.
func configHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	return filepath.Join(dir, "pilot", "credentials")
}

// storeCredential writes a credential file directly, with mode perm.
func storeCredential(t *testing.T, dir, provider, secret string, perm os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, provider)
	if err := os.WriteFile(path, []byte(secret+"\n"), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

func providersJSON(t *testing.T, args ...string) map[string]providerStatus {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"providers", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("pilot providers --json: exit %d, stderr %q", code, errOut)
	}
	var list []providerStatus
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("pilot providers --json: %v\n%s", err, out)
	}
	byName := map[string]providerStatus{}
	for _, st := range list {
		byName[st.Name] = st
	}
	return byName
}

func TestProvidersListsBuiltinsWithTheFileOverThem(t *testing.T) {
	credDir := configHome(t)
	f := newFixture(t, nil)
	writeProviders(t, f.providers, map[string]map[string]any{
		"glm":   {"runner": "opencode", "model": "zai-coding-plan/glm-4.7", "credential_env": "PILOT_TEST_GLM_KEY"},
		"local": {"runner": "codex", "model": "my-model", "base_url": "http://127.0.0.1:8080/v1", "credential_env": "PILOT_TEST_LOCAL_KEY"},
	})
	t.Setenv("PILOT_TEST_GLM_KEY", "")
	t.Setenv("PILOT_TEST_LOCAL_KEY", "sk-local-secret-value")
	for _, k := range []string{"MOONSHOT_API_KEY", "ANTHROPIC_API_KEY"} {
		t.Setenv(k, "")
	}
	storeCredential(t, credDir, "kimi-k3", "sk-kimi-secret-value", 0o600)
	claude := storeCredential(t, credDir, "claude", "sk-claude-secret-value", 0o644)

	want := map[string]providerStatus{
		"claude": {Name: "claude", Runner: "claude", CredentialEnv: "ANTHROPIC_API_KEY", From: "built-in",
			Info: config.Info{Source: "file:" + claude}},
		"codex": {Name: "codex", Runner: "codex", CredentialEnv: "CODEX_API_KEY", From: "built-in",
			Info: config.Info{Source: "env:CODEX_API_KEY, file:" + filepath.Join(credDir, "codex")}},
		"gemini": {Name: "gemini", Runner: "gemini", CredentialEnv: "GEMINI_API_KEY", From: "built-in",
			Info: config.Info{Source: "env:GEMINI_API_KEY, file:" + filepath.Join(credDir, "gemini")}},
		"glm": {Name: "glm", Runner: "opencode", Model: "zai-coding-plan/glm-4.7", CredentialEnv: "PILOT_TEST_GLM_KEY", From: f.providers,
			Info: config.Info{Source: "env:PILOT_TEST_GLM_KEY, file:" + filepath.Join(credDir, "glm")}},
		"kimi-k3": {Name: "kimi-k3", Runner: "opencode", Model: "moonshotai/kimi-k3", CredentialEnv: "MOONSHOT_API_KEY", From: "built-in",
			Info: config.Info{Configured: true, SecureMode: true, Source: "file:" + filepath.Join(credDir, "kimi-k3")}},
		"local": {Name: "local", Runner: "codex", Model: "my-model", BaseURL: "http://127.0.0.1:8080/v1", CredentialEnv: "PILOT_TEST_LOCAL_KEY", From: f.providers,
			Info: config.Info{Configured: true, Source: "env:PILOT_TEST_LOCAL_KEY"}},
		"pi":   {Name: "pi", Runner: "pi", From: "built-in", Info: config.Info{Configured: true, Source: "none"}},
		"qwen": {Name: "qwen", Runner: "qwen", From: "built-in", Info: config.Info{Configured: true, Source: "none"}},
	}
	// No agent CLI on PATH here: each provider's binary is its runner's
	// name, not found.
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	got := providersJSON(t, "--providers-file", f.providers)
	// A provider whose CLI is missing cannot run: not configured, whatever
	// its credential, and the error says what to do.
	for name, w := range want {
		w.Binary, w.BinaryFrom = w.Runner, "PATH"
		w.CredentialConfigured = w.Configured
		if w.Configured {
			w.Configured = false
			w.Error = "its CLI " + w.Runner + " is not found on PATH: install it, or run: pilot install runner " + w.Runner
		}
		want[name] = w
	}
	// The CODEX_API_KEY and GEMINI_API_KEY of whoever runs the tests.
	for _, name := range []string{"codex", "gemini"} {
		if st := got[name]; st.Configured {
			w := want[name]
			w.Info = st.Info
			want[name] = w
		}
	}
	errText := got["claude"].Error
	for _, s := range []string{claude, "0644", "chmod 600 " + claude} {
		if !strings.Contains(errText, s) {
			t.Errorf("claude's error %q does not mention %q", errText, s)
		}
	}
	c := got["claude"]
	c.Error = ""
	got["claude"] = c
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pilot providers --json (-want +got):\n%s", diff)
	}

	code, out, _ := runCLI("providers", "--providers-file", f.providers, "--wide")
	if code != 0 {
		t.Fatalf("pilot providers --wide: exit %d", code)
	}
	for _, s := range []string{"NAME", "RUNNER", "MODEL", "CONFIGURED", "SECURE", "SOURCE",
		"my-model at http://127.0.0.1:8080/v1", "refused", "chmod 600 " + claude} {
		if !strings.Contains(out, s) {
			t.Errorf("pilot providers --wide does not show %q:\n%s", s, out)
		}
	}
	wideOut := out
	// Without --wide the table fits 100 columns: name, runner, model,
	// credential variable, whether it is ready, and its CLI.
	code, out, _ = runCLI("providers", "--providers-file", f.providers)
	table, notes, _ := strings.Cut(out, "\n\n")
	for _, l := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	if code != 0 || !strings.HasPrefix(table, "NAME") || !strings.Contains(table, "READY") || !strings.Contains(table, "refused") ||
		!strings.Contains(notes, "chmod 600 "+claude) || strings.Contains(table, "SOURCE") {
		t.Errorf("pilot providers: exit %d:\n%s", code, out)
	}
	out = wideOut + out
	for _, secret := range []string{"sk-local-secret-value", "sk-kimi-secret-value", "sk-claude-secret-value"} {
		if strings.Contains(out, secret) {
			t.Errorf("pilot providers shows a secret value:\n%s", out)
		}
	}
}

func TestProvidersDefaultFile(t *testing.T) {
	configHome(t)
	// No providers file at all: the built-ins alone.
	got := providersJSON(t)
	if len(got) != len(agents.Providers()) || got["glm"].From != "built-in" {
		t.Errorf("without a providers file: %+v", got)
	}
	// The default file adds to them.
	path := config.DefaultProvidersFile()
	os.MkdirAll(filepath.Dir(path), 0o700)
	writeProviders(t, path, map[string]map[string]any{"mine": {"runner": "pi", "model": "m"}})
	got = providersJSON(t)
	if st := got["mine"]; st.Runner != "pi" || st.From != path {
		t.Errorf("mine = %+v, want it from %s", st, path)
	}
	// $PILOT_PROVIDERS_FILE replaces the default file, and must exist.
	other := filepath.Join(t.TempDir(), "other.json")
	writeProviders(t, other, map[string]map[string]any{"theirs": {"runner": "pi"}})
	t.Setenv(envProvidersFile, other)
	got = providersJSON(t)
	if _, ok := got["mine"]; ok || got["theirs"].From != other {
		t.Errorf("with $%s: %+v", envProvidersFile, got)
	}
	t.Setenv(envProvidersFile, other+".missing")
	if code, _, errOut := runCLI("providers"); code != 2 || !strings.Contains(errOut, other+".missing") {
		t.Errorf("missing $%s: exit %d, stderr %q", envProvidersFile, code, errOut)
	}
}

func TestTemplate(t *testing.T) {
	for _, m := range []pilot.Mode{pilot.ModeCode, pilot.ModeExplore, pilot.ModeTest, pilot.ModeReview} {
		want, err := templates.For(m)
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI("template", string(m))
		if code != 0 || out != want || errOut != "" {
			t.Errorf("pilot template %s: exit %d, stderr %q, stdout:\n%s", m, code, errOut, out)
		}
	}
	code, out, errOut := runCLI("template", "resume")
	if code != 2 || out != "" || !strings.Contains(errOut, "code, explore, test, review") {
		t.Errorf("pilot template resume: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestCredentialsStoresTheSecretFromStdin(t *testing.T) {
	credDir := configHome(t)
	f := newFixture(t, nil)
	worker := fakeProvider(t, "printenv=PILOT_TEST_WORKER_KEY", "out=done")
	worker["credential_env"] = "PILOT_TEST_WORKER_KEY"
	writeProviders(t, f.providers, map[string]map[string]any{"worker": worker})
	t.Setenv("PILOT_TEST_WORKER_KEY", "")
	const secret = "sk-stored-secret-0123456789"

	// Nothing configured: the dispatch is refused before anything runs.
	if code, _, errOut := runCLI(f.args("dispatch", "worker")...); code != 2 || !strings.Contains(errOut, "pilot credentials worker") {
		t.Fatalf("dispatch without a credential: exit %d, stderr %q", code, errOut)
	}

	code, out, errOut := runCLIWithInput(secret+"\n", "credentials", "worker", "--providers-file", f.providers)
	path := filepath.Join(credDir, "worker")
	if code != 0 || !strings.Contains(out, path) || strings.Contains(out+errOut, secret) {
		t.Fatalf("pilot credentials worker: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != secret+"\n" {
		t.Fatalf("stored file holds %q (%v), want the secret and a newline", data, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, credDir: 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %#o", p, st.Mode().Perm(), err, want)
		}
	}
	entries, _ := os.ReadDir(credDir)
	if len(entries) != 1 {
		t.Errorf("credentials dir holds %d entries, want only the stored file (no temporary left)", len(entries))
	}

	code, out, _ = runCLI("credentials", "worker", "--status", "--providers-file", f.providers)
	want := `{"provider":"worker","configured":true,"secure_mode":true,"source":"file:` + path + `"}`
	if code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("--status after storing: exit %d, stdout %s\nwant %s", code, out, want)
	}

	// The worker gets it in its credential variable (and pilot redacts it
	// from the output it streams).
	code, out, errOut = runCLI(f.args("run", "worker")...)
	if code != 0 || !strings.Contains(out, "PILOT_TEST_WORKER_KEY=[REDACTED]\n") || strings.Contains(out, secret) {
		t.Errorf("run with the stored credential: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Storing again replaces it; a key in the environment still wins, and
	// the command says so.
	code, _, errOut = runCLIWithInput("sk-second-secret-value", "credentials", "worker", "--providers-file", f.providers)
	if data, _ := os.ReadFile(path); code != 0 || string(data) != "sk-second-secret-value\n" {
		t.Errorf("storing again: exit %d, file %q", code, data)
	}
	t.Setenv("PILOT_TEST_WORKER_KEY", "sk-from-environment")
	code, _, errOut = runCLIWithInput(secret, "credentials", "worker", "--providers-file", f.providers)
	if code != 0 || !strings.Contains(errOut, "PILOT_TEST_WORKER_KEY is set in this environment") {
		t.Errorf("storing with the variable set: exit %d, stderr %q", code, errOut)
	}
}

func TestCredentialsRefusals(t *testing.T) {
	credDir := configHome(t)
	f := newFixture(t, nil)
	writeProviders(t, f.providers, map[string]map[string]any{
		"worker": {"runner": "command", "argv": []string{"x"}, "credential_env": "PILOT_TEST_WORKER_KEY"},
	})
	const secret = "sk-refused-secret-0123456789"
	tests := []struct {
		name  string
		input string
		args  []string
		want  []string
	}{
		{"empty stdin", "", []string{"worker"}, []string{"no secret on stdin", "--status"}},
		{"only a newline", "\n", []string{"worker"}, []string{"no secret on stdin"}},
		{"two lines", secret + "\n" + secret + "\n", []string{"worker"}, []string{"line break"}},
		{"a NUL byte", secret + "\x00", []string{"worker"}, []string{"NUL"}},
		{"no credential needed", secret, []string{"pi"}, []string{"pi needs no credential", "credential_env"}},
		{"unknown provider", secret, []string{"nope"}, []string{"unknown provider: nope"}},
		{"stray argument", secret, []string{"worker", "extra"}, []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"credentials"}, tt.args...), "--providers-file", f.providers)
			code, out, errOut := runCLIWithInput(tt.input, args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not mention %q", errOut, w)
				}
			}
			if strings.Contains(errOut, secret) {
				t.Errorf("stderr %q holds the secret", errOut)
			}
			if _, err := os.Stat(credDir); err == nil {
				t.Errorf("%s exists: something was stored", credDir)
			}
		})
	}
}

func TestInsecureCredentialFileIsRefusedBeforeAnythingRuns(t *testing.T) {
	credDir := configHome(t)
	f := newFixture(t, nil)
	marker := filepath.Join(f.dir, "worker-ran")
	worker := fakeProvider(t, "session="+marker, "sess=ran", "out=done")
	worker["credential_env"] = "PILOT_TEST_WORKER_KEY"
	writeProviders(t, f.providers, map[string]map[string]any{"worker": worker})
	t.Setenv("PILOT_TEST_WORKER_KEY", "")
	const secret = "sk-world-readable-0123456789"
	path := storeCredential(t, credDir, "worker", secret, 0o644)

	for _, args := range [][]string{
		f.args("dispatch", "worker"),
		f.fanoutArgs("--job", "worker:review:"+f.taskFile),
		{"credentials", "worker", "--status", "--providers-file", f.providers},
	} {
		code, _, errOut := runCLI(args...)
		if code == 0 {
			t.Errorf("pilot %s: exit 0 with a world-readable credential file", args[0])
		}
		for _, s := range []string{path, "0644", "chmod 600 " + path} {
			if !strings.Contains(errOut, s) {
				t.Errorf("pilot %s: stderr %q does not mention %q", args[0], errOut, s)
			}
		}
		if strings.Contains(errOut, secret) {
			t.Errorf("pilot %s: stderr holds the secret", args[0])
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a worker ran with a refused credential file")
	}
	// The fix the message gives works.
	os.Chmod(path, 0o600)
	if code, out, errOut := runCLI(f.args("dispatch", "worker")...); code != 0 {
		t.Errorf("after chmod 600: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A misspelled runner is an error when the providers file is read, naming
// the runner meant and every runner; no "install a CLI called claud".
func TestAMisspelledRunnerIsRefusedAtLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "providers.json")
	os.WriteFile(file, []byte(`{"providers": {"x": {"runner": "claud"}, "y": {"runner": "nonsense"}}}`), 0o644)
	for _, args := range [][]string{
		{"providers", "--providers-file", file},
		{"doctor", "--providers-file", file},
		{"dispatch", "--providers-file", file, "--provider", "x", "--mode", "review", "--task-file", file, "--workdir", t.TempDir()},
	} {
		code, _, errOut := runCLI(args...)
		for _, want := range []string{
			`provider x names runner "claud", which pilot does not have (did you mean "claude"?)`,
			`provider y names runner "nonsense", which pilot does not have;`,
			"the runners are command, pi, codex, claude, opencode, gemini",
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("pilot %s: exit %d, stderr %q; want %q in it", args[0], code, errOut, want)
			}
		}
		if code != 2 && code != 1 {
			t.Errorf("pilot %s: exit %d; want a failure", args[0], code)
		}
		if strings.Contains(errOut, "not found on PATH") {
			t.Errorf("pilot %s: stderr %q says to install a CLI named after the misspelling", args[0], errOut)
		}
	}
}

func TestClosest(t *testing.T) {
	names := []string{"command", "pi", "codex", "claude", "opencode", "gemini"}
	for in, want := range map[string]string{"claud": "claude", "Claude": "claude", "codx": "codex", "open-code": "opencode", "gemni": "gemini", "nonsense": "", "py": "pi"} {
		if got := closest(in, names); got != want {
			t.Errorf("closest(%q) = %q; want %q", in, got, want)
		}
	}
}
