package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/pilotworkers/pilot"

	"github.com/pilotworkers/pilot/internal/atomicfile"
)

// A Source is a pilot.CredentialSource that can also describe a
// credential without revealing it (for a status display, and to pick the
// first source of a chain that has one).
type Source interface {
	pilot.CredentialSource
	// Info describes the credential without revealing it. An error means
	// the source refuses the credential it found (a credential file that
	// others may read, say); Info then still reports where it looked.
	Info(ctx context.Context, p pilot.Provider) (Info, error)
}

// Info is what may be said about a credential: never its value.
type Info struct {
	// Configured reports whether a non-empty credential is available (or
	// none is needed).
	Configured bool `json:"configured"`
	// SecureMode reports whether the secret comes from a store only its
	// owner can read: a credential file of mode 0600 or stricter. An
	// environment variable is not (any process that can read pilot's
	// environment sees it), and neither is a missing credential.
	SecureMode bool `json:"secure_mode"`
	// Source says where the credential comes from ("env:GLM_API_KEY",
	// "file:/home/u/.config/pilot/credentials/glm"), "none" when the
	// provider needs no credential, or, when it is not configured, every
	// place that was looked at, comma-separated.
	Source string `json:"source"`
}

// EnvCredentials reads each provider's credential from an environment
// variable named by Provider.CredentialEnv. The zero value reads the process
// environment.
type EnvCredentials struct {
	// LookupEnv replaces os.LookupEnv when set (tests, or an environment
	// captured at start-up).
	LookupEnv func(key string) (string, bool)
}

func (e EnvCredentials) lookup(key string) (string, bool) {
	if e.LookupEnv != nil {
		return e.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

// Info implements Source.
func (e EnvCredentials) Info(_ context.Context, p pilot.Provider) (Info, error) {
	if p.CredentialEnv == "" {
		return Info{Configured: true, Source: "none"}, nil
	}
	v, _ := e.lookup(p.CredentialEnv)
	return Info{Configured: v != "", Source: "env:" + p.CredentialEnv}, nil
}

// Secret implements pilot.CredentialSource.
func (e EnvCredentials) Secret(_ context.Context, p pilot.Provider) (string, error) {
	if p.CredentialEnv == "" {
		return "", nil
	}
	v, _ := e.lookup(p.CredentialEnv)
	if v == "" {
		return "", &pilot.CredentialError{Provider: p.Name, Env: p.CredentialEnv}
	}
	return v, nil
}

// DefaultCredentialsDir returns the directory [FileCredentials] reads by
// default: $XDG_CONFIG_HOME/pilot/credentials, or
// ~/.config/pilot/credentials when XDG_CONFIG_HOME is unset or not an
// absolute path (as the XDG base directory spec says). It returns "" when
// neither gives a directory.
func DefaultCredentialsDir() string {
	dir := configDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "pilot", "credentials")
}

// configDir is the user's XDG config directory, or "".
func configDir() string {
	if dir := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return dir
	}
	if home := os.Getenv("HOME"); filepath.IsAbs(home) {
		return filepath.Join(home, ".config")
	}
	return ""
}

// maxCredentialFile is the largest credential file pilot reads; anything
// bigger is not one credential.
const maxCredentialFile = 64 << 10

// FileCredentials reads each provider's credential from a file of its own,
// Dir/NAME, holding the secret alone (one trailing newline is ignored). It
// is meant for secrets nobody else may read: a file that group or others may
// read or write is refused with an error that names the file, its mode and
// the fix, and so is a symbolic link or anything but a regular file. A file
// of mode 0600 or stricter reports SecureMode. A missing or empty file is a
// credential that is not configured.
//
// The zero value reads [DefaultCredentialsDir]. [FileCredentials.Store]
// (the CLI's "pilot credentials NAME") writes such a file.
type FileCredentials struct {
	// Dir holds one file per provider; empty means DefaultCredentialsDir().
	Dir string
}

func (f FileCredentials) dir() string {
	if f.Dir != "" {
		return f.Dir
	}
	return DefaultCredentialsDir()
}

// Path returns the file that holds provider's credential, or "" when there
// is no directory to look in (Dir is empty and so is
// DefaultCredentialsDir) or provider is not a valid provider name.
func (f FileCredentials) Path(provider string) string {
	dir := f.dir()
	if dir == "" || !credentialName.MatchString(provider) {
		return ""
	}
	return filepath.Join(dir, provider)
}

// noDirSource is the Source of a file credential when there is no config
// directory to look in.
const noDirSource = "file:(no config dir: set HOME or XDG_CONFIG_HOME)"

// Info implements CredentialSource. It reads the file to check it.
func (f FileCredentials) Info(_ context.Context, p pilot.Provider) (Info, error) {
	if p.CredentialEnv == "" {
		return Info{Configured: true, Source: "none"}, nil
	}
	path, err := f.path(p)
	if err != nil || path == "" {
		return Info{Source: noDirSource}, err
	}
	info := Info{Source: "file:" + path}
	v, err := readCredentialFile(p.Name, path)
	if err != nil || v == "" {
		return info, err
	}
	info.Configured, info.SecureMode = true, true
	return info, nil
}

// Secret implements CredentialSource.
func (f FileCredentials) Secret(_ context.Context, p pilot.Provider) (string, error) {
	if p.CredentialEnv == "" {
		return "", nil
	}
	path, err := f.path(p)
	if err != nil {
		return "", err
	}
	var v string
	if path != "" {
		if v, err = readCredentialFile(p.Name, path); err != nil {
			return "", err
		}
	}
	if v == "" {
		return "", &pilot.CredentialError{Provider: p.Name, Env: p.CredentialEnv}
	}
	return v, nil
}

func (f FileCredentials) path(p pilot.Provider) (string, error) {
	if !credentialName.MatchString(p.Name) {
		return "", fmt.Errorf("pilot: provider name %q is not valid: use letters, digits, '.', '_' and '-'", p.Name)
	}
	return f.Path(p.Name), nil
}

// readCredentialFile returns the secret in path, "" when the file does not
// exist or is empty. It opens the file without following a symbolic link
// and without blocking on a FIFO, and checks what it opened, so the file
// cannot be swapped between the check and the read.
func readCredentialFile(provider, path string) (string, error) {
	fail := func(mode fs.FileMode, format string, a ...any) (string, error) {
		return "", &CredentialFileError{Provider: provider, Path: path, Mode: mode, Reason: fmt.Sprintf(format, a...), Restore: true}
	}
	file, err := os.OpenFile(path, os.O_RDONLY|credentialOpenFlags, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, syscall.ELOOP):
		return fail(fs.ModeSymlink, "is a symbolic link; pilot reads credentials only from a regular file it can check: replace the link with the file itself")
	case errors.Is(err, syscall.ENOTDIR):
		return "", nil // a component of Dir is a file: nothing stored there
	case err != nil:
		return "", fmt.Errorf("credential file for %s: %w", provider, err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return "", fmt.Errorf("credential file for %s: %w", provider, err)
	}
	mode := st.Mode()
	switch {
	case !mode.IsRegular():
		return fail(mode, "is not a regular file (mode %s); remove it and store the credential again", mode)
	case mode.Perm()&0o077 != 0:
		return "", &CredentialFileError{Provider: provider, Path: path, Mode: mode,
			Reason: fmt.Sprintf("has mode %#o, which lets group or others read or change it; pilot requires 0600 or stricter: run chmod 600 %s", mode.Perm(), path)}
	case st.Size() > maxCredentialFile:
		return fail(mode, "is larger than %d KiB, too large for one credential; store the credential again", maxCredentialFile>>10)
	}
	data, err := io.ReadAll(io.LimitReader(file, maxCredentialFile+1))
	if err != nil {
		return "", fmt.Errorf("credential file for %s: reading %s: %w", provider, path, err)
	}
	if len(data) > maxCredentialFile {
		return fail(mode, "is larger than %d KiB, too large for one credential; store the credential again", maxCredentialFile>>10)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	if len(data) == 0 {
		return "", nil
	}
	if problem := secretProblem(string(data)); problem != "" {
		return fail(mode, "is not usable: %s; the file must hold the secret alone on one line: store it again", problem)
	}
	return string(data), nil
}

// secretProblem says why s cannot be a credential value (an environment
// variable's value on one line), or "". It never quotes s.
func secretProblem(s string) string {
	switch {
	case s == "":
		return "the secret is empty"
	case strings.ContainsRune(s, 0):
		return "the secret holds a NUL byte"
	case strings.ContainsAny(s, "\r\n"):
		return "the secret holds a line break"
	}
	return ""
}

// Store writes secret as provider's credential file, atomically (a reader
// sees the old file or the new one), with mode 0600, creating the directory
// with mode 0700 when it is missing. It returns the file's path.
//
// It refuses an invalid provider name, a secret that is empty or is not
// one line without NUL bytes, and an existing directory that group or
// others may write to (they could replace the file). Errors never hold the
// secret.
func (f FileCredentials) Store(provider string, secret string) (string, error) {
	if !credentialName.MatchString(provider) {
		return "", fmt.Errorf("pilot: provider name %q is not valid: use letters, digits, '.', '_' and '-'", provider)
	}
	if problem := secretProblem(secret); problem != "" {
		return "", fmt.Errorf("pilot: storing the credential for %s: %s", provider, problem)
	}
	dir := f.dir()
	if dir == "" {
		return "", fmt.Errorf("pilot: storing the credential for %s: no config directory: set HOME or XDG_CONFIG_HOME", provider)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("pilot: storing the credential for %s: %w", provider, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("pilot: storing the credential for %s: %w", provider, err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("pilot: storing the credential for %s: directory %s has mode %#o, which lets group or others replace the files in it: run chmod 700 %s",
			provider, dir, st.Mode().Perm(), dir)
	}
	path := filepath.Join(dir, provider)
	// The temporary file atomicfile writes first is created 0600 too, so
	// the secret is never in a file others may read.
	if err := atomicfile.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pilot: storing the credential for %s: %w", provider, err)
	}
	return path, nil
}

// ErrCredentialFile is matched (with errors.Is) by every
// *CredentialFileError.
var ErrCredentialFile = errors.New("pilot: credential file refused")

// A CredentialFileError reports a credential file that [FileCredentials]
// refuses: one that group or others may read or change, a symbolic link,
// something other than a regular file, or content that is not one secret.
// Its message names the file and the fix; it never holds the secret.
// Nothing was spawned.
type CredentialFileError struct {
	Provider string
	Path     string
	// Mode is the file's type and permissions as found.
	Mode fs.FileMode
	// Reason says what is wrong and how to fix it ("has mode 0644, which
	// lets group or others read or change it; ... run chmod 600 PATH").
	Reason string
	// Restore is set when storing the credential again is the fix
	// (FileCredentials.Store), rather than a chmod.
	Restore bool
}

func (e *CredentialFileError) Error() string {
	return fmt.Sprintf("credential file %s for %s %s", e.Path, e.Provider, e.Reason)
}

// Is reports whether target is ErrCredentialFile.
func (e *CredentialFileError) Is(target error) bool { return target == ErrCredentialFile }

// ChainCredentials asks its sources in order: the first whose Info reports
// Configured supplies the credential. A source whose Info fails (a
// credential file refused for its mode, say) stops the chain with that
// error rather than falling through to a later source. When no source has
// the credential, Info reports every place it looked in Source.
type ChainCredentials []Source

// Info implements CredentialSource.
func (c ChainCredentials) Info(ctx context.Context, p pilot.Provider) (Info, error) {
	_, info, err := c.find(ctx, p)
	return info, err
}

// Secret implements CredentialSource.
func (c ChainCredentials) Secret(ctx context.Context, p pilot.Provider) (string, error) {
	src, _, err := c.find(ctx, p)
	if err != nil {
		return "", err
	}
	if src == nil {
		if p.CredentialEnv == "" {
			return "", nil
		}
		return "", &pilot.CredentialError{Provider: p.Name, Env: p.CredentialEnv}
	}
	return src.Secret(ctx, p)
}

// find returns the first source that has p's credential and its info, or
// a nil source and the info of a credential found nowhere.
func (c ChainCredentials) find(ctx context.Context, p pilot.Provider) (Source, Info, error) {
	var looked []string
	for _, src := range c {
		if src == nil {
			continue
		}
		info, err := src.Info(ctx, p)
		if err != nil {
			return nil, info, err
		}
		if info.Configured {
			return src, info, nil
		}
		if info.Source != "" {
			looked = append(looked, info.Source)
		}
	}
	if p.CredentialEnv == "" {
		return nil, Info{Configured: true, Source: "none"}, nil
	}
	return nil, Info{Source: strings.Join(looked, ", ")}, nil
}

// CredentialPaths names the store's directory,
// which no worker may read or write.
func (f FileCredentials) CredentialPaths() []string {
	if d := f.dir(); d != "" {
		return []string{d}
	}
	return nil
}

// CredentialPaths names every path its sources
// keep secrets in.
func (c ChainCredentials) CredentialPaths() []string {
	var out []string
	for _, src := range c {
		if cs, ok := src.(interface{ CredentialPaths() []string }); ok {
			out = append(out, cs.CredentialPaths()...)
		}
	}
	return out
}

// DefaultCredentials is the credential source pilot's command uses: the
// provider's environment variable first (an explicit override), then its
// file under [DefaultCredentialsDir].
func DefaultCredentials() ChainCredentials {
	return ChainCredentials{EnvCredentials{}, FileCredentials{}}
}

// credentialName is what a provider name may be (as pilot.NewRegistry
// checks), so that it is a safe file name.
var credentialName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
