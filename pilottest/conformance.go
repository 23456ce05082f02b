package pilottest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// A Case is one recorded run of an agent CLI and the verdict pilot must
// give it. It is NAME.json in a case directory, beside NAME.stdout, and
// optionally NAME.stderr and NAME.session (copied to the path after
// "--session" in the worker's argv, as pi writes it):
//
//	{
//	  "source": "where the stream came from",
//	  "mode": "code",                      // the task's mode; default code
//	  "resume": "",                        // Task.Resume; "{case_dir}" is the case's directory
//	  "exit_code": 0, "signal": 0,         // how the replaying worker ends
//	  "argv_contains": ["resume", "ID"],   // optional: in this order in the worker's argv
//	  "phases": ["awaiting-model", "tool-running"], // optional: the phases its watcher shows, fed stdout line by line
//	  "tags": ["parallel-tools"],          // optional: what else the case covers
//	  "block": true,                       // optional: the worker then hangs instead of exiting
//	  "retry_loop_ms": 1,                  // optional: the Dispatcher's StallPolicy.RetryLoop (-1: off)
//	  "idle_timeout_ms": 1000,             // optional: the Dispatcher's IdleTimeout
//	  "want": {"verdict": "completed", "failure_class": "", ...}
//	}
//
// "want" holds Verdict JSON keys, compared as JSON values (an omitted key
// is its zero value); it must give "verdict" and "failure_class" ("" for
// none). "failure_evidence_contains" is a substring of the verdict's
// failure_evidence_excerpt.
type Case struct {
	Source       string                     `json:"source"`
	Mode         pilot.Mode                 `json:"mode"`
	Resume       string                     `json:"resume"`
	ExitCode     int                        `json:"exit_code"`
	Signal       int                        `json:"signal"`
	ArgvContains []string                   `json:"argv_contains"`
	Phases       []pilot.SessionPhase       `json:"phases"`
	Tags         []string                   `json:"tags"`
	Block        bool                       `json:"block"`
	RetryLoopMS  int64                      `json:"retry_loop_ms"`
	IdleMS       int64                      `json:"idle_timeout_ms"`
	Want         map[string]json.RawMessage `json:"want"`
}

// Cases reads the cases in dir, by path without ".json". A case with an
// unknown field, no "source", or a "want" without "verdict" and
// "failure_class" is an error that names its file.
func Cases(dir string) (map[string]Case, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	quoted, _ := json.Marshal(abs)
	cases := map[string]Case{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c Case
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if c.Source == "" {
			return nil, fmt.Errorf("%s: no \"source\": say where the stream came from", f)
		}
		for _, k := range []string{"verdict", "failure_class"} {
			if _, ok := c.Want[k]; !ok {
				return nil, fmt.Errorf("%s: \"want\" has no %q", f, k)
			}
		}
		if c.Mode == "" {
			c.Mode = pilot.ModeCode
		}
		c.Resume = strings.ReplaceAll(c.Resume, "{case_dir}", abs)
		for i, a := range c.ArgvContains {
			c.ArgvContains[i] = strings.ReplaceAll(a, "{case_dir}", abs)
		}
		for k, v := range c.Want {
			c.Want[k] = bytes.ReplaceAll(v, []byte("{case_dir}"), quoted[1:len(quoted)-1])
		}
		cases[strings.TrimSuffix(f, ".json")] = c
	}
	return cases, nil
}

// Conformance runs every case in dir (see Case) against runner r: each is
// dispatched for real, the test binary replaying the recorded output under
// r's own command line (the provider's Binary; see Main), so that r's argv,
// the Dispatcher's diagnostics and r's watcher all take part, and its
// verdict is compared with the case's. When the case lists phases, r's
// watcher must be a pilot.PhaseWatcher showing them. It fails t when dir
// holds no case.
func Conformance(t *testing.T, r pilot.Runner, dir string) {
	t.Helper()
	cases, err := Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("no conformance cases in %s", dir)
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, prefix := range names {
		c := cases[prefix]
		t.Run(filepath.Base(prefix), func(t *testing.T) {
			t.Parallel()
			if c.Phases != nil {
				checkPhases(t, r, prefix, c)
			}
			p := ReplayProvider(t, r.Name(), prefix)
			p.Env[fakeagent.EnvReplayExit] = strconv.Itoa(c.ExitCode)
			p.Env[fakeagent.EnvReplaySignal] = strconv.Itoa(c.Signal)
			if c.Block {
				p.Env[fakeagent.EnvReplayBlock] = "1"
			}
			d := Dispatcher(t, []pilot.Provider{p}, r)
			d.Stall.RetryLoop = time.Duration(c.RetryLoopMS) * time.Millisecond
			d.IdleTimeout = time.Duration(c.IdleMS) * time.Millisecond
			if c.Block {
				if d.Stall.RetryLoop <= 0 && d.IdleTimeout <= 0 {
					t.Fatal("a blocking case needs retry_loop_ms or idle_timeout_ms to end it")
				}
				// A backstop: should neither end the worker, the verdict
				// says timeout and the case fails.
				d.Timeout = time.Minute
			}
			v, err := d.Dispatch(context.Background(), pilot.Task{Provider: p.Name, Mode: c.Mode, Prompt: "the conformance task", Resume: c.Resume})
			if err != nil {
				t.Fatal(err)
			}
			checkVerdict(t, v, c.Want)
			checkEvidenceIsTheCLIs(t, v, prefix)
			if c.ArgvContains != nil {
				argv := LastCall(t, p).Argv
				if !subsequence(argv, c.ArgvContains) {
					t.Errorf("argv %q does not hold %q in order", argv, c.ArgvContains)
				}
			}
		})
	}
}

// ReplayProvider is a provider of runner rn whose worker, the fake agent
// (see Main), replays a recorded run whatever its command line: it copies
// prefix.session to the path after "--session" in its argv when both exist
// (as pi writes it), prints prefix.stdout and prefix.stderr (either may be
// missing), records how it was started (LastCall), and exits 0. Set the
// provider's Binary and Args as the runner needs; the worker ignores them.
func ReplayProvider(t testing.TB, rn, prefix string) pilot.Provider {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return pilot.Provider{
		Name: rn, Runner: rn, Binary: exe,
		Env: map[string]string{
			fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0",
			fakeagent.EnvReplay: abs, fakeagent.EnvReplayExit: "0",
			fakeagent.EnvCallOut: filepath.Join(t.TempDir(), "call.json"),
		},
	}
}

// A Call is how a ReplayProvider's worker was started: its argv, its
// standard input, and its whole environment as NAME=value entries.
type Call struct {
	Argv  []string `json:"argv"`
	Stdin string   `json:"stdin"`
	Env   []string `json:"env"`
}

// LastCall is how the latest worker of p, a ReplayProvider, was started. It
// fails t when none has run.
func LastCall(t testing.TB, p pilot.Provider) Call {
	t.Helper()
	data, err := os.ReadFile(p.Env[fakeagent.EnvCallOut])
	if err != nil {
		t.Fatalf("the worker never ran: %v", err)
	}
	var c Call
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkVerdict compares the verdict's JSON form with want's keys.
func checkVerdict(t *testing.T, v pilot.Verdict, want map[string]json.RawMessage) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var w any
		if err := json.Unmarshal(want[k], &w); err != nil {
			t.Fatalf("want %s: %v", k, err)
		}
		if k == "failure_evidence_contains" {
			ex, _ := got["failure_evidence_excerpt"].(string)
			if s, _ := w.(string); !strings.Contains(ex, s) {
				t.Errorf("failure_evidence_excerpt %q does not contain %q", ex, s)
			}
			continue
		}
		g, present := got[k]
		if !present {
			switch w {
			case "", false, nil, float64(0):
				continue // omitted means zero
			}
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("verdict %s = %v, want %v", k, g, w)
		}
	}
	if t.Failed() {
		t.Logf("verdict: %s", data)
	}
}

// checkEvidenceIsTheCLIs checks that the excerpt of evidence read from the
// worker's output is the CLI's own words, a runner's note kept apart: a
// part of one of the case's output lines, or of a string in one of its
// JSON events.
func checkEvidenceIsTheCLIs(t *testing.T, v pilot.Verdict, prefix string) {
	t.Helper()
	ex := v.EvidenceExcerpt
	src := v.EvidenceSource
	if ex == "" || v.FailureClass == pilot.FailIncomplete || !strings.HasSuffix(src, ":stdout") && !strings.HasSuffix(src, ":stderr") {
		return // pilot's words: what the stream lacks, how it ended
	}
	// A worker that keeps a session file (pi) reports from it too.
	data, err := os.ReadFile(prefix + "." + src[strings.LastIndexByte(src, ':')+1:])
	if session, serr := os.ReadFile(prefix + ".session"); serr == nil {
		data, err = append(data, session...), nil
	}
	if err != nil {
		t.Fatalf("evidence from %s: %v", src, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, ex) || jsonStringHolds(line, ex) {
			return
		}
	}
	t.Errorf("failure_evidence_excerpt %q is not in the worker's %s: the excerpt is the CLI's words, a note goes in failure_evidence_note", ex, src)
}

// jsonStringHolds reports whether line is JSON with a string that holds s.
func jsonStringHolds(line, s string) bool {
	var v any
	if json.Unmarshal([]byte(line), &v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return strings.Contains(v, s)
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// checkPhases feeds the case's stdout to the watcher of r's command line by
// line and compares the distinct phases it showed with c.Phases.
func checkPhases(t *testing.T, r pilot.Runner, prefix string, c Case) {
	t.Helper()
	dir := t.TempDir()
	a := pilot.Attempt{
		Task:        pilot.Task{Provider: r.Name(), Mode: c.Mode, Prompt: "the conformance task", Resume: c.Resume},
		Provider:    pilot.Provider{Name: r.Name(), Runner: r.Name()},
		RunID:       "run-1",
		RunDir:      dir,
		TaskFile:    filepath.Join(dir, "task.md"),
		Prompt:      "the conformance task",
		Workdir:     dir,
		SessionPath: filepath.Join(dir, "session.jsonl"),
	}
	cmd, err := r.Command(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := cmd.Watcher.(pilot.PhaseWatcher)
	if !ok {
		t.Fatalf("the %s watcher (%T) does not follow phases", r.Name(), cmd.Watcher)
	}
	data, err := os.ReadFile(prefix + ".stdout")
	if err != nil {
		t.Fatal(err)
	}
	var phases []pilot.SessionPhase
	for _, l := range bytes.Split(data, []byte("\n")) {
		l = bytes.TrimSuffix(l, []byte("\r"))
		pw.Line(pilot.Line{Stream: pilot.Stdout, Data: l, Size: int64(len(l))})
		if st, _, ok := pw.StreamState(); ok && (len(phases) == 0 || phases[len(phases)-1] != st.Phase) {
			phases = append(phases, st.Phase)
		}
	}
	if !slices.Equal(c.Phases, phases) {
		t.Errorf("stream phases %v, want %v", phases, c.Phases)
	}
}

func subsequence(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}
