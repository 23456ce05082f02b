//go:build unix

package pilot_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
)

// writeCredential writes content to dir/name with mode perm, whatever the
// umask.
func writeCredential(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

const fileSecret = "sk-file-secret-0123456789"

// checkCredentialFileError checks that err refuses path's credential file,
// naming it and the fix, and does not hold the secret.
func checkCredentialFileError(t *testing.T, err error, provider, path string, mode fs.FileMode, want []string) {
	t.Helper()
	var fe *config.CredentialFileError
	if !errors.As(err, &fe) || !errors.Is(err, config.ErrCredentialFile) {
		t.Fatalf("error = %v (%T); want a *CredentialFileError", err, err)
	}
	if fe.Provider != provider || fe.Path != path || fe.Mode != mode {
		t.Errorf("CredentialFileError = %+v; want provider %s, path %s, mode %v", fe, provider, path, mode)
	}
	if chmod := slices.Contains(want, "chmod 600 "); fe.Restore == chmod {
		t.Errorf("CredentialFileError.Restore = %v; want %v (storing again fixes all but a mode)", fe.Restore, !chmod)
	}
	msg := err.Error()
	for _, w := range append([]string{path}, want...) {
		if w == "chmod 600 " {
			w += path
		}
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	if strings.Contains(msg, fileSecret) || strings.Contains(fmt.Sprintf("%+v %#v", fe, fe), fileSecret) {
		t.Errorf("error %q holds the secret", msg)
	}
}

// A Dispatcher with DefaultCredentials refuses a world-readable credential
// file before anything runs, and names the fix.
func TestDispatchRefusesAnInsecureCredentialFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	dir := filepath.Join(home, "pilot", "credentials")
	os.MkdirAll(dir, 0o700)
	path := writeCredential(t, dir, "worker", fileSecret, 0o604)
	p := fakeProvider(t, "worker", "out=ran")
	p.CredentialEnv = "PILOT_TEST_WORKER_KEY"
	d := testDispatcher(t, p)
	d.Credentials = config.DefaultCredentials()
	t.Setenv("PILOT_TEST_WORKER_KEY", "")
	_, err := d.Dispatch(context.Background(), pilot.Task{Provider: "worker", Mode: pilot.ModeCode, Prompt: "x", Workdir: t.TempDir()})
	checkCredentialFileError(t, err, "worker", path, 0o604, []string{"chmod 600 "})
	if entries, _ := os.ReadDir(d.RunDir); len(entries) != 0 {
		t.Errorf("the run dir holds %d entries: something ran", len(entries))
	}
}
