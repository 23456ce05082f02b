package config_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
)

// FuzzCredentialFile: whatever a stored credential file holds, reading it
// gives the secret alone (the file without one trailing line break), no
// secret, or a *CredentialFileError that never quotes the content.
func FuzzCredentialFile(f *testing.F) {
	for _, s := range []string{"sk-secret\n", "sk-secret\r\n", "", "\n", "a\nb\n", "a\x00b", "two\n\n", "\xff\xfe"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	fc := config.FileCredentials{Dir: dir}
	p := pilot.Provider{Name: "fuzz", Runner: "command", Argv: []string{"true"}, CredentialEnv: "FUZZ_KEY"}
	path := fc.Path(p.Name)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
		s, err := fc.Secret(context.Background(), p)
		var fe *config.CredentialFileError
		switch {
		case len(want) == 0:
			if !errors.As(err, new(*pilot.CredentialError)) {
				t.Errorf("%q: error %v, want a *CredentialError (no secret stored)", data, err)
			}
		case bytes.ContainsAny(want, "\x00\r\n"):
			if !errors.As(err, &fe) {
				t.Errorf("%q: error %v, want a *CredentialFileError", data, err)
			}
		case err != nil:
			t.Errorf("%q: %v", data, err)
		case s != string(want):
			t.Errorf("secret %q from %q, want %q", s, data, want)
		}
		if err != nil && len(want) >= 6 && strings.Contains(err.Error(), string(want)) {
			t.Errorf("the error quotes the file: %v", err)
		}
	})
}
