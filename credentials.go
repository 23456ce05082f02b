package pilot

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// A CredentialSource tells whether a provider's credential is configured and
// hands its secret to the Dispatcher for that provider's worker only.
// Implementations must be safe for concurrent use, and must never put a
// secret value into an error.
//
// The sources here: [EnvCredentials] (environment variables),
// [FileCredentials] (one 0600 file per provider under the user's config
// dir), [ChainCredentials] (the first source that has it) and
// [DefaultCredentials] (environment, then files).
type CredentialSource interface {
	// Info describes the credential without revealing it. An error means
	// the source refuses the credential it found (a credential file that
	// others may read, say); Info then still reports where it looked.
	Info(ctx context.Context, p Provider) (CredentialInfo, error)
	// Secret returns the credential value. It is called only for a
	// provider whose Info reported Configured.
	Secret(ctx context.Context, p Provider) (Secret, error)
}

// CredentialInfo is what may be said about a credential: never its value.
type CredentialInfo struct {
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

// A Secret holds a credential value. Its String, GoString and JSON forms are
// redacted so it cannot leak through logging by accident; Reveal returns the
// value. The value is held behind a pointer so that fmt paths that skip
// String (%d, %p, a Secret in an unexported field) print an address, not it.
type Secret struct{ value *string }

// NewSecret wraps v.
func NewSecret(v string) Secret { return Secret{value: &v} }

// Reveal returns the secret value.
func (s Secret) Reveal() string {
	if s.value == nil {
		return ""
	}
	return *s.value
}

// String returns "[REDACTED]".
func (s Secret) String() string { return "[REDACTED]" }

// GoString returns "[REDACTED]".
func (s Secret) GoString() string { return "[REDACTED]" }

// MarshalJSON encodes the secret as "[REDACTED]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"[REDACTED]"`), nil }

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

// Info implements CredentialSource.
func (e EnvCredentials) Info(_ context.Context, p Provider) (CredentialInfo, error) {
	if p.CredentialEnv == "" {
		return CredentialInfo{Configured: true, Source: "none"}, nil
	}
	v, _ := e.lookup(p.CredentialEnv)
	return CredentialInfo{Configured: v != "", Source: "env:" + p.CredentialEnv}, nil
}

// Secret implements CredentialSource.
func (e EnvCredentials) Secret(_ context.Context, p Provider) (Secret, error) {
	if p.CredentialEnv == "" {
		return Secret{}, nil
	}
	v, _ := e.lookup(p.CredentialEnv)
	if v == "" {
		return Secret{}, &CredentialError{Provider: p.Name, Env: p.CredentialEnv}
	}
	return NewSecret(v), nil
}

// ErrCredentialMissing is matched (with errors.Is) by every *CredentialError.
var ErrCredentialMissing = errors.New("pilot: credential missing")

// CredentialError reports a provider whose credential is not configured.
// Nothing was spawned.
type CredentialError struct {
	Provider string
	Env      string // the variable that should hold it, if known
}

func (e *CredentialError) Error() string {
	fix := "configure its credential source"
	if e.Env != "" {
		fix = "set " + e.Env + " in the environment"
	}
	return fmt.Sprintf("credential missing for %s; %s (run: pilot credentials %s)", e.Provider, fix, e.Provider)
}

// Is reports whether target is ErrCredentialMissing.
func (e *CredentialError) Is(target error) bool { return target == ErrCredentialMissing }
