package pilototel_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) { pilottest.Main(m) }

// The secret canary over exported telemetry: real workers (the fake
// agent) of two providers, each with its own secret, print their key on
// stdout and stderr and fail; a third succeeds. No span, span event,
// status or metric attribute holds either secret, and the successful
// worker's first output line is measured.
func TestSecretCanaryTelemetry(t *testing.T) {
	tel, exp, reader := setup(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"ALPHA_KEY": "canary-alpha-7c1d93e0-secret", "BETA_KEY": "canary-beta-0b5e2f47-secret"}
	var ps []pilot.Provider
	for _, name := range []string{"alpha", "beta"} {
		env := strings.ToUpper(name) + "_KEY"
		ps = append(ps, pilot.Provider{Name: name, Runner: "command", Argv: []string{exe, "{prompt}"}, CredentialEnv: env, Env: map[string]string{
			fakeagent.EnvFakeAgent: "1", "GORACE": "atexit_sleep_ms=0",
			fakeagent.EnvReplay: filepath.Join(t.TempDir(), "nothing"), fakeagent.EnvReplayEcho: env, fakeagent.EnvReplayExit: "1",
		}})
	}
	ps = append(ps, pilottest.FakeProvider(t, "gamma", "out=hello", "err=working"))
	d := pilottest.Dispatcher(t, ps)
	lookup := func(k string) (string, bool) {
		if v, ok := secrets[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}
	d.EnvAllow = []string{"ALPHA_KEY", "BETA_KEY", "PATH", "HOME", "TMPDIR"}
	d.LookupEnv = lookup
	d.Credentials = config.EnvCredentials{LookupEnv: lookup}
	var jobs []pilot.Job
	for _, p := range ps {
		jobs = append(jobs, pilot.Job{Task: pilot.Task{Provider: p.Name, Mode: pilot.ModeExplore, Prompt: "the task", Workdir: t.TempDir()}})
	}
	vs, err := tel.Fanout(context.Background(), &pilot.Fanout{Dispatcher: tel.Instrument(d)}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Verdict.Verdict.Success() || vs[1].Verdict.Verdict.Success() || vs[2].Verdict.Verdict != pilot.Completed {
		t.Fatalf("verdicts: %s %s %s", vs[0].Verdict.Verdict, vs[1].Verdict.Verdict, vs[2].Verdict.Verdict)
	}

	var texts []string
	spans := exp.GetSpans().Snapshots()
	for _, s := range spans {
		texts = append(texts, s.Name(), s.Status().Description)
		for _, a := range s.Attributes() {
			texts = append(texts, string(a.Key)+"="+a.Value.Emit())
		}
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			for _, a := range e.Attributes {
				texts = append(texts, string(a.Key)+"="+a.Value.Emit())
			}
		}
	}
	m := collect(t, reader)
	for name, agg := range m {
		var sets []attribute.Set
		switch a := agg.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Sum[float64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Histogram[int64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, dp := range a.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		default:
			t.Errorf("%s: an aggregation the canary does not search: %T", name, agg)
		}
		for _, set := range sets {
			texts = append(texts, name+" "+set.Encoded(attribute.DefaultEncoder()))
		}
	}
	all := strings.Join(texts, "\n")
	for env, secret := range secrets {
		if strings.Contains(all, secret) {
			t.Errorf("%s's secret is in the exported telemetry", env)
		}
	}
	if !strings.Contains(all, "gen_ai.provider.name=alpha") {
		t.Errorf("the canary searched no metric attributes:\n%s", all)
	}
	if len(spans) != 7 { // the fanout, three tasks, three attempts
		t.Errorf("%d spans, want 7", len(spans))
	}
	if got := m.histCount("pilot.attempt.time_to_first_output"); got < 1 {
		t.Errorf("pilot.attempt.time_to_first_output has %d samples, want the workers that printed", got)
	}
}
