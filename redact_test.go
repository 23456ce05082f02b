package pilot_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/event"
)

// The keys of othersDispatcher's providers.
const (
	ownKey    = "own-key-3b9e51c0d7"
	fileKey   = "file-key-8d2f6a4e91" // provb's, in a credential file
	envKey    = "env-key-5c7a0e3b28"  // provc's, in the environment
	loosedKey = "loose-key-0a1b2c3d4e"
)

// othersDispatcher is a Dispatcher over p, whose key is ownKey, and five
// more providers: provb, whose key is in a credential file; provc, whose
// key is in the environment; provd, whose key is set up nowhere; prove,
// whose credential file others may read (refused); and provf, which needs
// none. Only p's worker runs.
func othersDispatcher(t *testing.T, p pilot.Provider) *pilot.Dispatcher {
	t.Helper()
	p.CredentialEnv = "PROVA_KEY"
	other := func(name, env string) pilot.Provider {
		return pilot.Provider{Name: name, Runner: "command", Argv: []string{"true"}, CredentialEnv: env}
	}
	d := testDispatcher(t, p, other("provb", "PROVB_KEY"), other("provc", "PROVC_KEY"),
		other("provd", "PROVD_KEY"), other("prove", "PROVE_KEY"), other("provf", ""))
	files := config.FileCredentials{Dir: filepath.Join(t.TempDir(), "credentials")}
	for name, key := range map[string]string{"provb": fileKey, "prove": loosedKey} {
		if _, err := files.Store(name, key); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(files.Path("prove"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PROVA_KEY": ownKey, "PROVC_KEY": envKey, "PATH": os.Getenv("PATH")}
	d.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	d.Credentials = config.ChainCredentials{config.EnvCredentials{LookupEnv: d.LookupEnv}, files}
	return d
}

// seen collects what a dispatch hands out beside its files: its events, as
// JSON, and its output lines.
type seen struct {
	mu     sync.Mutex
	events []string
	lines  []string
}

func (s *seen) watch(d *pilot.Dispatcher) {
	d.Observer = func(e pilot.Event) {
		data, _ := json.Marshal(e)
		s.mu.Lock()
		s.events = append(s.events, string(data))
		s.mu.Unlock()
	}
	d.OnLine = func(_ string, l pilot.Line) {
		s.mu.Lock()
		s.lines = append(s.lines, string(l.Data))
		s.mu.Unlock()
	}
}

// noKeyIn checks that no key of othersDispatcher's providers is in v, in
// the run directory, or in what s saw.
func noKeyIn(t *testing.T, d *pilot.Dispatcher, v pilot.Verdict, s *seen) {
	t.Helper()
	keys := []string{ownKey, fileKey, envKey}
	vj, _ := json.Marshal(v)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if strings.Contains(string(vj), k) {
			t.Errorf("the verdict holds %q: %s", k, vj)
		}
		for what, texts := range map[string][]string{"event": s.events, "OnLine line": s.lines} {
			for _, text := range texts {
				if strings.Contains(text, k) {
					t.Errorf("an %s holds %q: %.300s", what, k, text)
				}
			}
		}
	}
	if n, _ := noSecretIn(t, d.RunDir, keys...); n < 3 {
		t.Errorf("walked %d files in the run directory; want at least record, stream and events", n)
	}
}

// A worker that prints other providers' keys (found in their credential
// file, or in the environment) leaves them in nothing pilot writes or hands
// out: stream.log, a long line's copy from its spill file, events.log, the
// record (the worker's argv too), the verdict's stderr tail and evidence,
// the observer's events and OnLine. Credentials of other providers that are
// missing or refused do not fail the dispatch.
func TestDispatchRedactsOtherProvidersSecrets(t *testing.T) {
	checkGoroutines(t)
	// A line longer than MaxLineBytes, with a key cut by that boundary
	// and another in the part only its spill file holds.
	const max = 4096
	long := strings.Repeat("x", max-8) + fileKey + strings.Repeat("y", 3000) + envKey + "z"
	d := othersDispatcher(t, fakeProvider(t, "prova",
		"out=found B: "+fileKey,
		"err=found C: "+envKey,
		"raw=in two writes: "+fileKey[:9], "out="+fileKey[9:], // in two reads, often
		"out="+long,
		"err=Error: 401 Unauthorized: invalid x-api-key "+fileKey,
		"exit=1"))
	d.MaxLineBytes = max
	var s seen
	s.watch(d)
	v := dispatch(t, d, task("prova"))

	if v.FailureClass != pilot.FailProviderAuth || v.EvidenceExcerpt != "Error: 401 Unauthorized: invalid x-api-key [REDACTED]" {
		t.Errorf("class %s, evidence %q; want %s with the key redacted", v.FailureClass, v.EvidenceExcerpt, pilot.FailProviderAuth)
	}
	if !strings.Contains(v.StderrTail, "found C: [REDACTED]\n") {
		t.Errorf("stderr tail %q does not show the redacted key", v.StderrTail)
	}
	rec := readRecord(t, v)
	if !slices.Contains(rec.Argv, "out=found B: [REDACTED]") {
		t.Errorf("record argv %q does not show the redacted key", rec.Argv)
	}
	stream, err := os.ReadFile(rec.StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	// stdout's and stderr's lines interleave as they came.
	got := strings.Split(strings.TrimSuffix(string(stream), "\n"), "\n")
	slices.Sort(got)
	want := []string{
		"err Error: 401 Unauthorized: invalid x-api-key [REDACTED]",
		"err found C: [REDACTED]",
		"out found B: [REDACTED]",
		"out in two writes: [REDACTED]",
		"out " + strings.Repeat("x", max-8) + "[REDACTED]" + strings.Repeat("y", 3000) + "[REDACTED]z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream.log (-want +got):\n%.3000s", diff)
	}
	if !slices.Contains(s.lines, "found B: [REDACTED]") {
		t.Errorf("OnLine lines %.300q do not show the redacted key", s.lines)
	}
	noKeyIn(t, d, v, &s)
}

// What a worker's stream says of its session (its session id, the ids of
// its tool calls) reaches the verdict, the record and the phase and stall
// events: another provider's key there is redacted too.
func TestDispatchRedactsSecretsFromSessionFields(t *testing.T) {
	checkGoroutines(t)
	fixture, err := os.ReadFile("testdata/claude/stream/parallel-tools.stdout")
	if err != nil {
		t.Fatal(err)
	}
	// Its init event and first tool call, with the session id and the
	// call's id replaced by keys; then the worker hangs in the tool.
	lines := strings.SplitAfter(string(fixture), "\n")
	stdout := strings.ReplaceAll(strings.Join(lines[:2], ""), "0e3b9a47-2c5d-4d1f-8e6a-7b4c3d2e1f00", fileKey)
	stdout = strings.ReplaceAll(stdout, "toolu_01Aa", envKey)
	if !strings.Contains(stdout, fileKey) || !strings.Contains(stdout, envKey) {
		t.Fatalf("the fixture changed: %s", stdout)
	}
	prefix := filepath.Join(t.TempDir(), "hang")
	if err := os.WriteFile(prefix+".stdout", []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	p := replayProvider(t, agents.RunnerClaude, prefix)
	p.Name = "prova"
	p.Env["PILOT_FAKE_REPLAY_BLOCK"] = "1"
	d := othersDispatcher(t, p)
	d.Heartbeat = 10 * time.Millisecond
	d.Stall = pilot.StallPolicy{Start: 20 * time.Millisecond, ModelResponse: 20 * time.Millisecond, Tool: 300 * time.Millisecond}
	var s seen
	s.watch(d)
	v := dispatch(t, d, task("prova"))

	if v.SessionID != "[REDACTED]" {
		t.Errorf("session id %q, want it redacted", v.SessionID)
	}
	s.mu.Lock()
	var phase, inspection bool
	for _, e := range s.events {
		phase = phase || strings.Contains(e, `"pending_tool_call_ids":["[REDACTED]"]`) && strings.Contains(e, event.Phase)
		inspection = inspection || strings.Contains(e, `"pending_tool_call_ids":["[REDACTED]"]`) && strings.Contains(e, event.StallInspection)
	}
	s.mu.Unlock()
	if !phase || !inspection {
		t.Errorf("no phase event (%v) or stall inspection (%v) shows the redacted tool call id: %.2000q", phase, inspection, s.events)
	}
	noKeyIn(t, d, v, &s)
}

// cancellingSource is a CredentialSource that ends the dispatch's context
// when asked for provider slow's key, as a ctx-honouring source cut short
// by a cancel would: it has every other key.
type cancellingSource struct {
	cancel context.CancelFunc
	keys   map[string]string
}

func (c cancellingSource) Secret(ctx context.Context, p pilot.Provider) (string, error) {
	if p.Name == "slow" {
		c.cancel()
		return "", ctx.Err()
	}
	return c.keys[p.Name], nil
}

// A worker is never started while a key it could print is unknown: when
// ctx ends before the other providers' keys are all resolved, Dispatch
// fails, and the run's record says why.
func TestDispatchNotStartedWithoutEveryKey(t *testing.T) {
	checkGoroutines(t)
	marker := filepath.Join(t.TempDir(), "started")
	p := fakeProvider(t, "prova", "write="+marker+"=x")
	p.CredentialEnv = "PROVA_KEY"
	slow := pilot.Provider{Name: "slow", Runner: "command", Argv: []string{"true"}, CredentialEnv: "SLOW_KEY"}
	d := testDispatcher(t, p, slow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.Credentials = cancellingSource{cancel, map[string]string{"prova": ownKey}}
	v, err := d.Dispatch(ctx, task("prova"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Dispatch: verdict %s, error %v; want context.Canceled", v.Verdict, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the worker ran: %v", err)
	}
	runs, _ := filepath.Glob(filepath.Join(d.RunDir, "*", "record.json"))
	if len(runs) != 1 {
		t.Fatalf("records %q, want one", runs)
	}
	rec, err := pilot.ReadRecord(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != string(pilot.Failed) || !strings.Contains(rec.PilotError, "context canceled") {
		t.Errorf("record status %q, pilot_error %q; want failed, with the cancel", rec.Status, rec.PilotError)
	}
}
