package pilot

import (
	"context"
	"fmt"
	"os"
)

// A CredentialSource hands the Dispatcher a provider's secret, for that
// provider's worker only. Implementations must be safe for concurrent use
// and must never put a secret value into an error. The config package has
// sources that read environment variables, 0600 files under the user's
// config dir, and chains of them, and that describe a credential without
// revealing it. A source that keeps secrets in files may also have a method
// CredentialPaths() []string naming them: no worker may read or write them
// (the config package's file and chain sources have it).
type CredentialSource interface {
	// Secret returns p's credential: "" when p needs none (its
	// CredentialEnv is empty), a *CredentialError when it needs one that
	// is not configured, another error when the source refuses the one it
	// found (a credential file others may read, say).
	Secret(ctx context.Context, p Provider) (string, error)
}

// envCredentials is the Dispatcher's CredentialSource when it has none:
// each provider's credential is its CredentialEnv variable in pilot's
// environment.
type envCredentials struct{}

func (envCredentials) Secret(_ context.Context, p Provider) (string, error) {
	if p.CredentialEnv == "" {
		return "", nil
	}
	if v := os.Getenv(p.CredentialEnv); v != "" {
		return v, nil
	}
	return "", &CredentialError{Provider: p.Name, Env: p.CredentialEnv}
}

// CredentialError reports a provider whose credential is not configured.
// Nothing was spawned.
type CredentialError struct {
	Provider string
	Env      string // the variable that should hold it, if known
}

func (e *CredentialError) Error() string {
	fix := "configure its credential source"
	if e.Env != "" {
		fix = "set " + e.Env + " in the environment, or configure its credential source"
	}
	return fmt.Sprintf("pilot: credential missing for %s; %s", e.Provider, fix)
}
