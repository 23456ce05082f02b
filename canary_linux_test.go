//go:build linux

package pilot_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/pilotslog"
	"github.com/pilotworkers/pilot/sandbox"
)

// The secret canary for other providers' secrets: a hostile worker that
// reads another provider's stored key (and is handed a third's, which
// pilot's environment holds) and prints them, on both streams and in a line
// long enough to spill, leaves neither in any file pilot wrote, any event,
// the slog output, any line OnLine saw, or its verdict, with the sandbox
// off (where the read works) and on (where it is denied).
func TestSecretCanaryOtherProvidersSecrets(t *testing.T) {
	const envKey = "canary-env-other-5b8e21f0-secret"
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.Secrets} {
		t.Run(string(mode), func(t *testing.T) {
			w := newSandboxWorld(t)
			stored := filepath.Join(w.store, "provb")
			d := w.dispatcher(t, "read:"+stored, "print:"+envKey, "print-long:"+envKey+w.otherSecret)
			envProv := pilot.Provider{Name: "provc", Runner: "command", Argv: []string{"true"}, CredentialEnv: "PROVC_TEST_KEY"}
			reg, err := d.Providers.With(envProv)
			if err != nil {
				t.Fatal(err)
			}
			d.Providers = reg
			lookup := d.LookupEnv
			d.LookupEnv = func(k string) (string, bool) {
				if k == "PROVC_TEST_KEY" {
					return envKey, true
				}
				return lookup(k)
			}
			d.Credentials = config.ChainCredentials{config.EnvCredentials{LookupEnv: d.LookupEnv}, config.FileCredentials{Dir: w.store}}
			d.MaxLineBytes = 4096
			var seen lockedBuffer
			logger := slog.New(slog.NewJSONHandler(&seen, &slog.HandlerOptions{Level: slog.LevelDebug}))
			d.Observer = pilotslog.Observer(logger)
			d.OnLine = func(_ string, l pilot.Line) { seen.Write(append(append([]byte(nil), l.Data...), '\n')) }
			tk := task("prova")
			tk.Workdir, tk.Sandbox = w.workdir, mode
			v := dispatch(t, d, tk)
			vj, _ := json.Marshal(v)
			for _, secret := range []string{w.otherSecret, envKey} {
				if strings.Contains(string(vj), secret) || strings.Contains(seen.String(), secret) {
					t.Errorf("the verdict or what observers and OnLine saw holds %q", secret)
				}
			}
			noSecretIn(t, filepath.Dir(v.Record), w.otherSecret, envKey)
			stream, _ := os.ReadFile(filepath.Join(filepath.Dir(v.Record), "stream.log"))
			readOK := strings.Contains(string(stream), "probe read:"+stored+" ok")
			if readOK != (mode == sandbox.Off) {
				t.Errorf("the stored key's read succeeded: %v; want %v under %s", readOK, mode == sandbox.Off, mode)
			}
			if !strings.Contains(string(stream), "leak [REDACTED]") || !strings.Contains(string(stream), " [REDACTED][REDACTED] ") {
				t.Errorf("stream.log lacks the redacted prints")
			}
		})
	}
}
