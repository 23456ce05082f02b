//go:build unix

package config_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
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

func TestFileCredentials(t *testing.T) {
	glm := pilot.Provider{Name: "glm", Runner: "opencode", CredentialEnv: "ZHIPU_API_KEY"}
	// What a test case expects.
	const (
		secure  = iota // configured, secure mode, Secret is fileSecret
		missing        // not configured; Secret reports a *CredentialError
		refused        // Info and Secret report a *CredentialFileError
		none           // the provider needs no credential
	)
	file := func(content string, perm os.FileMode) func(*testing.T, string) string {
		return func(t *testing.T, dir string) string { return writeCredential(t, dir, "glm", content, perm) }
	}
	tests := []struct {
		name string
		// setup makes dir/glm (or not) and returns its path.
		setup  func(t *testing.T, dir string) string
		p      pilot.Provider
		expect int
		// For refused: the file's mode as found and what the message
		// must say besides the path.
		wantMode fs.FileMode
		wantErr  []string
	}{
		{name: "0600 with a trailing newline", setup: file(fileSecret+"\n", 0o600), expect: secure},
		{name: "0400 without a newline", setup: file(fileSecret, 0o400), expect: secure},
		{name: "CRLF line end", setup: file(fileSecret+"\r\n", 0o600), expect: secure},
		{name: "missing", setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "glm") }, expect: missing},
		{name: "directory missing", setup: func(t *testing.T, dir string) string { os.Remove(dir); return filepath.Join(dir, "glm") }, expect: missing},
		{name: "empty", setup: file("", 0o600), expect: missing},
		{name: "just a newline", setup: file("\n", 0o600), expect: missing},
		{name: "world-readable", setup: file(fileSecret+"\n", 0o644), expect: refused,
			wantMode: 0o644, wantErr: []string{"has mode 0644", "0600 or stricter", "chmod 600 "}},
		{name: "group-readable", setup: file(fileSecret+"\n", 0o640), expect: refused,
			wantMode: 0o640, wantErr: []string{"has mode 0640", "chmod 600 "}},
		{name: "others may write", setup: file(fileSecret+"\n", 0o602), expect: refused,
			wantMode: 0o602, wantErr: []string{"has mode 0602", "chmod 600 "}},
		{name: "symbolic link to a good file", setup: func(t *testing.T, dir string) string {
			target := writeCredential(t, t.TempDir(), "target", fileSecret+"\n", 0o600)
			path := filepath.Join(dir, "glm")
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			return path
		}, expect: refused, wantMode: fs.ModeSymlink, wantErr: []string{"symbolic link", "replace the link with the file itself"}},
		{name: "directory", setup: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "glm")
			os.Mkdir(path, 0o700)
			return path
		}, expect: refused, wantMode: fs.ModeDir | 0o700, wantErr: []string{"not a regular file"}},
		{name: "FIFO (read without blocking)", setup: func(t *testing.T, dir string) string {
			path := filepath.Join(dir, "glm")
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skip(err)
			}
			return path
		}, expect: refused, wantMode: fs.ModeNamedPipe | 0o600, wantErr: []string{"not a regular file"}},
		{name: "two lines", setup: file(fileSecret+"\n"+fileSecret+"\n", 0o600), expect: refused,
			wantMode: 0o600, wantErr: []string{"line break", "store it again"}},
		{name: "NUL byte", setup: file(fileSecret+"\x00\n", 0o600), expect: refused,
			wantMode: 0o600, wantErr: []string{"NUL"}},
		{name: "too large", setup: file(fileSecret+strings.Repeat("x", 64<<10), 0o600), expect: refused,
			wantMode: 0o600, wantErr: []string{"larger than 64 KiB"}},
		{name: "no credential needed", setup: file(fileSecret, 0o644), p: pilot.Provider{Name: "glm", Runner: "pi"}, expect: none},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "credentials")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := tt.setup(t, dir)
			p := tt.p
			if p.Name == "" {
				p = glm
			}
			creds := config.FileCredentials{Dir: dir}
			info, infoErr := creds.Info(ctx, p)
			sec, secErr := creds.Secret(ctx, p)
			wantInfo := config.Info{Source: "file:" + path}
			wantSecret := ""
			switch tt.expect {
			case secure:
				wantInfo.Configured, wantInfo.SecureMode, wantSecret = true, true, fileSecret
				if infoErr != nil || secErr != nil {
					t.Errorf("Info: %v; Secret: %v", infoErr, secErr)
				}
			case missing:
				if infoErr != nil {
					t.Errorf("Info: %v", infoErr)
				}
				var ce *pilot.CredentialError
				if !errors.As(secErr, &ce) || ce.Provider != p.Name || ce.Env != p.CredentialEnv {
					t.Errorf("Secret error = %v; want a *CredentialError for %s", secErr, p.Name)
				}
			case refused:
				for _, err := range []error{infoErr, secErr} {
					checkCredentialFileError(t, err, p.Name, path, tt.wantMode, tt.wantErr)
				}
			case none:
				wantInfo = config.Info{Configured: true, Source: "none"}
				if infoErr != nil || secErr != nil {
					t.Errorf("Info: %v; Secret: %v", infoErr, secErr)
				}
			}
			if diff := cmp.Diff(wantInfo, info); diff != "" {
				t.Errorf("Info mismatch (-want +got):\n%s", diff)
			}
			if got := sec; got != wantSecret {
				t.Errorf("Secret() = %q; want %q", got, wantSecret)
			}
		})
	}
}

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

func TestConfigDirDefaults(t *testing.T) {
	home := t.TempDir()
	xdg := t.TempDir()
	tests := []struct {
		name, xdg, home string
		wantBase        string
	}{
		{"XDG_CONFIG_HOME", xdg, home, xdg},
		{"HOME when XDG_CONFIG_HOME is unset", "", home, filepath.Join(home, ".config")},
		{"HOME when XDG_CONFIG_HOME is relative", "relative/config", home, filepath.Join(home, ".config")},
		{"neither", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			wantCreds, wantProviders := "", ""
			if tt.wantBase != "" {
				wantCreds = filepath.Join(tt.wantBase, "pilot", "credentials")
				wantProviders = filepath.Join(tt.wantBase, "pilot", "providers.json")
			}
			if got := config.DefaultCredentialsDir(); got != wantCreds {
				t.Errorf("DefaultCredentialsDir() = %q; want %q", got, wantCreds)
			}
			if got := config.DefaultProvidersFile(); got != wantProviders {
				t.Errorf("DefaultProvidersFile() = %q; want %q", got, wantProviders)
			}
			wantPath := ""
			if wantCreds != "" {
				wantPath = filepath.Join(wantCreds, "glm")
			}
			if got := (config.FileCredentials{}).Path("glm"); got != wantPath {
				t.Errorf("FileCredentials{}.Path(glm) = %q; want %q", got, wantPath)
			}
		})
	}
}

func TestFileCredentialsWithoutAConfigDir(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "")
	p := pilot.Provider{Name: "glm", Runner: "opencode", CredentialEnv: "ZHIPU_API_KEY"}
	info, err := config.FileCredentials{}.Info(context.Background(), p)
	if err != nil || info.Configured || !strings.Contains(info.Source, "HOME") {
		t.Errorf("Info = %+v, %v; want not configured, a source that says to set HOME", info, err)
	}
	if _, err := (config.FileCredentials{}).Store("glm", fileSecret); err == nil || !strings.Contains(err.Error(), "HOME") {
		t.Errorf("Store error = %v; want one that says to set HOME", err)
	}
}

func TestFileCredentialsStore(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	var creds config.FileCredentials // the default dir, made by Store
	dir := filepath.Join(home, "pilot", "credentials")
	p := pilot.Provider{Name: "glm", Runner: "opencode", CredentialEnv: "ZHIPU_API_KEY"}
	ctx := context.Background()

	path, err := creds.Store("glm", fileSecret)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "glm"); path != want {
		t.Errorf("Store returned %s; want %s", path, want)
	}
	checkStored(t, path, fileSecret)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v (%v); want a directory of mode 0700", d, st.Mode(), err)
		}
	}
	sec, err := creds.Secret(ctx, p)
	if err != nil || sec != fileSecret {
		t.Errorf("reading it back: %v", err)
	}

	// Storing again replaces the file; a file someone left world-readable
	// comes back 0600.
	os.Chmod(path, 0o644)
	if _, err := creds.Store("glm", "sk-second-value"); err != nil {
		t.Fatal(err)
	}
	checkStored(t, path, "sk-second-value")

	// A symbolic link in the file's place is replaced, not followed.
	target := writeCredential(t, t.TempDir(), "target", "untouched", 0o600)
	os.Remove(path)
	os.Symlink(target, path)
	if _, err := creds.Store("glm", fileSecret); err != nil {
		t.Fatal(err)
	}
	checkStored(t, path, fileSecret)
	if data, _ := os.ReadFile(target); string(data) != "untouched" {
		t.Errorf("the link's target was changed to %q", data)
	}

	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries; want only glm (no temporary files)", dir, len(entries))
	}
}

func checkStored(t *testing.T, path, secret string) {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v; want a regular file of mode 0600", path, st.Mode())
	}
	if data, _ := os.ReadFile(path); string(data) != secret+"\n" {
		t.Errorf("%s holds %q; want the secret and a newline", path, data)
	}
}

func TestFileCredentialsStoreRefusals(t *testing.T) {
	const secret = "sk-refused-secret-0123456789"
	tests := []struct {
		name     string
		provider string
		secret   string
		dirMode  os.FileMode // 0: the directory does not exist
		want     string
	}{
		{"empty name", "", secret, 0, "provider name"},
		{"path in the name", "../glm", secret, 0, "provider name"},
		{"slash in the name", "a/b", secret, 0, "provider name"},
		{"hidden name", ".glm", secret, 0, "provider name"},
		{"empty secret", "glm", "", 0, "empty"},
		{"two lines", "glm", secret + "\n" + secret, 0, "line break"},
		{"trailing newline", "glm", secret + "\n", 0, "line break"},
		{"NUL byte", "glm", secret + "\x00", 0, "NUL"},
		{"group-writable directory", "glm", secret, 0o770, "chmod 700"},
		{"world-writable directory", "glm", secret, 0o703, "chmod 700"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "credentials")
			if tt.dirMode != 0 {
				os.Mkdir(dir, tt.dirMode)
				os.Chmod(dir, tt.dirMode)
			}
			_, err := config.FileCredentials{Dir: dir}.Store(tt.provider, tt.secret)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Store error = %v; want one that mentions %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds the secret", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%s holds %d entries after a refusal", dir, len(entries))
			}
		})
	}
}

// fakeSource is a CredentialSource with fixed answers that records the
// calls it gets.
type fakeSource struct {
	name   string
	info   config.Info
	err    error
	secret string
	calls  *[]string
}

func (f fakeSource) Info(_ context.Context, p pilot.Provider) (config.Info, error) {
	*f.calls = append(*f.calls, f.name+".Info")
	return f.info, f.err
}

func (f fakeSource) Secret(_ context.Context, p pilot.Provider) (string, error) {
	*f.calls = append(*f.calls, f.name+".Secret")
	return f.secret, nil
}

func TestChainCredentials(t *testing.T) {
	refused := &config.CredentialFileError{Provider: "glm", Path: "/c/glm", Mode: 0o644, Reason: "has mode 0644"}
	p := pilot.Provider{Name: "glm", Runner: "opencode", CredentialEnv: "ZHIPU_API_KEY"}
	type src struct {
		configured bool
		source     string
		err        error
	}
	tests := []struct {
		name       string
		p          pilot.Provider
		srcs       []src
		wantInfo   config.Info
		wantErr    error
		wantSecret string
		wantCalls  []string
	}{
		{
			name:       "the first configured source wins",
			srcs:       []src{{source: "env:K"}, {configured: true, source: "file:/c/glm"}, {configured: true, source: "third"}},
			wantInfo:   config.Info{Configured: true, Source: "file:/c/glm"},
			wantSecret: "from-1",
			wantCalls:  []string{"0.Info", "1.Info", "0.Info", "1.Info", "1.Secret"},
		},
		{
			name:       "an earlier source shadows a later one",
			srcs:       []src{{configured: true, source: "env:K"}, {configured: true, source: "file:/c/glm"}},
			wantInfo:   config.Info{Configured: true, Source: "env:K"},
			wantSecret: "from-0",
			wantCalls:  []string{"0.Info", "0.Info", "0.Secret"},
		},
		{
			name:      "a refusal stops the chain",
			srcs:      []src{{source: "env:K"}, {source: "file:/c/glm", err: refused}, {configured: true, source: "third"}},
			wantInfo:  config.Info{Source: "file:/c/glm"},
			wantErr:   refused,
			wantCalls: []string{"0.Info", "1.Info", "0.Info", "1.Info"},
		},
		{
			name:      "found nowhere: every place it looked",
			srcs:      []src{{source: "env:K"}, {source: "file:/c/glm"}},
			wantInfo:  config.Info{Source: "env:K, file:/c/glm"},
			wantErr:   &pilot.CredentialError{Provider: "glm", Env: "ZHIPU_API_KEY"},
			wantCalls: []string{"0.Info", "1.Info", "0.Info", "1.Info"},
		},
		{
			name:      "no sources",
			wantInfo:  config.Info{},
			wantErr:   &pilot.CredentialError{Provider: "glm", Env: "ZHIPU_API_KEY"},
			wantCalls: nil,
		},
		{
			name:      "no credential needed",
			p:         pilot.Provider{Name: "pi", Runner: "pi"},
			wantInfo:  config.Info{Configured: true, Source: "none"},
			wantCalls: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			chain := config.ChainCredentials{nil} // nil entries are skipped
			for i, s := range tt.srcs {
				chain = append(chain, fakeSource{
					name:   fmt.Sprint(i),
					info:   config.Info{Configured: s.configured, Source: s.source},
					err:    s.err,
					secret: fmt.Sprintf("from-%d", i),
					calls:  &calls,
				})
			}
			prov := tt.p
			if prov.Name == "" {
				prov = p
			}
			ctx := context.Background()
			info, err := chain.Info(ctx, prov)
			if diff := cmp.Diff(tt.wantInfo, info); diff != "" {
				t.Errorf("Info mismatch (-want +got):\n%s", diff)
			}
			if want := tt.wantErr; want == refused && err != refused {
				t.Errorf("Info error = %v; want the refusal", err)
			} else if want != refused && err != nil {
				t.Errorf("Info error = %v", err)
			}
			sec, err := chain.Secret(ctx, prov)
			switch want := tt.wantErr.(type) {
			case nil:
				if err != nil {
					t.Errorf("Secret error = %v", err)
				}
			case *pilot.CredentialError:
				var ce *pilot.CredentialError
				if !errors.As(err, &ce) || *ce != *want {
					t.Errorf("Secret error = %v; want %v", err, want)
				}
			default:
				if err != want {
					t.Errorf("Secret error = %v; want %v", err, want)
				}
			}
			if sec != tt.wantSecret {
				t.Errorf("Secret = %q; want %q", sec, tt.wantSecret)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultCredentials(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	const env = "PILOT_TEST_DEFAULT_CREDENTIALS_KEY"
	p := pilot.Provider{Name: "glm", Runner: "opencode", CredentialEnv: env}
	path := filepath.Join(home, "pilot", "credentials", "glm")
	ctx := context.Background()
	creds := config.DefaultCredentials()

	t.Setenv(env, "")
	info, err := creds.Info(ctx, p)
	if want := (config.Info{Source: "env:" + env + ", file:" + path}); err != nil || info != want {
		t.Errorf("nothing configured: Info = %+v, %v; want %+v", info, err, want)
	}

	if _, err := (config.FileCredentials{}).Store("glm", fileSecret); err != nil {
		t.Fatal(err)
	}
	info, err = creds.Info(ctx, p)
	if want := (config.Info{Configured: true, SecureMode: true, Source: "file:" + path}); err != nil || info != want {
		t.Errorf("stored file: Info = %+v, %v; want %+v", info, err, want)
	}
	if sec, err := creds.Secret(ctx, p); err != nil || sec != fileSecret {
		t.Errorf("stored file: Secret = %v, %v", sec, err)
	}

	// The environment is an explicit override, even of a file that would
	// be refused.
	os.Chmod(path, 0o644)
	t.Setenv(env, "sk-from-the-environment")
	info, err = creds.Info(ctx, p)
	if want := (config.Info{Configured: true, Source: "env:" + env}); err != nil || info != want {
		t.Errorf("environment set: Info = %+v, %v; want %+v", info, err, want)
	}
	if sec, err := creds.Secret(ctx, p); err != nil || sec != "sk-from-the-environment" {
		t.Errorf("environment set: Secret = %v, %v", sec, err)
	}
}

// Credentials stored with FileCredentials.Store are found by the default
// chain when the environment does not set them.
func ExampleFileCredentials() {
	dir, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(dir)
	creds := config.FileCredentials{Dir: dir}
	glm := pilot.Provider{Name: "glm", Runner: agents.RunnerOpencode, CredentialEnv: "ZHIPU_API_KEY"}

	path, _ := creds.Store("glm", "sk-example")
	info, _ := creds.Info(context.Background(), glm)
	fmt.Println(info.Configured, info.SecureMode, info.Source == "file:"+path)

	os.Chmod(path, 0o644) // now others may read it
	_, err := creds.Info(context.Background(), glm)
	fmt.Println(errors.Is(err, config.ErrCredentialFile))
	fmt.Println(strings.ReplaceAll(err.Error(), dir, "DIR"))
	// Output:
	// true true true
	// true
	// credential file DIR/glm for glm has mode 0644, which lets group or others read or change it; pilot requires 0600 or stricter: run chmod 600 DIR/glm
}

// The environment comes first, then the credential file.
func ExampleChainCredentials() {
	dir, _ := os.MkdirTemp("", "pilot-example-")
	defer os.RemoveAll(dir)
	env := map[string]string{}
	chain := config.ChainCredentials{
		config.EnvCredentials{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }},
		config.FileCredentials{Dir: dir},
	}
	glm := pilot.Provider{Name: "glm", Runner: agents.RunnerOpencode, CredentialEnv: "ZHIPU_API_KEY"}
	show := func() {
		info, _ := chain.Info(context.Background(), glm)
		fmt.Println(info.Configured, strings.ReplaceAll(info.Source, dir, "DIR"))
	}
	show()
	config.FileCredentials{Dir: dir}.Store("glm", "sk-from-file")
	show()
	env["ZHIPU_API_KEY"] = "sk-from-env"
	show()
	// Output:
	// false env:ZHIPU_API_KEY, file:DIR/glm
	// true file:DIR/glm
	// true env:ZHIPU_API_KEY
}
