package pilot_test

import (
	"context"
	"encoding/json"
	"io/fs"
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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, rn := range pilot.BuiltinRunners() {
		for _, setup := range []string{"plain", "isolated", "base_url"} {
			if rn.Name() == pilot.RunnerCommand && setup != "plain" {
				continue
			}
			t.Run(rn.Name()+"/"+setup, func(t *testing.T) {
				t.Parallel()
				callOut := filepath.Join(t.TempDir(), "call.json")
				env := map[string]string{
					fakeagent.EnvFakeAgent:  "1",
					"GORACE":                "atexit_sleep_ms=0",
					fakeagent.EnvReplay:     filepath.Join(t.TempDir(), "nothing"),
					fakeagent.EnvReplayEcho: "VICTIM_KEY",
					fakeagent.EnvCallOut:    callOut,
					fakeagent.EnvReplayExit: "1",
				}
				victim := pilot.Provider{Name: "victim", Runner: rn.Name(), Binary: exe, Model: "prov/m1", CredentialEnv: "VICTIM_KEY", Env: env}
				if rn.Name() == pilot.RunnerCommand {
					victim.Binary, victim.Model = "", ""
					victim.Argv = []string{exe, "--key-in-argv=" + victimKey}
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
				n := 0
				filepath.WalkDir(d.RunDir, func(path string, de fs.DirEntry, err error) error {
					if err != nil || de.IsDir() || de.Type()&fs.ModeSymlink != 0 {
						return err
					}
					data, err := os.ReadFile(path)
					if err != nil {
						t.Errorf("reading %s: %v", path, err)
						return nil
					}
					n++
					if strings.Contains(string(data), victimKey) || strings.Contains(string(data), otherKey) {
						t.Errorf("%s holds a secret:\n%s", path, data)
					}
					return nil
				})
				if n < 3 {
					t.Errorf("walked %d files in the run directory; want at least record, stream and events", n)
				}
				stream, _ := os.ReadFile(readRecord(t, v).StreamLog)
				if !strings.Contains(string(stream), "invalid api key: [REDACTED]") {
					t.Errorf("stream.log does not show the redacted echo:\n%s", stream)
				}
				data, err := os.ReadFile(callOut)
				if err != nil {
					t.Fatalf("the worker never ran: %v", err)
				}
				var call fakeagent.Call
				if err := json.Unmarshal(data, &call); err != nil {
					t.Fatal(err)
				}
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
