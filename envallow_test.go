package pilot_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// envWorker is a command-runner provider whose worker, the fake agent,
// records its environment (readCall) and exits 0.
func envWorker(t *testing.T, name string) pilot.Provider {
	t.Helper()
	p := replayProvider(t, "command", filepath.Join(t.TempDir(), "nothing"))
	p.Name, p.Argv, p.Binary = name, []string{p.Binary}, ""
	return p
}

// A secret-looking variable in EnvAllow that no provider names is refused by
// Check, Dispatch and Fanout before anything runs; named by a provider as
// its CredentialEnv, it reaches that provider's worker and no other, as
// before.
func TestEnvAllowRefusesAStraySecret(t *testing.T) {
	checkGoroutines(t)
	for _, name := range []string{"OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "github_token"} {
		t.Run("refused/"+name, func(t *testing.T) {
			const value = "stray-secret-0c7d51a9"
			w := envWorker(t, "worker")
			d := testDispatcher(t, w)
			d.EnvAllow = append([]string{name}, pilot.DefaultEnvAllow...)
			d.LookupEnv = func(k string) (string, bool) {
				if k == name {
					return value, true
				}
				return os.LookupEnv(k)
			}
			want := "pilot: EnvAllow names " + name + ", which looks like a secret: give it to the provider that needs it as its credential_env"
			tk := pilot.Task{Provider: "worker", Mode: pilot.ModeCode, Prompt: "x", Workdir: t.TempDir()}
			check := func(what string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: error %v, want one saying %q", what, err, want)
				} else if strings.Contains(err.Error(), value) {
					t.Errorf("%s: the error holds the secret: %v", what, err)
				}
			}
			check("Check", d.Check(context.Background(), tk))
			v, err := d.Dispatch(context.Background(), tk)
			check("Dispatch", err)
			if v.RunID != "" {
				t.Errorf("Dispatch made run %s", v.RunID)
			}
			vs, err := (&pilot.Fanout{Dispatcher: d}).Run(context.Background(), []pilot.Job{{Task: tk}})
			check("Fanout", err)
			if vs != nil {
				t.Errorf("Fanout returned verdicts: %v", vs)
			}
			if _, err := os.Stat(w.Env[fakeagent.EnvCallOut]); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a worker ran (%v)", err)
			}
			assertEmptyDir(t, d.RunDir)
		})
	}

	t.Run("a provider's credential", func(t *testing.T) {
		const value = "owned-secret-4b19e2f0"
		owner := envWorker(t, "openai")
		owner.CredentialEnv = "OPENAI_API_KEY"
		other := envWorker(t, "other")
		d := testDispatcher(t, owner, other)
		d.EnvAllow = append([]string{"OPENAI_API_KEY"}, pilot.DefaultEnvAllow...)
		d.LookupEnv = func(k string) (string, bool) {
			if k == "OPENAI_API_KEY" {
				return value, true
			}
			return os.LookupEnv(k)
		}
		d.Credentials = config.EnvCredentials{LookupEnv: d.LookupEnv}
		for _, p := range []pilot.Provider{owner, other} {
			v := dispatch(t, d, pilot.Task{Provider: p.Name, Mode: pilot.ModeCode, Prompt: "x", Workdir: t.TempDir()})
			if v.ExitCode == nil || *v.ExitCode != 0 {
				t.Errorf("%s: the worker did not run to exit 0: %+v", p.Name, v)
			}
			_, env := readCall(t, p)
			got, ok := env["OPENAI_API_KEY"]
			switch {
			case p.Name == "openai" && got != value:
				t.Errorf("the owner's worker has OPENAI_API_KEY=%q (set: %v), want its credential", got, ok)
			case p.Name == "other" && ok:
				t.Errorf("another provider's worker has OPENAI_API_KEY=%q", got)
			}
		}
		noSecretIn(t, d.RunDir, value)
	})
}
