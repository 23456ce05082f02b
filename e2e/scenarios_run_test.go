// The scenario runs of issue 7, each through Dispatcher.Dispatch with the
// real runner against internal/fakellm. Run them with:
//
//	cd e2e && npm ci && cd .. && go test -run TestScenarios ./e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/internal/fakellm"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/sandbox"
)

// fakeKeyEnv is the variable the e2e providers take their (fake) key from,
// and fakeKey the key.
const (
	fakeKeyEnv = "PILOT_E2E_FAKE_KEY"
	fakeKey    = "sk-e2e-fake-0d7c1b9a"
)

// EnvReport names a file each scenario run appends one JSON line to (a
// reportedRow): scripts/cli-drift compares two runs' files.
const EnvReport = "PILOT_E2E_REPORT"

// EnvRecord names a folder each scenario run writes the CLI's output to,
// for conformance fixtures (testdata/<runner>/stream/): NAME.stdout,
// NAME.stderr, NAME.session (pi's session file) and NAME.json, the
// verdict pilot gave, with NAME <cli>-<scenario>[-defaults].
const EnvRecord = "PILOT_E2E_RECORD"

// EnvDefaultRetries, set to 1, leaves the CLIs' own retry settings alone
// (issue 7: scenarios must also pass with the default retry behaviour);
// otherwise they are turned down for speed.
const EnvDefaultRetries = "PILOT_E2E_DEFAULT_RETRIES"

// EnvSandbox names the sandbox mode TestScenarios runs every row in (off,
// secrets, workspace, strict); unset, the default.
const EnvSandbox = "PILOT_E2E_SANDBOX"

// TestScenarios runs the whole table with the CLIs' retries turned down
// for speed (PILOT_E2E_DEFAULT_RETRIES=1: with their own defaults).
func TestScenarios(t *testing.T) {
	t.Parallel()
	defaults := os.Getenv(EnvDefaultRetries) == "1"
	mode, err := sandbox.ParseMode(os.Getenv(EnvSandbox))
	if err != nil {
		t.Fatalf("%s: %v", EnvSandbox, err)
	}
	// The retry rows wait longest (opencode's five retries take over a
	// minute): started first, they overlap the quick ones.
	var ordered []scenario
	for _, retry := range []bool{true, false} {
		for _, s := range scenarios {
			if slices.Contains(retryScenarios, s.name) == retry {
				ordered = append(ordered, s)
			}
		}
	}
	for _, s := range ordered {
		for _, name := range scenarioCLIs {
			for _, c := range clisOf(name) {
				e, ok := wantFor(s, c)
				if !ok {
					continue
				}
				t.Run(s.name+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, s, c, e, setup{defaults: defaults, sandbox: mode})
				})
			}
		}
	}
}

// retryScenarios are the rows whose outcome depends on the CLIs' own
// retries.
var retryScenarios = []string{"rate-limit-once", "rate-limit-always", "server-error-always", "mid-stream-disconnect", "connection-refused"}

// quickDefaultRetries are the runners whose CLIs' default retries end
// within seconds (pi, both generations: three, 2 + 4 + 8 s apart; codex: four request and five
// stream retries, under 30 s here), so TestScenariosDefaultRetries runs them
// always. Claude Code's ten retries take about three minutes
// (0.5 s doubling to 32 s): those rows run with PILOT_E2E_DEFAULT_RETRIES=1.
var quickDefaultRetries = []string{"pi", "codex"}

// TestScenariosDefaultRetries runs the retry rows with the CLIs' own
// default retry settings (issue 7: the scenarios must also pass with them)
// for the CLIs whose defaults are quick; TestScenarios covers the rest when
// PILOT_E2E_DEFAULT_RETRIES=1.
func TestScenariosDefaultRetries(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvDefaultRetries) == "1" {
		t.Skip("TestScenarios runs every row with the default retries already")
	}
	for _, s := range scenarios {
		if !slices.Contains(retryScenarios, s.name) {
			continue
		}
		for _, name := range quickDefaultRetries {
			if s.name == "connection-refused" && name == "codex" {
				// codex reconnects forever whatever its retry settings:
				// TestScenarios's row already runs with its default.
				continue
			}
			for _, c := range clisOf(name) {
				e, _ := wantFor(s, c)
				t.Run(s.name+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, s, c, e, setup{defaults: true})
				})
			}
		}
	}
}

// tools names each CLI's shell and read tools as it declares them, with
// the read tool's path key (see fakellm.Read).
func tools(cli string, workdir string) (bash func(string) fakellm.Call, read fakellm.Call) {
	file := filepath.Join(workdir, "README.txt")
	switch cli {
	case "codex":
		sh := func(cmd string) fakellm.Call { return fakellm.ToolCall("exec_command", map[string]string{"cmd": cmd}) }
		return sh, sh("cat " + file)
	case "claude":
		return func(cmd string) fakellm.Call { return fakellm.Bash("Bash", cmd) }, fakellm.Read("Read", "file_path", file)
	case "opencode", "kilo":
		return func(cmd string) fakellm.Call { return fakellm.Bash("bash", cmd) }, fakellm.Read("read", "filePath", file)
	case "gemini", "qwen":
		// gemini-cli 0.61 declares run_shell_command {command} and
		// read_file {file_path} (its tool definitions, default set);
		// qwen-code 0.24, its fork, the same two.
		return func(cmd string) fakellm.Call { return fakellm.Bash("run_shell_command", cmd) }, fakellm.Read("read_file", "file_path", file)
	case "copilot":
		// copilot 1.0.102 declares bash {command, description} (both
		// required) and view {path}.
		sh := func(cmd string) fakellm.Call {
			return fakellm.ToolCall("bash", map[string]string{"command": cmd, "description": "e2e command"})
		}
		return sh, fakellm.Read("view", "path", file)
	}
	return func(cmd string) fakellm.Call { return fakellm.Bash("bash", cmd) }, fakellm.Read("read", "path", file)
}

// script is the fakellm script of scenario s for cli, and the stall policy
// the scenario runs under.
func script(t *testing.T, s scenario, cli, workdir string, probe *sandboxProbe) (fakellm.Script, pilot.StallPolicy) {
	bash, read := tools(cli, workdir)
	policy := pilot.StallPolicy{Start: 30 * time.Second, ModelResponse: 30 * time.Second, Tool: 60 * time.Second}
	var steps []fakellm.Step
	switch s.name {
	case "ok-one-tool-call":
		steps = []fakellm.Step{fakellm.Tools(bash("echo e2e-ok")), fakellm.Text("done")}
	case "two-tool-calls-one-message":
		steps = []fakellm.Step{fakellm.Tools(bash("echo one"), read), fakellm.Text("done")}
	case "long-running-tool":
		// Not a bare sleep: Claude Code 2.1.332 refuses a foreground
		// standalone "sleep N" (its Bash tool answers with an error at
		// once). The output, worked out by the shell, proves the command
		// ran to its end (checked in runScenario).
		policy.ModelResponse = time.Second
		steps = []fakellm.Step{fakellm.Tools(bash("timeout 4 tail -f /dev/null; echo " + toolRanMarkerCmd)), fakellm.Text("done")}
	case "tool-stall-terminated":
		policy.ModelResponse, policy.Tool = time.Second, 3*time.Second
		steps = []fakellm.Step{fakellm.Tools(bash("tail -f /dev/null")), fakellm.Text("never reached")}
	case "silent-before-first-byte":
		policy.ModelResponse = time.Second
		steps = []fakellm.Step{fakellm.Text("done").WithDelay(4 * time.Second)}
	case "silent-stall-terminated":
		policy.ModelResponse, policy.Tool, policy.ModelStall = time.Second, 3*time.Second, 3*time.Second
		steps = []fakellm.Step{fakellm.Text("never sent").Silenced(nil)}
	case "connection-refused":
		// No server: runScenario points the CLI at a closed port.
	case "rate-limit-always":
		steps = []fakellm.Step{fakellm.RateLimited("1").Forever()}
	case "rate-limit-once":
		steps = []fakellm.Step{fakellm.RateLimited("1"), fakellm.Text("done")}
	case "server-error-always":
		steps = []fakellm.Step{fakellm.Status(500, "fakellm: boom").Forever()}
	case "server-error-model-stall": // gemini_test.go
		policy.ModelResponse, policy.Tool, policy.ModelStall = time.Second, 3*time.Second, 3*time.Second
		steps = []fakellm.Step{fakellm.Status(500, "fakellm: boom").Forever()}
	case "mid-stream-disconnect":
		text := strings.Repeat("a long answer cut short ", 40)
		if cli == "gemini" {
			// gemini-cli's loop detection stops a turn whose streamed
			// text repeats itself ("Loop detected, stopping execution",
			// a warning, then result success with no answer): the
			// answer must not repeat for the drop to be what it sees.
			var b strings.Builder
			for i := range 120 {
				fmt.Fprintf(&b, "part %d of a long answer cut short; ", i)
			}
			text = b.String()
		}
		steps = []fakellm.Step{fakellm.Text(text).Dropped().Forever()}
	case "context-overflow":
		steps = []fakellm.Step{fakellm.ContextOverflow().Forever()}
	case sandboxProbeName: // sandbox_test.go
		steps = []fakellm.Step{fakellm.Tools(bash(probe.command())), fakellm.Text("done")}
	default:
		t.Fatalf("no script for scenario %q", s.name)
	}
	return fakellm.Script{Steps: steps, Aside: aside(cli)}, policy
}

// aside answers a CLI's side requests so they do not take script steps:
// opencode asks the model for a session title first, kilo (its fork)
// sometimes after the answer (NOTES.md).
func aside(cli string) func(fakellm.Request) (fakellm.Step, bool) {
	if cli == "gemini" {
		// gemini-cli asks a small model to pick the model first, when
		// none is chosen (model "auto"; pilot passes --model when the
		// provider names one).
		return fakellm.GeminiRouter
	}
	if cli != "opencode" && cli != "kilo" {
		return nil
	}
	return func(r fakellm.Request) (fakellm.Step, bool) {
		b, _ := json.Marshal(r.Body)
		if strings.Contains(string(b), "title generator") {
			return fakellm.Text("e2e title"), true
		}
		return fakellm.Step{}, false
	}
}

// closedPort returns a base URL on 127.0.0.1 whose port refuses
// connections (it was free a moment ago).
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// A setup is how a scenario row runs, beyond the row itself.
type setup struct {
	// defaults leaves the CLI's own retry settings alone; otherwise they
	// are turned down for speed.
	defaults bool
	// sandbox is the provider's sandbox mode ("": the default).
	sandbox sandbox.Mode
	// userConfig runs the CLI as a user's own login does: its config
	// (pointing at fakellm) and its state in its default dirs under the
	// worker's HOME, a provider without base_url, so the worker is not
	// isolated and the sandbox must let it keep those dirs.
	userConfig bool
}

// runScenario runs scenario s for CLI c as run says and checks what pilot
// reports against want.
func runScenario(t *testing.T, s scenario, c cli, want expect, run setup) {
	defaults, mode := run.defaults, run.sandbox
	bin := c.binary(t)
	workdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workdir, "README.txt"), []byte("e2e fixture\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runner := c.runnerName()
	guard := newNetGuard(t)
	env := isolatedEnv(t, guard)
	var probe *sandboxProbe
	if s.name == sandboxProbeName {
		probe = newSandboxProbe(t, env["HOME"], workdir)
	}
	sc, policy := script(t, s, runner, workdir, probe)
	base := closedPort(t)
	var srv *fakellm.Server
	if s.name != "connection-refused" {
		srv = fakellm.New(sc)
		t.Cleanup(srv.Close)
		base = srv.URL()
	}
	// The runners set each CLI's own config dir under the run directory
	// (BaseURL implies Isolated); HOME and the XDG dirs stay the test's.
	for _, k := range []string{"PI_CODING_AGENT_DIR", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "QWEN_RUNTIME_DIR"} {
		delete(env, k)
	}
	// The worker's temp dir is pilot's, <run dir>/tmp.
	delete(env, "TMPDIR")
	// A secret store, as a user's HOME has: the sandbox guards it, so
	// HOME itself gets no rule and no new entry can be made in it
	// (internal/landlock's Plan), as on the machines pilot runs on.
	writeFile(t, filepath.Join(env["HOME"], ".ssh", "id_e2e"), secretKey+"\n")
	prov := pilot.Provider{
		Name:          "e2e-" + c.name,
		Runner:        runner,
		Binary:        bin,
		Model:         "fake-model",
		CredentialEnv: fakeKeyEnv,
		Env:           env,
		BaseURL:       base + "/v1",
		Sandbox:       mode,
		// In strict mode the worker connects to fakellm's port (the
		// base URL's, or here) and, so that an escape is still seen,
		// to the guard's.
		SandboxConnect: []string{strings.TrimPrefix(base, "http://"), guard.addr},
	}
	if path := c.workerPath(t); path != "" {
		// The node this CLI needs (pi 1.x: Node 22), first on its
		// PATH only.
		env["PATH"] = path
	}
	switch runner {
	case "claude":
		prov.BaseURL = base // claude appends /v1/messages itself
	case "gemini":
		prov.BaseURL = base // gemini appends /v1beta/models/... itself
	case "codex":
		// Start-up plugin sync and analytics reach beyond 127.0.0.1
		// (NOTES.md).
		prov.Args = []string{"-c", "features.plugins=false", "-c", "analytics.enabled=false"}
	}
	if run.userConfig {
		userConfig(t, &prov, base)
	}
	// A CLI still retrying after RetryLoop is ended with the class of the
	// failure it retries (codex retries a refused connection forever,
	// whatever its settings). Turned down, every CLI's own retries end
	// well inside 30 s; with their defaults Claude Code's take about three
	// minutes and gemini-cli's up to five, and the timeout leaves room for
	// them.
	policy.RetryLoop = 30 * time.Second
	timeout, idle := 2*time.Minute, time.Minute
	if runner == "qwen" && (s.name == "server-error-always" || s.name == "connection-refused") {
		// qwen retries a 5xx or a refused connection 7 times, 1.5 s
		// doubling to 30 s, and prints nothing while it does (no
		// setting changes that loop): about 80 to 100 s of silence
		// before its error result, which pilot's default idle
		// timeout (15 min) waits out and this test's minute does not.
		timeout, idle = 3*time.Minute, 3*time.Minute
	}
	if defaults {
		policy.RetryLoop, timeout = 4*time.Minute, 5*time.Minute
		switch runner {
		case "codex":
			// codex's default retries end within 30 s here; its endless
			// reconnects do not.
			policy.RetryLoop = time.Minute
		case "qwen":
			// qwen's rate-limit loop waits 60 s doubling to 5 min, ten
			// times: pilot ends it by its retry-loop limit, with the
			// class its stderr retry line names.
			if s.name == "rate-limit-always" {
				want.source = "qwen:stderr|qwen:stdout"
			}
		case "gemini":
			// gemini's own retries of a 429, a 5xx or a refused
			// connection take 10 attempts, 5 s backoff doubling to 30 s,
			// with jitter: 3.6 to 4.7 minutes before it reports the error
			// (NOTES.md).
			policy.RetryLoop, timeout = 5*time.Minute+30*time.Second, 6*time.Minute
		}
	} else {
		switch runner {
		case "pi":
			// retry.maxRetries (default 3) and retry.baseDelayMs (default
			// 2000, doubling): the runner writes the agent dir's
			// settings, so these go in the project's (<cwd>/.pi/settings.json).
			writeFile(t, filepath.Join(workdir, ".pi", "settings.json"), `{"retry":{"maxRetries":1,"baseDelayMs":500}}`+"\n")
			if c.name == "pi-1" {
				// pi 1.x loads a project's .pi/settings.json only in a
				// trusted project; print and JSON mode cannot ask, and
				// skip it unless --approve trusts it for the one run.
				prov.Args = append(prov.Args, "--approve")
			}
		case "claude":
			env["CLAUDE_CODE_MAX_RETRIES"] = "1"
		case "codex":
			prov.Args = append(prov.Args, "-c", "model_providers.pilot.request_max_retries=1", "-c", "model_providers.pilot.stream_max_retries=1")
		case "opencode":
			// opencode has no retry setting (NOTES.md): its five
			// retries wait at most 2.5 + 5 + 10 + 20 + 30 s without
			// a retry-after header (~70 s with the six requests, up
			// to 100 s on this loaded machine after a start of up to
			// 25 s), so it gives up by itself inside these, with an
			// error event that carries the HTTP status its log's
			// retry lines lack. That matters for a 500 only: a refused
			// connection and a dropped stream are named in the retry
			// lines too, so there pilot ends the loop after 20 s and
			// judges it by them (the rows then show pilot's retry-loop
			// limit on a real CLI; what opencode itself says in the end
			// is in the fixtures connection-refused-retried and
			// stream-dropped-retried).
			policy.RetryLoop, timeout = 150*time.Second, 3*time.Minute
			if s.name == "connection-refused" || s.name == "mid-stream-disconnect" {
				policy.RetryLoop = 20 * time.Second
				// The log's retry line; on a loaded machine opencode's
				// own retries may run out first (seen in CI: 87 s),
				// and then its error event on stdout is the evidence.
				want.source = "opencode:stderr|opencode:stdout"
			}
		case "kilo":
			// KILO_SESSION_RETRY_LIMIT caps kilo's retries of a failed
			// model call (default: opencode's five, and endless for a
			// refused connection, its "offline" wait; NOTES.md). It
			// takes a positive number: "0" is no limit.
			env["KILO_SESSION_RETRY_LIMIT"] = "1"
			// Its start-up takes 10 to 50 s on this loaded machine.
			timeout = 3 * time.Minute
		case "gemini":
			// general.maxAttempts (default 10, at most 10) bounds gemini's
			// attempts at a model request. The runner writes the user
			// settings, so it goes in the workspace's settings (read in a
			// trusted workspace). Not a system settings file
			// (GEMINI_CLI_SYSTEM_SETTINGS_PATH): gemini skips one that is
			// not root's or has a group- or world-writable parent, such as
			// /tmp, where t.TempDir() is (NOTES.md).
			writeFile(t, filepath.Join(workdir, ".gemini", "settings.json"), `{"general":{"maxAttempts":2}}`+"\n")
		case "qwen":
			// model.generationConfig.maxRetries bounds both the OpenAI
			// SDK's silent retries (default 3) and qwen's rate-limit
			// loop (default 10, 60 s doubling to 5 min), whose delays
			// retryInitialDelayMs and retryMaxDelayMs set; the runner
			// writes the user settings, so these go in the workspace's.
			writeFile(t, filepath.Join(workdir, ".qwen", "settings.json"), `{"model":{"generationConfig":{"maxRetries":1,"retryInitialDelayMs":1000,"retryMaxDelayMs":2000}}}`+"\n")
		}
	}
	reg, err := pilot.NewRegistry(prov)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var phases, inspected []pilot.SessionPhase
	rec := newRecording(t, s, c, defaults)
	d := &pilot.Dispatcher{
		OnLine:      rec.line,
		Runners:     agents.Runners(),
		Providers:   reg,
		RunDir:      t.TempDir(),
		Credentials: config.EnvCredentials{LookupEnv: func(k string) (string, bool) { return fakeKey, k == fakeKeyEnv }},
		Grace:       2 * time.Second,
		Timeout:     timeout,
		IdleTimeout: idle,
		Stall:       policy,
		Heartbeat:   250 * time.Millisecond,
		LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.LookupEnv(k)
			}
			return "", false
		},
		Observer: func(e pilot.Event) {
			mu.Lock()
			defer mu.Unlock()
			if e.Session != nil {
				phases = append(phases, e.Session.Phase)
			}
			if e.Inspection != nil {
				phases = append(phases, e.Inspection.Phase)
				inspected = append(inspected, e.Inspection.Phase)
			}
		},
	}
	start := time.Now()
	v, err := d.Dispatch(context.Background(), pilot.Task{
		Provider: prov.Name, Mode: pilot.ModeCode, Workdir: workdir,
		Prompt: "e2e scenario " + s.name,
	})
	if errors.Is(err, sandbox.ErrUnavailable) {
		missing(t, "%v", err)
	}
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	t.Logf("%s × %s: verdict %s class %q source %q phase %q session %q resume %q in %d ms (exit %v signal %q leftovers %d)",
		c.name, s.name, v.Verdict, v.FailureClass, v.EvidenceSource, v.SessionPhase, v.SessionID, v.Resume, v.DurationMS, exitCode(v), v.Signal, v.Leftovers)

	if mode != "" && (v.Sandbox == nil || v.Sandbox.Mode != mode || v.Sandbox.Enforced != (mode != sandbox.Off)) {
		t.Errorf("sandbox %+v, want %s enforced", v.Sandbox, mode)
	}
	if v.Verdict != want.verdict || v.FailureClass != want.class {
		t.Errorf("verdict %q class %q (evidence %s: %q), want %q %q (%s); stderr tail: %s",
			v.Verdict, v.FailureClass, v.EvidenceSource, v.EvidenceExcerpt, want.verdict, want.class, want.why, v.StderrTail)
	}
	switch {
	case want.source == "pilot":
		// pilot's own policy ended it: the proof is the policy, not a line.
		if v.FailureSource != "pilot-policy" || v.TerminationInitiator != "pilot" {
			t.Errorf("failure source %q, termination initiator %q; want %q by pilot", v.FailureSource, v.TerminationInitiator, "pilot-policy")
		}
	case want.source != "" && !slices.Contains(strings.Split(want.source, "|"), v.EvidenceSource):
		t.Errorf("evidence source %q, want %q", v.EvidenceSource, want.source)
	}
	mu.Lock()
	seen := append(phases, v.SessionPhase)
	mu.Unlock()
	phaseOK := true
	if want.phase != "" && !slices.Contains(seen, want.phase) {
		t.Errorf("phases seen %q, want %q among them", seen, want.phase)
		phaseOK = false
	}
	if want.inspected != "" && !slices.Contains(inspected, want.inspected) {
		t.Errorf("stall inspections in %q, want one in %q", inspected, want.inspected)
		phaseOK = false
	}
	if runtime.GOOS == "linux" && (v.PeakRSSBytes <= 0 || v.PeakRSSProcess == nil || v.PeakRSSProcess.RSSBytes > v.PeakRSSBytes) {
		// Every run on Linux gets its tree's peak, the CLI's own high-water
		// mark at the least.
		t.Errorf("peak RSS %d bytes, process %+v: want the tree's peak, at least its top process's", v.PeakRSSBytes, v.PeakRSSProcess)
	}
	reportRow(t, s, c, defaults, v, seen, phaseOK)
	rec.write(t, v)
	if want.verdict == pilot.Completed {
		if v.SessionID == "" || v.Resume == "" {
			t.Errorf("session id %q, resume %q: want both", v.SessionID, v.Resume)
		}
		if run.userConfig {
			checkUserState(t, runner, env["HOME"], start)
		} else {
			checkNativeSession(t, runner, v.Resume)
		}
		if v.Usage == nil {
			t.Errorf("no usage, want fakellm's")
		}
	}
	checkNoKey(t, v)
	if left := procfs.WithEnv(pilot.EnvRunID + "=" + v.RunID); len(left) > 0 {
		t.Errorf("processes of run %s still alive after Dispatch returned: %v", v.RunID, left)
	}
	if g := guard.escapes(); len(g) > 0 {
		if runner == "kilo" {
			g = withoutKiloProbes(t, s, g)
		}
		if len(g) > 0 {
			t.Errorf("%s asked beyond 127.0.0.1 (refused by the guard): %q", c.name, g)
		}
	}
	if probe != nil {
		probe.check(t, mode, srv)
	}
	if s.name == "long-running-tool" && !toolRan(srv) {
		t.Errorf("no request to the model carried the tool's output %q: the tool did not run to its end", toolRanMarker)
	}
	if srv != nil {
		for _, r := range srv.Requests() {
			if r.Exhausted {
				t.Logf("a turn request found the script exhausted: %s %s", r.Method, r.Path)
			}
		}
	}
}

// kiloProbes are the hosts kilo's "offline" wait probes while it waits to
// retry a model call that lost its connection, to learn whether the network
// is back (its session/network.ts; NOTES.md): HEAD https://kilo.ai,
// https://example.com and https://cloudflare.com/cdn-cgi/trace.
var kiloProbes = []string{"CONNECT kilo.ai:443 HTTP/1.1", "CONNECT example.com:443 HTTP/1.1", "CONNECT cloudflare.com:443 HTTP/1.1"}

// withoutKiloProbes returns the escapes g of a kilo run but kilo's
// connectivity probes, logged, in the rows whose model connection fails;
// no setting stops them (a retry limit of 1 still waits once).
func withoutKiloProbes(t *testing.T, s scenario, g []string) []string {
	t.Helper()
	if s.name != "connection-refused" && s.name != "mid-stream-disconnect" {
		return g
	}
	var rest []string
	probes := 0
	for _, r := range g {
		if slices.Contains(kiloProbes, r) {
			probes++
			continue
		}
		rest = append(rest, r)
	}
	if probes > 0 {
		t.Logf("kilo probed the network %d times while offline (kilo.ai, example.com, cloudflare.com; refused by the guard)", probes)
	}
	return rest
}

// checkNativeSession checks that resume, a completed verdict's resume
// value, names the session the CLI wrote: pi's session file, codex's
// rollout file and Claude Code's transcript are files; copilot's is its
// session-state directory; opencode's, kilo's
// and gemini-cli's values are <store>/<session id>, with the store a directory
// the CLI wrote into.
func checkNativeSession(t *testing.T, cli, resume string) {
	t.Helper()
	path := resume
	switch cli {
	case "opencode", "gemini", "kilo":
		path = filepath.Dir(resume)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		t.Errorf("%s's native session %s: %v", cli, path, err)
	case (cli == "opencode" || cli == "gemini" || cli == "kilo" || cli == "copilot") != st.IsDir():
		t.Errorf("%s's native session %s: mode %v", cli, path, st.Mode())
	case !st.IsDir() && st.Size() == 0:
		t.Errorf("%s's native session %s is empty", cli, path)
	}
}

// The long-running tool ends with toolRanMarkerCmd, whose output is
// toolRanMarker: a tool result holding the marker proves the command ran
// (the command's own text, echoed back in the conversation, holds only the
// lower-case form). Not $((...)): gemini-cli refuses a command with "$(" in
// it.
const (
	toolRanMarkerCmd = "tool-ran | tr a-z A-Z"
	toolRanMarker    = "TOOL-RAN"
)

// toolRan reports whether a request srv received carried toolRanMarker.
func toolRan(srv *fakellm.Server) bool {
	for _, r := range srv.Requests() {
		b, _ := json.Marshal(r.Body)
		if strings.Contains(string(b), toolRanMarker) {
			return true
		}
	}
	return false
}

// checkNoKey checks that the key is in none of pilot's own artefacts of the
// run: the verdict, record.json, events.log and stream.log (which holds
// every line the CLI printed, its --print-logs log included). The CLI's own
// config and session files under the run directory are the CLI's.
func checkNoKey(t *testing.T, v pilot.Verdict) {
	t.Helper()
	b, _ := json.Marshal(v)
	if strings.Contains(string(b), fakeKey) {
		t.Errorf("the verdict holds the API key")
	}
	dir := filepath.Dir(v.Record)
	for _, name := range []string{"record.json", "events.log", "stream.log"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.Contains(string(data), fakeKey) {
			t.Errorf("%s holds the API key", name)
		}
	}
}

// writeFile writes data to path, making its directory.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A reportedRow is what one scenario run reported, as EnvReport's file
// holds it: the row, the CLI's version, and what pilot said.
type reportedRow struct {
	Scenario string `json:"scenario"`
	CLI      string `json:"cli"`
	// Defaults: the run kept the CLI's own retry settings
	// (TestScenariosDefaultRetries, or PILOT_E2E_DEFAULT_RETRIES=1).
	Defaults bool   `json:"defaults"`
	Package  string `json:"package"`
	Version  string `json:"version"`
	Verdict  string `json:"verdict"`
	Class    string `json:"class,omitempty"`
	Source   string `json:"evidence_source,omitempty"`
	// Phase is the verdict's session phase; PhaseOK says the phase (and
	// stall inspection) the table wants of the row was seen. Phases is
	// every phase seen during the run (events, inspections, the
	// verdict's), each once, in the order first seen: which ones a quick
	// run shows depends on when pilot looked (a tool that ends within a
	// heartbeat may show no tool-running), so it is for reading, not for
	// comparing.
	Phase   string   `json:"phase,omitempty"`
	PhaseOK bool     `json:"phase_ok"`
	Phases  []string `json:"phases"`
	Seconds float64  `json:"seconds"`
	// PeakRSS is the verdict's peak_rss_bytes, the most resident memory
	// the CLI's process tree held, and PeakCommand the command of the
	// process that held the most of it (tools/clidrift -peaks).
	PeakRSS     int64  `json:"peak_rss_bytes"`
	PeakCommand string `json:"peak_rss_command,omitempty"`
}

var reportMu sync.Mutex

// reportRow appends the run's reportedRow to EnvReport's file, when set.
func reportRow(t *testing.T, s scenario, c cli, defaults bool, v pilot.Verdict, seen []pilot.SessionPhase, phaseOK bool) {
	t.Helper()
	path := os.Getenv(EnvReport)
	if path == "" {
		return
	}
	row := reportedRow{Scenario: s.name, CLI: c.name, Defaults: defaults, Package: c.pkg, Version: c.pinnedVersion(t),
		Verdict: string(v.Verdict), Class: string(v.FailureClass), Source: v.EvidenceSource, Phase: string(v.SessionPhase),
		PhaseOK: phaseOK, Phases: []string{}, Seconds: float64(v.DurationMS) / 1000, PeakRSS: v.PeakRSSBytes}
	if v.PeakRSSProcess != nil {
		row.PeakCommand = v.PeakRSSProcess.Command
	}
	if v.FailureSource == "pilot-policy" {
		row.Source = "pilot"
	}
	for _, p := range seen {
		if p != "" && !slices.Contains(row.Phases, string(p)) {
			row.Phases = append(row.Phases, string(p))
		}
	}
	line, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("%s: %v", EnvReport, err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatalf("%s: %v", EnvReport, err)
	}
}

// A recording keeps a run's output lines for EnvRecord; nil when unset.
type recording struct {
	name string // NAME, under EnvRecord's folder
	mu   sync.Mutex
	out  map[pilot.Stream][]byte
}

func newRecording(t *testing.T, s scenario, c cli, defaults bool) *recording {
	dir := os.Getenv(EnvRecord)
	if dir == "" {
		return nil
	}
	name := c.name + "-" + s.name
	if defaults {
		name += "-defaults"
	}
	return &recording{name: filepath.Join(dir, name), out: map[pilot.Stream][]byte{}}
}

// line is the Dispatcher's OnLine.
func (r *recording) line(_ string, l pilot.Line) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out[l.Stream] = append(append(r.out[l.Stream], l.Data...), '\n')
}

// write writes the recorded output, the session file and the verdict.
func (r *recording) write(t *testing.T, v pilot.Verdict) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	writeFile(t, r.name+".stdout", string(r.out[pilot.Stdout]))
	if len(r.out[pilot.Stderr]) > 0 {
		writeFile(t, r.name+".stderr", string(r.out[pilot.Stderr]))
	}
	if v.Resume != "" {
		if data, err := os.ReadFile(v.Resume); err == nil {
			writeFile(t, r.name+".session", string(data))
		}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, r.name+".json", string(b)+"\n")
}
