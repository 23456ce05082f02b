package pilot_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// The secret canary: for every runner, a worker whose CLI prints its own
// key (as an API error quoting it would) leaves that key in no file of its
// run directory (records, logs, the config files the runner wrote for an
// isolated or custom-endpoint worker), in no verdict field, and it never
// receives another provider's key, even when that key's variable is in the
// environment allowlist.
func TestSecretCanaryAcrossArtefacts(t *testing.T) {
	const victimKey = "canary-victim-6f1e9b2d-secret"
	const otherKey = "canary-other-a3c47e10-secret"
	for _, rn := range pilot.BuiltinRunners() {
		for _, setup := range []string{"plain", "isolated", "base_url"} {
			if rn.Name() == pilot.RunnerCommand && setup != "plain" {
				continue
			}
			t.Run(rn.Name()+"/"+setup, func(t *testing.T) {
				t.Parallel()
				victim := replayProvider(t, rn.Name(), filepath.Join(t.TempDir(), "nothing"))
				victim.Name, victim.Model, victim.CredentialEnv = "victim", "prov/m1", "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayEcho] = "VICTIM_KEY"
				victim.Env[fakeagent.EnvReplayExit] = "1"
				if rn.Name() == pilot.RunnerCommand {
					victim.Argv = []string{victim.Binary, "--key-in-argv=" + victimKey}
					victim.Binary, victim.Model = "", ""
				}
				switch setup {
				case "isolated":
					victim.Isolated = true
				case "base_url":
					victim.BaseURL = "http://127.0.0.1:9/v1"
				}
				other := pilot.Provider{Name: "other", Runner: pilot.RunnerCommand, Argv: []string{"true"}, CredentialEnv: "OTHER_KEY"}
				d := testDispatcher(t, victim, other)
				d.EnvAllow = append([]string{"OTHER_KEY"}, pilot.DefaultEnvAllow...)
				keys := map[string]string{"VICTIM_KEY": victimKey, "OTHER_KEY": otherKey, "PATH": os.Getenv("PATH")}
				d.LookupEnv = func(k string) (string, bool) { v, ok := keys[k]; return v, ok }
				d.Credentials = pilot.EnvCredentials{LookupEnv: d.LookupEnv}
				v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "victim", Mode: pilot.ModeCode, Prompt: "the task"})
				if err != nil {
					if setup == "base_url" && strings.Contains(err.Error(), "base_url") {
						t.Skipf("%s takes no custom endpoint: %v", rn.Name(), err)
					}
					t.Fatal(err)
				}
				vj, _ := json.Marshal(v)
				if strings.Contains(string(vj), victimKey) || strings.Contains(string(vj), otherKey) {
					t.Errorf("the verdict holds a secret: %s", vj)
				}
				n := noSecretIn(t, d.RunDir, victimKey, otherKey)
				if n < 3 {
					t.Errorf("walked %d files in the run directory; want at least record, stream and events", n)
				}
				stream, _ := os.ReadFile(readRecord(t, v).StreamLog)
				if !strings.Contains(string(stream), "invalid api key: [REDACTED]") {
					t.Errorf("stream.log does not show the redacted echo:\n%s", stream)
				}
				call, _ := readCall(t, victim)
				got := false
				for _, kv := range call.Env {
					if strings.Contains(kv, otherKey) {
						t.Errorf("the worker received another provider's key: %s", kv)
					}
					if kv == "VICTIM_KEY="+victimKey {
						got = true
					}
				}
				if !got {
					t.Errorf("the worker did not receive its own key in VICTIM_KEY")
				}
				if rn.Name() != pilot.RunnerCommand && strings.Contains(strings.Join(call.Argv, " "), victimKey) {
					t.Errorf("the runner put the secret on the command line: %q", call.Argv)
				}
			})
		}
	}
}
