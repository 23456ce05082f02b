package pilot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/pilotslog"
)

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The secret canary: for every runner, a worker whose CLI prints its own
// key (as an API error quoting it would), and another provider's key that
// pilot keeps in a credential file (as a worker that found it would),
// leaves neither in any file of its run directory (records, logs, the
// config files the runner wrote for an isolated or custom-endpoint
// worker), nor in any verdict field, and it never receives another
// provider's key, even when that key's variable is in the environment
// allowlist.
func TestSecretCanaryAcrossArtefacts(t *testing.T) {
	const victimKey = "canary-victim-6f1e9b2d-secret"
	const otherKey = "canary-other-a3c47e10-secret"
	const storedKey = "canary-stored-7d02c5b8-secret"
	for _, rn := range agents.Runners() {
		for _, setup := range []string{"plain", "isolated", "base_url"} {
			if rn.Name() == "command" && setup != "plain" {
				continue
			}
			t.Run(rn.Name()+"/"+setup, func(t *testing.T) {
				t.Parallel()
				victim := replayProvider(t, rn.Name(), filepath.Join(t.TempDir(), "nothing"))
				victim.Name, victim.Model, victim.CredentialEnv = "victim", "prov/m1", "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayEcho] = "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayFile] = "found-key"
				victim.Env[fakeagent.EnvReplayExit] = "1"
				if rn.Name() == "command" {
					victim.Argv = []string{victim.Binary, "--key-in-argv=" + victimKey}
					victim.Binary, victim.Model = "", ""
				}
				switch setup {
				case "isolated":
					victim.Isolated = true
				case "base_url":
					victim.BaseURL = "http://127.0.0.1:9/v1"
					if rn.Name() == agents.RunnerClaude {
						// Claude Code appends /v1/messages itself: its
						// base URL is the gateway's root.
						victim.BaseURL = "http://127.0.0.1:9"
					}
				}
				other := pilot.Provider{Name: "other", Runner: "command", Argv: []string{"true"}, CredentialEnv: "OTHER_KEY"}
				stored := pilot.Provider{Name: "stored", Runner: "command", Argv: []string{"true"}, CredentialEnv: "STORED_KEY"}
				d := testDispatcher(t, victim, other, stored)
				d.EnvAllow = append([]string{"OTHER_KEY"}, pilot.DefaultEnvAllow...)
				keys := map[string]string{"VICTIM_KEY": victimKey, "OTHER_KEY": otherKey, "PATH": os.Getenv("PATH")}
				d.LookupEnv = func(k string) (string, bool) { v, ok := keys[k]; return v, ok }
				d.Credentials = config.ChainCredentials{config.EnvCredentials{LookupEnv: d.LookupEnv}, storedCredential(t, "stored", storedKey)}
				// The worker prints the stored key from a file in its
				// workdir: however it got it, a sandbox or not.
				tk := pilot.Task{Provider: "victim", Mode: pilot.ModeCode, Prompt: "the task", Workdir: foundKeyDir(t, storedKey)}
				v, err := d.Dispatch(context.Background(), tk)
				if err != nil {
					t.Fatal(err) // every runner takes a custom endpoint
				}
				vj, _ := json.Marshal(v)
				if strings.Contains(string(vj), victimKey) || strings.Contains(string(vj), otherKey) || strings.Contains(string(vj), storedKey) {
					t.Errorf("the verdict holds a secret: %s", vj)
				}
				n, _ := noSecretIn(t, d.RunDir, victimKey, otherKey, storedKey)
				if n < 3 {
					t.Errorf("walked %d files in the run directory; want at least record, stream and events", n)
				}
				stream, _ := os.ReadFile(readRecord(t, v).StreamLog)
				if !strings.Contains(string(stream), "invalid api key: [REDACTED]") || !strings.Contains(string(stream), "read a key: [REDACTED]") {
					t.Errorf("stream.log does not show the redacted echoes:\n%s", stream)
				}
				call, _ := readCall(t, victim)
				got := false
				for _, kv := range call.Env {
					if strings.Contains(kv, otherKey) {
						t.Errorf("the worker received another provider's key: %s", kv)
					}
					if kv == "VICTIM_KEY="+victimKey {
						got = true
					}
				}
				if !got {
					t.Errorf("the worker did not receive its own key in VICTIM_KEY")
				}
				if rn.Name() != "command" && strings.Contains(strings.Join(call.Argv, " "), victimKey) {
					t.Errorf("the runner put the secret on the command line: %q", call.Argv)
				}
			})
		}
	}
}

// storedCredential is a credential file store in a temporary directory
// holding key as provider's credential.
func storedCredential(t *testing.T, provider, key string) config.FileCredentials {
	t.Helper()
	files := config.FileCredentials{Dir: filepath.Join(t.TempDir(), "credentials")}
	if _, err := files.Store(provider, key); err != nil {
		t.Fatal(err)
	}
	return files
}

// foundKeyDir is a workdir whose file found-key holds key, as a worker
// that found another provider's key would keep it, for the fake agent's
// EnvReplayFile to print.
func foundKeyDir(t *testing.T, key string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "found-key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// canaryFixture is a recorded successful stream of each agent CLI runner
// (testdata/RUNNER/stream/NAME); the command runner replays pi's.
var canaryFixture = map[string]string{
	agents.RunnerPi:       "testdata/pi/stream/parallel-tools-gen-b",
	agents.RunnerCodex:    "testdata/codex/stream/parallel-commands",
	agents.RunnerClaude:   "testdata/claude/stream/parallel-tools",
	agents.RunnerOpencode: "testdata/opencode/stream/parallel-tools",
	agents.RunnerGemini:   "testdata/gemini/stream/parallel-tools",
	agents.RunnerQwen:     "testdata/qwen/stream/e2e-two-tools",
	"command":             "testdata/pi/stream/parallel-tools-gen-b",
}

// The secret canary across everything: every built-in provider (and a
// command-runner one), each with a secret of its own, runs dispatches that
// succeed, fail, time out, stall and are cancelled, and then a fanout of
// all of them; the failing workers print their own key on stdout and
// stderr, and every worker prints the key of provider "stored", which
// pilot keeps in a credential file and which the worker found (the test
// leaves it in its workdir, as no sandbox matters here). Each secret may
// then appear in one place only: its own provider's worker environment,
// under its own variable. It must be in no file under the run directories,
// no event, no output line handed to OnLine, no verdict, no error, no
// other worker's environment, argv or stdin.
func TestSecretCanaryEverywhere(t *testing.T) {
	// Its subtests run in parallel: one check for them all, once they
	// have all ended (a check per subtest would see its siblings'
	// dispatches).
	checkGoroutines(t)
	// The run directories and the workers' call records live here, so
	// that they outlast the subtests for the search at the end.
	base := t.TempDir()
	keepDir := func(t *testing.T) string {
		dir, err := os.MkdirTemp(base, "")
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	provs := agents.Providers()
	for i := range provs {
		if provs[i].CredentialEnv == "" {
			// pi and qwen need none: give each one of its own.
			provs[i].CredentialEnv = strings.ToUpper(provs[i].Name) + "_CANARY_KEY"
		}
	}
	provs = append(provs, pilot.Provider{Name: "cmd", Runner: "command", Argv: []string{"true"}, CredentialEnv: "CMD_CANARY_KEY"})
	canary := map[string]string{} // provider → its secret
	// alsoAs is where each provider's runner puts its secret besides
	// its credential_env (Command.SecretEnv: qwen's OPENAI_API_KEY).
	alsoAs := map[string][]string{}
	for _, p := range provs {
		alsoAs[p.Name] = secretEnvOf(t, p)
	}
	secretOf := map[string]string{}
	for i, p := range provs {
		canary[p.Name] = fmt.Sprintf("canary-%s-%08x-secret", p.Name, 0x5eed0000+i)
		secretOf[p.CredentialEnv] = canary[p.Name]
	}
	// Provider stored is never dispatched: its key is in a credential
	// file, and in no environment.
	stored := pilot.Provider{Name: "stored", Runner: "command", Argv: []string{"true"}, CredentialEnv: "STORED_CANARY_KEY"}
	canary[stored.Name] = "canary-stored-5eedf11e-secret"
	storedFile := storedCredential(t, stored.Name, canary[stored.Name])
	lookup := func(k string) (string, bool) {
		if v, ok := secretOf[k]; ok {
			return v, true
		}
		if k == "PATH" {
			return os.LookupEnv(k)
		}
		return "", false
	}
	var (
		mu          sync.Mutex
		texts       []string // events, lines, verdicts, errors: searched for every canary
		calls       []string // call.json files, one per worker
		runDirs     []string
		outcomes    = map[string]int{}
		inspections int
	)
	// Every event also goes through the slog adapter, at every level, as
	// JSON: its output is searched with the rest.
	var slogOut lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&slogOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	logEvent := pilotslog.Observer(logger)
	note := func(what string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Errorf("%s does not marshal: %v", what, err)
		}
		mu.Lock()
		texts = append(texts, what+": "+string(data))
		mu.Unlock()
	}
	// provider returns p set up as a replaying fake agent for outcome.
	provider := func(t *testing.T, p pilot.Provider, outcome string) pilot.Provider {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		// Success replays a recorded successful stream; the others
		// print only the key (as an auth error quoting it would) and
		// fail, hang past the timeout, or hang silent.
		prefix, err := filepath.Abs(canaryFixture[p.Runner])
		if err != nil {
			t.Fatal(err)
		}
		if outcome != "success" {
			prefix = filepath.Join(t.TempDir(), "nothing")
		}
		call := filepath.Join(keepDir(t), "call.json")
		mu.Lock()
		calls = append(calls, p.Name+" "+call)
		mu.Unlock()
		p.Env = map[string]string{
			fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0",
			fakeagent.EnvReplay: prefix, fakeagent.EnvCallOut: call,
		}
		if p.Runner == "command" {
			p.Argv = []string{exe, "{prompt}"}
		} else {
			p.Binary = exe
		}
		if outcome != "success" {
			p.Env[fakeagent.EnvReplayEcho] = p.CredentialEnv
		}
		p.Env[fakeagent.EnvReplayFile] = "found-key" // stored's key, in the workdir
		switch outcome {
		case "failure":
			p.Env[fakeagent.EnvReplayExit] = "1"
		case "auth":
			// A provider's refusal quoting the key: the line is the
			// verdict's evidence, and so goes to every consumer of
			// the verdict (the slog adapter's evidence attribute).
			p.Env[fakeagent.EnvReplayLine] = "Error: 401 Unauthorized: invalid x-api-key {key}"
			p.Env[fakeagent.EnvReplayExit] = "1"
		case "timeout", "stall", "cancel":
			p.Env[fakeagent.EnvReplayBlock] = "1"
		}
		return p
	}
	dispatcher := func(t *testing.T, ps ...pilot.Provider) *pilot.Dispatcher {
		// The registry holds every provider, as a real one does: pilot
		// knows their variables hold secrets.
		all := append([]pilot.Provider(nil), ps...)
		for _, p := range slices.Concat(provs, []pilot.Provider{stored}) { // not append: provs is shared by parallel subtests
			if !slices.ContainsFunc(ps, func(q pilot.Provider) bool { return q.Name == p.Name }) {
				all = append(all, p)
			}
		}
		d := testDispatcher(t, all...)
		d.RunDir = keepDir(t)
		// Every provider's variable is in the allowlist: only pilot's
		// own rule keeps the others' secrets out.
		for env := range secretOf {
			d.EnvAllow = append(d.EnvAllow, env)
		}
		d.EnvAllow = append(d.EnvAllow, pilot.DefaultEnvAllow...)
		d.LookupEnv = lookup
		d.Credentials = config.ChainCredentials{config.EnvCredentials{LookupEnv: lookup}, storedFile}
		d.Heartbeat = 10 * time.Millisecond
		d.Stall = pilot.StallPolicy{Start: 20 * time.Millisecond, ModelResponse: 20 * time.Millisecond, Tool: 150 * time.Millisecond}
		observe := func(e pilot.Event) {
			note("event", e)
			if e.Type == event.StallInspection {
				mu.Lock()
				inspections++ // they quote the stream's tail
				mu.Unlock()
			}
		}
		d.Observer = func(e pilot.Event) {
			observe(e)
			logEvent(e) // the slog adapter's records are searched too
		}
		d.OnLine = func(runID string, l pilot.Line) { note("line", string(l.Data)) }
		mu.Lock()
		runDirs = append(runDirs, d.RunDir)
		mu.Unlock()
		return d
	}
	taskFor := func(t *testing.T, name, outcome string) pilot.Task {
		tk := pilot.Task{Provider: name, Mode: pilot.ModeCode, Prompt: "the task", Workdir: foundKeyDir(t, canary[stored.Name])}
		switch outcome {
		case "timeout":
			tk.Timeout = 300 * time.Millisecond
		case "stall":
			tk.IdleTimeout = 400 * time.Millisecond
		}
		return tk
	}
	all := []string{"success", "failure", "auth", "timeout", "stall", "cancel"}
	for _, p := range provs {
		for _, outcome := range all {
			t.Run(p.Name+"/"+outcome, func(t *testing.T) {
				t.Parallel()
				d := dispatcher(t, provider(t, p, outcome))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if outcome == "cancel" {
					// Once the worker has printed (its call is
					// recorded by then), cancel it.
					onLine := d.OnLine
					d.OnLine = func(runID string, l pilot.Line) {
						onLine(runID, l)
						cancel()
					}
				}
				v, err := d.Dispatch(ctx, taskFor(t, p.Name, outcome))
				if err != nil {
					note("error", err.Error())
					t.Fatal(err)
				}
				note("verdict", v)
				mu.Lock()
				outcomes[outcome+":"+string(v.Verdict)+"/"+string(v.FailureClass)]++
				mu.Unlock()
				if outcome == "success" && v.Verdict != pilot.Completed {
					t.Errorf("success run: verdict %s (%s)", v.Verdict, v.FailureClass)
				}
				if outcome != "success" && v.Verdict.Success() {
					t.Errorf("%s run: verdict %s", outcome, v.Verdict)
				}
				// The canary is live: the evidence quoted the key,
				// redacted.
				if outcome == "auth" && (v.FailureClass != pilot.FailProviderAuth || !strings.Contains(v.EvidenceExcerpt, "[REDACTED]")) {
					t.Errorf("auth run: class %s, evidence %q; want %s with the key redacted", v.FailureClass, v.EvidenceExcerpt, pilot.FailProviderAuth)
				}
			})
		}
	}
	t.Run("fanout", func(t *testing.T) {
		t.Parallel()
		var ps []pilot.Provider
		var jobs []pilot.Job
		for i, p := range provs {
			outcome := all[i%len(all)]
			if outcome == "cancel" {
				outcome = "stall" // the fanout is not cancelled as a whole
			}
			ps = append(ps, provider(t, p, outcome))
			tk := taskFor(t, p.Name, outcome)
			tk.Mode = pilot.ModeExplore
			jobs = append(jobs, pilot.Job{Task: tk})
		}
		logJob := pilotslog.FanoutObserver(logger)
		f := &pilot.Fanout{Dispatcher: &pilotslog.Dispatcher{Dispatcher: dispatcher(t, ps...), Logger: logger}, OnEvent: func(i int, e pilot.Event) {
			note("fanout event", e)
			logJob(i, e)
		}}
		vs, err := f.Run(context.Background(), jobs)
		if err != nil {
			note("error", err.Error())
			t.Fatal(err)
		}
		for _, v := range vs {
			note("verdict", v)
		}
		if len(vs) != len(jobs) {
			t.Errorf("%d verdicts for %d jobs", len(vs), len(jobs))
		}
	})
	t.Cleanup(func() {
		if t.Failed() && len(texts) == 0 {
			return
		}
		// After the parallel subtests: count every place a canary is
		// where it must not be.
		records := strings.Count(slogOut.String(), "\n")
		// The auth runs' evidence went through the slog adapter: the
		// key in it is redacted.
		if n := strings.Count(slogOut.String(), `"evidence":"`); n == 0 || !strings.Contains(slogOut.String(), "x-api-key [REDACTED]") {
			t.Errorf("no slog record carries the auth runs' redacted evidence (%d evidence attributes)", n)
		}
		// Stored's canary is live: the workers printed it, and OnLine
		// had it redacted.
		printed := 0
		for _, s := range texts {
			if strings.HasPrefix(s, "line: ") && strings.Contains(s, "read a key: [REDACTED]") {
				printed++
			}
		}
		texts = append(texts, "slog: "+slogOut.String())
		leaks := 0
		for _, s := range texts {
			for name, c := range canary {
				if strings.Contains(s, c) {
					leaks++
					t.Errorf("%s's canary in %.300s", name, s)
				}
			}
		}
		secrets := make([]string, 0, len(canary))
		for _, c := range canary {
			secrets = append(secrets, c)
		}
		files := 0
		for _, dir := range runDirs {
			f, found := noSecretIn(t, dir, secrets...)
			files += f
			leaks += found
		}

		workers := 0
		for _, pc := range calls {
			owner, path, _ := strings.Cut(pc, " ")
			data, err := os.ReadFile(path)
			if err != nil {
				continue // a worker ended before it recorded its call
			}
			var call fakeagent.Call
			if err := json.Unmarshal(data, &call); err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			workers++
			own := false
			for name, c := range canary {
				for _, kv := range call.Env {
					if !strings.Contains(kv, c) {
						continue
					}
					k, _, _ := strings.Cut(kv, "=")
					if name == owner && kv == k+"="+c && (secretOf[k] == c || slices.Contains(alsoAs[owner], k)) {
						own = true
						continue
					}
					leaks++
					t.Errorf("%s's worker environment holds %s's canary: %s", owner, name, kv)
				}
				if strings.Contains(strings.Join(call.Argv, "\x00")+call.Stdin, c) {
					leaks++
					t.Errorf("%s's worker argv or stdin holds %s's canary", owner, name)
				}
			}
			if !own {
				t.Errorf("%s's worker did not get its own secret", owner)
			}
		}
		t.Logf("secret canary: %d providers, %d workers, %d run-dir files, %d events/lines/verdicts/errors and %d slog records searched (%d stall inspections, %d lines with stored's key); outcomes %v; leaks: %d",
			len(provs), workers, files, len(texts), records, inspections, printed, outcomes, leaks)
		if records < len(provs)*len(all)*2 {
			t.Errorf("the slog adapter wrote %d records; want at least a started and a verdict record per dispatch", records)
		}
		// A worker that pilot ended (timeout, stall) before it had
		// recorded its call has no environment to search; those that
		// run until they print (success, failure, cancel) always have.
		if workers < len(provs)*3 || files < workers*3 || inspections == 0 || printed < workers {
			t.Errorf("searched too little: %d workers, %d files, %d stall inspections, %d lines with stored's key", workers, files, inspections, printed)
		}
	})
}

// The secret canary for the allowlist itself: a secret-looking variable in
// EnvAllow that no provider names is refused for every runner, by Dispatch
// and by Fanout, before anything runs, so its value is in no error, run
// directory or worker. Once a provider names it as its credential, another
// provider's worker still never gets it.
func TestSecretCanaryStrayAllowlist(t *testing.T) {
	const victimKey = "canary-victim-2e8d40c1-secret"
	const strayKey = "canary-stray-91b7f3a6-secret"
	for _, rn := range agents.Runners() {
		for _, setup := range []string{"stray", "owned"} {
			t.Run(rn.Name()+"/"+setup, func(t *testing.T) {
				t.Parallel()
				victim := replayProvider(t, rn.Name(), filepath.Join(t.TempDir(), "nothing"))
				victim.Name, victim.Model, victim.CredentialEnv = "victim", "prov/m1", "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayEcho] = "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayExit] = "1"
				if rn.Name() == "command" {
					victim.Argv = []string{victim.Binary}
					victim.Binary, victim.Model = "", ""
				}
				ps := []pilot.Provider{victim}
				if setup == "owned" {
					ps = append(ps, pilot.Provider{Name: "owner", Runner: "command", Argv: []string{"true"}, CredentialEnv: "STRAY_API_KEY"})
				}
				d := testDispatcher(t, ps...)
				d.EnvAllow = append([]string{"VICTIM_KEY", "STRAY_API_KEY"}, pilot.DefaultEnvAllow...)
				keys := map[string]string{"VICTIM_KEY": victimKey, "STRAY_API_KEY": strayKey, "PATH": os.Getenv("PATH")}
				d.LookupEnv = func(k string) (string, bool) { v, ok := keys[k]; return v, ok }
				d.Credentials = config.EnvCredentials{LookupEnv: d.LookupEnv}
				tk := pilot.Task{Provider: "victim", Mode: pilot.ModeCode, Prompt: "the task"}
				v, err := d.Dispatch(context.Background(), tk)
				if setup == "stray" {
					vs, ferr := (&pilot.Fanout{Dispatcher: d}).Run(context.Background(), []pilot.Job{{Task: tk}})
					for i, err := range []error{err, ferr} {
						what := []string{"Dispatch", "Fanout"}[i]
						if err == nil || !strings.Contains(err.Error(), "EnvAllow names STRAY_API_KEY, which looks like a secret") {
							t.Errorf("%s: error %v, want STRAY_API_KEY refused", what, err)
						} else if strings.Contains(err.Error(), strayKey) || strings.Contains(err.Error(), victimKey) {
							t.Errorf("%s: the error holds a secret: %v", what, err)
						}
					}
					if v.RunID != "" || vs != nil {
						t.Errorf("a run was made: %s, %v", v.RunID, vs)
					}
					if _, err := os.Stat(victim.Env[fakeagent.EnvCallOut]); err == nil {
						t.Errorf("a worker ran")
					}
					noSecretIn(t, d.RunDir, strayKey, victimKey)
					assertEmptyDir(t, d.RunDir)
					return
				}
				if err != nil {
					if strings.Contains(err.Error(), strayKey) {
						t.Errorf("the error holds the stray secret: %v", err)
					}
					t.Fatal(err)
				}
				vj, _ := json.Marshal(v)
				if strings.Contains(string(vj), victimKey) || strings.Contains(string(vj), strayKey) {
					t.Errorf("the verdict holds a secret: %s", vj)
				}
				if n, _ := noSecretIn(t, d.RunDir, victimKey, strayKey); n < 3 {
					t.Errorf("walked %d files in the run directory; want at least record, stream and events", n)
				}
				call, _ := readCall(t, victim)
				got := false
				for _, kv := range call.Env {
					if strings.Contains(kv, strayKey) || strings.HasPrefix(kv, "STRAY_API_KEY=") {
						t.Errorf("the worker received the owner's variable: %s", kv)
					}
					got = got || kv == "VICTIM_KEY="+victimKey
				}
				if !got {
					t.Errorf("the worker did not receive its own key in VICTIM_KEY")
				}
			})
		}
	}
}

// secretEnvOf is the variables p's runner hands p's secret to besides its
// credential_env (pilot.Command's SecretEnv).
func secretEnvOf(t *testing.T, p pilot.Provider) []string {
	t.Helper()
	for _, r := range agents.Runners() {
		if r.Name() != p.Runner {
			continue
		}
		dir := t.TempDir()
		cmd, err := r.Command(context.Background(), pilot.Attempt{
			Task:     pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "p", Workdir: dir},
			Provider: p, RunID: "secret-env", RunDir: dir, Prompt: "p", Workdir: dir,
			TaskFile: filepath.Join(dir, "task.md"), SessionPath: filepath.Join(dir, "session"),
		})
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		return cmd.SecretEnv
	}
	return nil
}
