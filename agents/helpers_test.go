package agents_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/pilottest"
)

// Helpers of the runners' tests: attempts and commands as a Dispatcher
// would make them, watchers fed by hand, and real dispatches of a fake
// agent replaying a recorded stream (the test binary; see TestMain).

// feed hands lines to w as stdout lines, as the Dispatcher would.
func feed(w pilot.Watcher, lines ...string) {
	for _, l := range lines {
		w.Line(pilot.Line{Stream: pilot.Stdout, Data: []byte(l), Size: int64(len(l))})
	}
}

// flagPrompt is a prompt that reads like a flag, quotes and all: a runner
// must hand it to its CLI as the prompt, untouched.
const flagPrompt = "-fix the bug \"now\""

// agentAttempt is an attempt of p for the agent CLI runner rn in a fresh
// run directory, as a Dispatcher would hand it to rn's Command: p runs
// under rn, its name defaulting to rn, and workdir "" is the run directory.
func agentAttempt(t testing.TB, rn string, p pilot.Provider, mode pilot.Mode, resume, prompt, workdir string) pilot.Attempt {
	t.Helper()
	dir := t.TempDir()
	p.Runner = rn
	if p.Name == "" {
		p.Name = rn
	}
	if workdir == "" {
		workdir = dir
	}
	return pilot.Attempt{
		Task:        pilot.Task{Provider: p.Name, Mode: mode, Prompt: prompt, Resume: resume},
		Provider:    p,
		RunID:       "run-1",
		RunDir:      dir,
		TaskFile:    filepath.Join(dir, "task.md"),
		Prompt:      prompt,
		Workdir:     workdir,
		SessionPath: filepath.Join(dir, "session.jsonl"),
	}
}

// agentCommand is rn's command for a; it fails the test if rn refuses.
func agentCommand(t testing.TB, rn pilot.Runner, a pilot.Attempt) *pilot.Command {
	t.Helper()
	cmd, err := rn.Command(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// agentWatcher is the phase watcher of rn's command for a.
func agentWatcher(t testing.TB, rn pilot.Runner, a pilot.Attempt) pilot.PhaseWatcher {
	t.Helper()
	cmd := agentCommand(t, rn, a)
	pw, ok := cmd.Watcher.(pilot.PhaseWatcher)
	if !ok {
		t.Fatalf("the %s watcher (%T) does not follow phases", rn.Name(), cmd.Watcher)
	}
	return pw
}

// replayProvider is pilottest.ReplayProvider.
func replayProvider(t testing.TB, rn, prefix string) pilot.Provider {
	return pilottest.ReplayProvider(t, rn, prefix)
}

// readCall is how the latest worker of p, a replayProvider, was started,
// and its environment as a map.
func readCall(t testing.TB, p pilot.Provider) (pilottest.Call, map[string]string) {
	t.Helper()
	c := pilottest.LastCall(t, p)
	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return c, env
}

// secretDispatcher is a pilottest.Dispatcher over p, with the agent CLI
// runners, and p's credential variable holding secret.
func secretDispatcher(t testing.TB, p pilot.Provider, secret string) *pilot.Dispatcher {
	t.Helper()
	d := pilottest.Dispatcher(t, []pilot.Provider{p}, agents.Runners()...)
	d.Credentials = config.EnvCredentials{LookupEnv: func(k string) (string, bool) {
		if k == p.CredentialEnv {
			return secret, true
		}
		return "", false
	}}
	return d
}

// mustDispatch dispatches task with d, failing the test on an error.
func mustDispatch(t testing.TB, d *pilot.Dispatcher, task pilot.Task) pilot.Verdict {
	t.Helper()
	v, err := d.Dispatch(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// dispatchCompleted dispatches task with d and fails the test unless the
// verdict is completed.
func dispatchCompleted(t testing.TB, d *pilot.Dispatcher, task pilot.Task) pilot.Verdict {
	t.Helper()
	v := mustDispatch(t, d, task)
	if v.Verdict != pilot.Completed {
		t.Fatalf("verdict %s (%s), want completed: %+v", v.Verdict, v.FailureClass, v)
	}
	return v
}

// noSecretIn is pilottest.NoSecretIn.
func noSecretIn(t testing.TB, dir string, secrets ...string) (files, found int) {
	t.Helper()
	return pilottest.NoSecretIn(t, dir, secrets...)
}

// readPrivateFile reads the file at path, which must have mode 0600.
func readPrivateFile(t testing.TB, path string) []byte {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wantRefusal fails unless rn refuses to build a command for a, with an
// error that says want.
func wantRefusal(t testing.TB, rn pilot.Runner, a pilot.Attempt, want string) {
	t.Helper()
	cmd, err := rn.Command(context.Background(), a)
	if err == nil {
		t.Fatalf("no error; argv %q", cmd.Argv)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// checkFuzzedWatcher feeds data's lines to a fresh watcher of rn (every
// fifth line on stderr, every seventh cut short) and checks the result of
// an exit with code.
func checkFuzzedWatcher(t *testing.T, rn pilot.Runner, data []byte, code int) {
	var lines []pilot.Line
	for i, l := range bytes.Split(data, []byte("\n")) {
		stream := pilot.Stdout
		if i%5 == 4 {
			stream = pilot.Stderr
		}
		lines = append(lines, pilot.Line{Stream: stream, Data: l, Size: int64(len(l)), Truncated: i%7 == 6})
	}
	code %= 256
	if code < 0 {
		code = -code
	}
	a := agentAttempt(t, rn.Name(), pilot.Provider{Name: "f"}, pilot.ModeCode, "", "p", "")
	fuzzWatcher(t, rn, a, lines, pilot.Exit{Runner: rn.Name(), Started: true, Code: code})
}

// fuzzWatcher feeds lines to a fresh watcher of rn's command for a, asking
// for its state after each, and checks that Finish for exit gives a valid
// result: a failure with a class, or another outcome without one. It
// returns that result.
func fuzzWatcher(t *testing.T, rn pilot.Runner, a pilot.Attempt, lines []pilot.Line, exit pilot.Exit) pilot.Result {
	t.Helper()
	w := agentWatcher(t, rn, a)
	for _, l := range lines {
		w.Line(l)
		w.StreamState()
	}
	res := w.Finish(exit)
	switch res.Outcome {
	case pilot.Completed, pilot.Empty, pilot.StepCappedPartial:
		if res.Class != "" {
			t.Errorf("%s with failure class %s", res.Outcome, res.Class)
		}
	case pilot.Failed:
		if res.Class == "" {
			t.Errorf("failed without a class: %+v", res)
		}
	default:
		t.Errorf("outcome %q (exit %d)", res.Outcome, exit.Code)
	}
	return res
}

// subsequence reports whether want appears in have, in order, not
// necessarily adjacent.
func subsequence(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// withSource is c with its evidence read from src, as the Dispatcher hands
// it to a watcher in Exit.Diagnostic.
func withSource(c pilot.Classification, src string) *pilot.Classification {
	c.Source = src
	return &c
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
