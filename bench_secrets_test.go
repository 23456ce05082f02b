package pilot_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// benchKey is a made-up key shaped like a vendor's: prefix, then random
// base62 characters up to n bytes. What redaction costs depends on a key's
// bytes, so the benchmarks use realistic ones.
func benchKey(prefix string, n int, seed uint64) string {
	const base62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(seed, seed))
	b := []byte(prefix)
	for len(b) < n {
		b = append(b, base62[r.IntN(len(base62))])
	}
	return string(b)
}

// benchKeys are the secrets of the benchmarks' providers: the first is the
// dispatched provider's, the others those of seven more providers.
var benchKeys = []string{
	benchKey("sk-ant-api03-", 108, 1),
	benchKey("sk-proj-", 164, 2),
	benchKey("", 32, 3),
	benchKey("AIza", 39, 4),
	benchKey("sk-", 51, 5),
	benchKey("glm-", 49, 6),
	benchKey("xai-", 84, 7),
	benchKey("gsk_", 56, 8),
}

// secretsDispatcher is a Dispatcher over p and, when others is set, seven
// more providers, every one with a credential: p's and two others' in the
// environment, four in credential files, one missing (as a configured
// provider whose key is not set up). Only p's worker runs.
func secretsDispatcher(b *testing.B, p pilot.Provider, others bool) *pilot.Dispatcher {
	p.CredentialEnv = "BENCH_KEY_0"
	ps := []pilot.Provider{p}
	env := map[string]string{"BENCH_KEY_0": benchKeys[0], "PATH": os.Getenv("PATH")}
	files := config.FileCredentials{Dir: filepath.Join(b.TempDir(), "credentials")}
	if others {
		for i := 1; i < len(benchKeys); i++ {
			name := fmt.Sprintf("other%d", i)
			ps = append(ps, pilot.Provider{Name: name, Runner: "command", Argv: []string{"true"}, CredentialEnv: fmt.Sprintf("BENCH_KEY_%d", i)})
			switch {
			case i <= 2:
				env[fmt.Sprintf("BENCH_KEY_%d", i)] = benchKeys[i]
			case i < len(benchKeys)-1:
				if _, err := files.Store(name, benchKeys[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	d := testDispatcher(b, ps...)
	d.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	d.Credentials = config.ChainCredentials{config.EnvCredentials{LookupEnv: d.LookupEnv}, files}
	return d
}

// BenchmarkStreamSecrets is BenchmarkStreamRecorded's command case (pilot's
// own cost per line) with secrets to redact: none, the worker's own, and
// the worker's own with seven more providers', six of them set up.
func BenchmarkStreamSecrets(b *testing.B) {
	keepSupervisor(b)
	dir := b.TempDir()
	path := filepath.Join(dir, "stream.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err := measure.RecordedStream(f, agents.RunnerCodex, 64<<20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	script, err := measure.CatScript(dir)
	if err != nil {
		b.Fatal(err)
	}
	p := measure.RunnerStreamProvider("command", script, path)
	p.Binary, p.Argv = "", []string{script}
	for _, c := range []struct {
		name           string
		secret, others bool
	}{{"none", false, false}, {"own", true, false}, {"eight", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			d := testDispatcher(b, p)
			if c.secret {
				d = secretsDispatcher(b, p, c.others)
			}
			d.RunDir = filepath.Join(b.TempDir(), "runs")
			t := pilot.Task{Provider: "stream", Mode: pilot.ModeReview, Prompt: "x", Workdir: dir}
			b.SetBytes(n)
			for b.Loop() {
				b.StopTimer()
				os.RemoveAll(d.RunDir)
				b.StartTimer()
				if err := measure.StreamOK(context.Background(), d, t, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDispatchProviders is BenchmarkDispatchTrivial with a credential,
// alone in its registry and among seven more providers with theirs (env,
// files, one missing): what resolving the other providers' secrets, for
// redaction, costs a dispatch.
func BenchmarkDispatchProviders(b *testing.B) {
	keepSupervisor(b)
	p := pilot.Provider{Name: "echo", Runner: "command", Argv: []string{"/bin/echo", "ok"}}
	for _, c := range []struct {
		name   string
		others bool
	}{{"alone", false}, {"eight", true}} {
		b.Run(c.name, func(b *testing.B) {
			d := secretsDispatcher(b, p, c.others)
			tk := pilot.Task{Provider: "echo", Mode: pilot.ModeCode, Prompt: "x", Workdir: b.TempDir()}
			ctx := context.Background()
			dispatchOK := func() {
				v, err := d.Dispatch(ctx, tk)
				if err != nil {
					b.Fatalf("Dispatch: %v", err)
				}
				if v.Verdict != pilot.Completed {
					b.Fatalf("verdict = %q (%s), want %q", v.Verdict, v.FailureClass, pilot.Completed)
				}
			}
			dispatchOK() // warm-up: starts the supervisor
			for b.Loop() {
				dispatchOK()
			}
			reportMSPerJob(b)
		})
	}
}
