package pilot_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// The conformance suite runs one body of tests against every agent CLI
// runner over recorded streams in testdata/<runner>/stream/. A case is
// NAME.json beside NAME.stdout, and optionally NAME.stderr and NAME.session
// (copied to the path after "--session", as pi writes it):
//
//	{
//	  "source": "where the stream came from (research file and line, upstream test, or built from the format)",
//	  "mode": "code",                 // the task's mode; default code
//	  "resume": "",                   // Task.Resume; "{case_dir}" is the case's directory
//	  "exit_code": 0, "signal": 0,    // how the replaying worker ends
//	  "argv_contains": ["resume", "ID"], // optional: in this order in the worker's argv ({case_dir} too)
//	  "phases": ["awaiting-model", "tool-running"], // optional: the stream phases, fed line by line
//	  "tags": ["parallel-tools"],     // optional: what else the case covers, for the coverage table
//	                                  // ("tool-use" for a CLI whose stream never shows a tool running)
//	  "block": true,                  // optional: the worker then hangs instead of exiting
//	  "retry_loop_ms": 1,             // optional: the Dispatcher's StallPolicy.RetryLoop (-1: off)
//	  "idle_timeout_ms": 1000,        // optional: the Dispatcher's IdleTimeout
//	  "want": {"verdict": "completed", "failure_class": "", ...}
//	}
//
// "want" holds Verdict JSON keys, compared as JSON values; it must give
// "verdict" and "failure_class" ("" for none). "failure_evidence_contains"
// is a substring of the verdict's failure_evidence_excerpt.
//
// Each case is dispatched for real: the test binary replays the recorded
// output under the runner's own command line (the provider's Binary), so
// the runner's argv, the Dispatcher's diagnostics and the runner's watcher
// all take part.
type conformanceCase struct {
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

func conformanceRunners() []pilot.Runner {
	var out []pilot.Runner
	for _, r := range agents.Runners() {
		if r.Name() != pilot.RunnerCommand {
			out = append(out, r)
		}
	}
	return out
}

func loadConformance(t *testing.T, runner string) map[string]conformanceCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", runner, "stream", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]conformanceCase{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c conformanceCase
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Source == "" {
			t.Errorf("%s: no \"source\": say where the stream came from", f)
		}
		for _, k := range []string{"verdict", "failure_class"} {
			if _, ok := c.Want[k]; !ok {
				t.Errorf("%s: want has no %q", f, k)
			}
		}
		if c.Mode == "" {
			c.Mode = pilot.ModeCode
		}
		// {case_dir} is the case's directory, absolute: resume paths.
		dir, err := filepath.Abs(filepath.Dir(f))
		if err != nil {
			t.Fatal(err)
		}
		c.Resume = strings.ReplaceAll(c.Resume, "{case_dir}", dir)
		for i, a := range c.ArgvContains {
			c.ArgvContains[i] = strings.ReplaceAll(a, "{case_dir}", dir)
		}
		quoted, _ := json.Marshal(dir)
		for k, v := range c.Want {
			c.Want[k] = bytes.ReplaceAll(v, []byte("{case_dir}"), quoted[1:len(quoted)-1])
		}
		cases[strings.TrimSuffix(f, ".json")] = c
	}
	return cases
}

func TestConformance(t *testing.T) {
	for _, rn := range conformanceRunners() {
		t.Run(rn.Name(), func(t *testing.T) {
			cases := loadConformance(t, rn.Name())
			if len(cases) == 0 {
				t.Fatalf("no cases in testdata/%s/stream", rn.Name())
			}
			for prefix, c := range cases {
				t.Run(filepath.Base(prefix), func(t *testing.T) {
					t.Parallel()
					if c.Phases != nil {
						checkStreamPhases(t, rn, prefix, c)
					}
					p := replayProvider(t, rn.Name(), prefix)
					p.Env[fakeagent.EnvReplayExit] = strconv.Itoa(c.ExitCode)
					p.Env[fakeagent.EnvReplaySignal] = strconv.Itoa(c.Signal)
					if c.Block {
						p.Env[fakeagent.EnvReplayBlock] = "1"
					}
					d := testDispatcher(t, p)
					d.Stall.RetryLoop = time.Duration(c.RetryLoopMS) * time.Millisecond
					d.IdleTimeout = time.Duration(c.IdleMS) * time.Millisecond
					if c.Block {
						if d.Stall.RetryLoop <= 0 && d.IdleTimeout <= 0 {
							t.Fatal("a blocking case needs retry_loop_ms or idle_timeout_ms to end it")
						}
						// A backstop: should neither end the worker, the
						// verdict says timeout and the case fails.
						d.Timeout = time.Minute
					}
					v := mustDispatch(t, d, pilot.Task{Provider: p.Name, Mode: c.Mode, Prompt: "the conformance task", Resume: c.Resume})
					checkVerdict(t, v, c.Want)
					if c.ArgvContains != nil {
						call, _ := readCall(t, p)
						if !subsequence(call.Argv, c.ArgvContains) {
							t.Errorf("argv %q does not hold %q in order", call.Argv, c.ArgvContains)
						}
					}
				})
			}
		})
	}
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
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("verdict %s (-want +got):\n%s", k, diff)
		}
	}
	if t.Failed() {
		t.Logf("verdict: %s", data)
	}
}

// checkStreamPhases feeds the case's stdout to the runner's watcher line by
// line and compares the distinct phases it showed with c.Phases.
func checkStreamPhases(t *testing.T, rn pilot.Runner, prefix string, c conformanceCase) {
	t.Helper()
	pw := agentWatcher(t, rn, agentAttempt(t, rn.Name(), pilot.Provider{}, c.Mode, c.Resume, "the conformance task", ""))
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
	if diff := cmp.Diff(c.Phases, phases); diff != "" {
		t.Errorf("stream phases (-want +got):\n%s", diff)
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

// TestConformanceCoverage checks that every runner's cases cover what the
// suite promises, and logs the table of runners × outcomes (go test -run
// TestConformanceCoverage -v).
func TestConformanceCoverage(t *testing.T) {
	kinds := []string{"completed", "tool use", "parallel tools", "step cap", "empty", "incomplete", "resume", "provider fault", "termination"}
	var table strings.Builder
	fmt.Fprintf(&table, "%-9s", "runner")
	for _, k := range kinds {
		fmt.Fprintf(&table, " | %s", k)
	}
	table.WriteString("\n")
	for _, rn := range conformanceRunners() {
		count := map[string]int{}
		classes := map[string]bool{}
		for _, c := range loadConformance(t, rn.Name()) {
			var verdict, class string
			json.Unmarshal(c.Want["verdict"], &verdict)
			json.Unmarshal(c.Want["failure_class"], &class)
			switch {
			case verdict == string(pilot.Completed):
				count["completed"]++
			case verdict == string(pilot.StepCappedPartial):
				count["step cap"]++
			case verdict == string(pilot.Empty):
				count["empty"]++
			case class == string(pilot.FailIncomplete):
				count["incomplete"]++
			case class == string(pilot.FailProcessTerminated):
				count["termination"]++
			case verdict == string(pilot.Failed):
				count["provider fault"]++
				classes[class] = true
			}
			if c.Resume != "" {
				count["resume"]++
			}
			tools := 0
			for _, p := range c.Phases {
				if p == pilot.PhaseToolRunning {
					tools++
				}
			}
			if tools > 0 || slices.Contains(c.Tags, "tool-use") {
				count["tool use"]++
			}
			if slices.Contains(c.Tags, "parallel-tools") {
				count["parallel tools"]++
			}
		}
		fmt.Fprintf(&table, "%-9s", rn.Name())
		for _, k := range kinds {
			fmt.Fprintf(&table, " | %d", count[k])
		}
		cl := make([]string, 0, len(classes))
		for c := range classes {
			cl = append(cl, c)
		}
		sort.Strings(cl)
		fmt.Fprintf(&table, " | faults: %s\n", strings.Join(cl, ", "))
		for _, k := range []string{"completed", "tool use", "parallel tools", "empty", "resume", "provider fault"} {
			if count[k] == 0 {
				t.Errorf("%s: no conformance case for %s", rn.Name(), k)
			}
		}
	}
	t.Logf("conformance cases per runner:\n%s", table.String())
}
