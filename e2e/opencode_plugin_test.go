package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/internal/fakellm"
)

// An isolated opencode worker installs no plugin SDK into its config dir:
// opencode asks the npm registry (the guard here, as NPM_CONFIG_REGISTRY)
// for nothing, and the config dir in the run directory holds only what
// pilot put there. Without agents' keepPluginSDKOut the guard sees
// "GET /@opencode-ai%2fplugin" from every worker, and where the registry
// is reachable each run directory gets 57 MB of it (README).
func TestOpencodeIsolatedWorkerInstallsNoPluginSDK(t *testing.T) {
	t.Parallel()
	bin := cliNamed(t, "opencode").binary(t)
	guard := newNetGuard(t)
	env := isolatedEnv(t, guard)
	delete(env, "TMPDIR") // the worker's is pilot's, <run dir>/tmp
	srv := fakellm.New(fakellm.Script{Steps: []fakellm.Step{fakellm.Text("done")}, Aside: aside("opencode")})
	t.Cleanup(srv.Close)
	prov := pilot.Provider{
		Name: "e2e-opencode", Runner: "opencode", Binary: bin, Model: "fake-model", CredentialEnv: fakeKeyEnv,
		Env: env, BaseURL: srv.URL() + "/v1",
	}
	reg, err := pilot.NewRegistry(prov)
	if err != nil {
		t.Fatal(err)
	}
	d := &pilot.Dispatcher{
		Runners: agents.Runners(), Providers: reg, RunDir: t.TempDir(), Timeout: 3 * time.Minute, IdleTimeout: 2 * time.Minute,
		Credentials: config.EnvCredentials{LookupEnv: func(k string) (string, bool) { return fakeKey, k == fakeKeyEnv }},
		LookupEnv: func(k string) (string, bool) {
			if k == "PATH" {
				return os.LookupEnv(k)
			}
			return "", false
		},
	}
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: prov.Name, Mode: pilot.ModeCode, Workdir: t.TempDir(), Prompt: "say done"})
	if err != nil || v.Verdict != pilot.Completed {
		t.Fatalf("dispatch: %v; verdict %s %s: %s", err, v.Verdict, v.FailureClass, v.StderrTail)
	}
	for _, r := range guard.seen() {
		if strings.Contains(r, "opencode-ai%2fplugin") || strings.Contains(r, "opencode-ai/plugin") {
			t.Errorf("opencode asked the registry for its plugin SDK: %q", r)
		}
	}
	cfg := filepath.Join(filepath.Dir(v.Record), "opencode", "config", "opencode")
	if ents, err := os.ReadDir(filepath.Join(cfg, "node_modules")); err != nil || len(ents) != 0 {
		t.Errorf("%s/node_modules: %v, %d entries; want it empty", cfg, err, len(ents))
	}
	if _, err := os.Stat(filepath.Join(cfg, "package.json")); !os.IsNotExist(err) {
		t.Errorf("opencode wrote a package.json into its config dir: %v", err)
	}
	t.Logf("run_dir_bytes %d", v.RunDirBytes)
}
