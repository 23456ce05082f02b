package agents_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/internal/strayfds"
	"github.com/pilotworkers/pilot/pilottest"
)

// Every agent CLI runner's worker starts with exactly fds 0, 1 and 2, each
// dispatched alone and all of them in one fanout whose jobs start
// together, though this process holds stray inheritable descriptors, as
// one started from a shell may. The fake agent records the descriptors it
// inherited (fakeagent.Call's FDs) before it does anything else.
func TestEveryRunnersWorkerStartsWithOnlyStdio(t *testing.T) {
	if !strayfds.InChild(t) {
		return
	}
	recorded := map[string]string{
		agents.RunnerPi:       "../testdata/pi/stream/success-gen-a",
		agents.RunnerCodex:    "../testdata/codex/stream/success-docs-sample",
		agents.RunnerClaude:   "../testdata/claude/stream/success",
		agents.RunnerOpencode: "../testdata/opencode/stream/success",
		agents.RunnerGemini:   "../testdata/gemini/stream/success",
		agents.RunnerKilo:     "../testdata/kilo/stream/success",
	}
	var ps []pilot.Provider
	for _, rn := range conformanceRunners() {
		prefix, ok := recorded[rn.Name()]
		if !ok {
			t.Fatalf("no recorded stream for the %s runner", rn.Name())
		}
		ps = append(ps, replayProvider(t, rn.Name(), prefix))
	}
	d := pilottest.Dispatcher(t, ps, agents.Runners()...)
	check := func(how string, p pilot.Provider, v pilot.Verdict) {
		t.Helper()
		if v.Verdict != pilot.Completed {
			t.Errorf("%s %s: verdict %s (%s), want completed", p.Name, how, v.Verdict, v.FailureClass)
		}
		data, err := os.ReadFile(p.Env[fakeagent.EnvCallOut])
		if err != nil {
			t.Fatalf("%s %s: the worker never ran: %v", p.Name, how, err)
		}
		var c fakeagent.Call
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.FDs, []int{0, 1, 2}) {
			t.Errorf("%s %s: the worker inherited fds %v, want [0 1 2]", p.Name, how, c.FDs)
		}
	}

	for _, p := range ps {
		v, err := d.Dispatch(context.Background(), pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "list your fds", Workdir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		check("alone", p, v)
	}

	var jobs []pilot.Job
	for _, p := range ps {
		os.Remove(p.Env[fakeagent.EnvCallOut]) // the lone dispatch's
		jobs = append(jobs, pilot.Job{Task: pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "list your fds", Workdir: t.TempDir()}})
	}
	vs, err := (&pilot.Fanout{Dispatcher: d}).Run(context.Background(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		check("in a fanout", ps[i], v.Verdict)
	}
}
