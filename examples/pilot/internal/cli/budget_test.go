package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot/pilottest"
)

// A fanout with --max-cost-usd starts no job once its finished jobs have
// spent it: the rest are skipped for the budget, in the JSON and on the
// terminal's summary.
func TestFanoutMaxCostUSD(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "pi-run")
	stream := strings.Join([]string{
		`{"type":"session","version":3,"id":"s-1","timestamp":"2026-03-16T09:12:03.512Z","cwd":"/p"}`,
		`{"type":"agent_start"}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"usage":{"input":20,"output":3,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.6}},"stopReason":"stop"}}`,
		`{"type":"agent_end","messages":[]}`,
	}, "\n") + "\n"
	os.WriteFile(prefix+".stdout", []byte(stream), 0o644)
	p := pilottest.ReplayProvider(t, "pi", prefix)
	f := newFixture(t, nil)
	writeProviders(t, f.providers, map[string]map[string]any{"mypi": {"runner": "pi", "binary": p.Binary, "env": p.Env}})
	args := []string{"fanout", "--providers", "mypi,mypi,mypi", "--mode", "review", "--task-file", f.taskFile,
		"--workdir", f.workdir, "--providers-file", f.providers, "--run-dir", f.runDir, "--max-parallel", "1", "--max-cost-usd", "1"}
	code, out, errOut := runCLI(args...)
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 1 || len(vs) != 3 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	for i, want := range []string{"completed", "completed", "error"} {
		if vs[i]["verdict"] != want {
			t.Errorf("job %d: verdict %v, want %s", i+1, vs[i]["verdict"], want)
		}
	}
	if vs[2]["skipped"] != "budget" || vs[2]["failure_class"] != "budget-exceeded" ||
		!strings.Contains(vs[2]["failure_evidence_excerpt"].(string), "spent $1.2000 of its MaxCostUSD $1.0000") {
		t.Errorf("job 3: %v; want skipped for the budget", vs[2])
	}
	if code, _, errOut := runCLI(append(args[:len(args)-1], "-3")...); code != 2 || !strings.Contains(errOut, "want a positive amount of US dollars") {
		t.Errorf("--max-cost-usd -3: exit %d, stderr %s", code, errOut)
	}
}

// A cap the provider's runner cannot follow while the worker runs is
// refused, and nothing runs.
func TestDispatchMaxTokensTheRunnerCannotFollow(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	code, out, errOut := runCLI(f.args("dispatch", "ok", "--max-tokens", "1000")...)
	if code == 0 || !strings.Contains(out+errOut, "runner command reports no token usage while its worker runs") {
		t.Errorf("exit %d\nstdout %s\nstderr %s; want the refusal", code, out, errOut)
	}
}
