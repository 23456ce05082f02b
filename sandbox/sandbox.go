// Package sandbox describes how far a worker is confined: its mode, what a
// runner's CLI needs beyond its workdir, and what a run's record says was
// enforced.
//
// The modes, from least to most confined:
//
//   - Off: the worker has the user's whole authority, as any program the
//     user starts.
//   - Secrets (the default): the worker cannot read or write pilot's
//     credential store, the well-known secret stores (~/.ssh, ~/.aws,
//     ~/.gnupg, ~/.netrc, ...) or any other agent CLI's login and config
//     dirs; its own CLI keeps its own. Everything else is as with Off.
//   - Workspace: Secrets, and it writes only beneath its workdir, its run
//     directory, its private temp dir, its CLI's own state dirs, a few
//     devices (/dev/null, /dev/tty, ...) and the provider's sandbox_write.
//   - Strict: Workspace, and it connects over TCP only to its provider's
//     endpoint and the provider's sandbox_connect.
//
// In every mode where the kernel allows it, a worker can signal, trace, or
// reach through an abstract unix socket only processes of its own tree: one
// worker cannot end another, nor pilot's supervisor.
//
// On Linux pilot's supervisor enforces the modes with Landlock, applied to
// each worker alone (see the README's "Sandbox" section for its limits).
// On macOS pilot runs the worker beneath /usr/bin/sandbox-exec with a
// profile of the mode's rules, for Secrets and Workspace; Strict is not
// offered there (sandbox-exec cannot hold connections to one host), nor is
// the worker scoped. macOS refuses a sandbox inside another, so a CLI that
// sandboxes its own commands (Needs.Seatbelt) runs unconfined there, and
// so must any tool the worker runs that calls sandbox-exec itself.
// This package holds no mechanism: the pilot package applies it.
package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Mode is how far a worker is confined.
type Mode string

// The modes.
const (
	Off       Mode = "off"
	Secrets   Mode = "secrets"
	Workspace Mode = "workspace"
	Strict    Mode = "strict"
)

// Default is the mode of a worker whose task and provider name none.
const Default = Secrets

// ParseMode returns the mode s names; "" is the zero Mode (the default
// applies).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", Off, Secrets, Workspace, Strict:
		return m, nil
	}
	return "", fmt.Errorf("sandbox: unknown mode %q (want off, secrets, workspace or strict)", s)
}

// Needs is what a runner's CLI needs of the machine beyond the workdir, the
// run directory and the private temp dir. A runner declares it by
// giving its pilot.Runner a SandboxNeeds method (see pilot.Runner).
type Needs struct {
	// Own lists the CLI's own login and config paths (~/.codex, say).
	// They are a secret store to every other worker; the CLI's own
	// worker keeps them, to read and to write.
	Own []string
	// Write lists the directories the CLI writes (state, caches), which
	// Workspace and Strict keep writable. Pilot creates a missing one
	// (mode 0700) before the worker starts, in every mode: a confined
	// worker cannot create a new entry in $HOME, nor in any directory on
	// the way to a guarded path. So an Own directory the CLI would create
	// goes here too.
	Write []string
	// Connect lists the endpoints ("host:port") the CLI connects to when
	// its provider names none (its default API host).
	Connect []string
	// Seatbelt is whether the CLI runs its commands beneath its own
	// sandbox-exec (codex does). macOS refuses that inside another
	// sandbox, so on macOS pilot does not confine such a worker.
	Seatbelt bool
}

// Report is what a run's record and verdict say of its sandbox.
type Report struct {
	Mode Mode `json:"mode"`
	// Enforced is whether the mode's guards were applied. A default mode
	// the kernel cannot enforce runs unconfined, with Enforced false and
	// the Reason; a mode the task or provider asked for is never run
	// unenforced (Dispatch fails instead).
	Enforced  bool   `json:"enforced"`
	Mechanism string `json:"mechanism,omitempty"` // "landlock-abi-7", "sandbox-exec"
	Reason    string `json:"reason,omitempty"`
	// Profile is the file in the run directory that holds the profile a
	// "sandbox-exec" worker ran under: the record's argv is the CLI's,
	// and the worker ran as /usr/bin/sandbox-exec -p PROFILE -- followed
	// by that argv, its program's path resolved.
	Profile string `json:"profile,omitempty"`
	// Scoped is whether the worker was kept from signalling or tracing
	// processes outside its own tree, and from their abstract sockets.
	Scoped bool `json:"scoped"`
	// Allowed lists the paths the provider's sandbox_allow lifted the
	// guard from.
	Allowed []string `json:"allowed,omitempty"`
	// Network says how Strict held connections: "tcp-port" (to the
	// endpoints' ports, on any host). Connect lists the endpoints.
	Network string   `json:"network,omitempty"`
	Connect []string `json:"connect,omitempty"`
	// Denied is the latest line of a failed worker's output that shows
	// an access it was denied ("Permission denied", EACCES, EPERM):
	// evidence beside its failure class, which stays what its CLI said.
	Denied string `json:"denied,omitempty"`
}

// ErrUnavailable is matched (errors.Is) by an *UnavailableError.
var ErrUnavailable = errors.New("sandbox: mode cannot be enforced on this machine")

// UnavailableError reports a mode that was asked for and that this machine
// cannot enforce. Nothing was started.
type UnavailableError struct {
	Mode    Mode
	Missing string // the kernel feature or tool that is missing, and why
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("pilot: sandbox %s cannot be enforced here: %s; run without it with --sandbox off (Task.Sandbox = sandbox.Off, or \"sandbox\": \"off\" for the provider)", e.Mode, e.Missing)
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// SecretStores returns the well-known secret stores beneath home: pilot's
// own credential store at its default place, and keys, tokens and logins of
// ssh, cloud CLIs, package registries, git hosts and password managers. Every worker is denied them unless its provider's
// sandbox_allow names one.
func SecretStores(home string) []string {
	return under(home,
		".config/pilot/credentials", ".ssh", ".gnupg", ".aws", ".azure", ".oci", ".kube", ".docker/config.json",
		".netrc", ".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub",
		".config/glab-cli", ".config/gcloud", ".config/doctl", ".config/rclone", ".config/op",
		".npmrc", ".yarnrc", ".pypirc", ".gem/credentials", ".cargo/credentials",
		".cargo/credentials.toml", ".terraform.d/credentials.tfrc.json", ".vault-token",
		".password-store", ".local/share/keyrings", ".pgpass", ".my.cnf", ".s3cfg", ".boto",
	)
}

// AgentDirs returns the login and config dirs beneath home of the agent
// CLIs pilot knows, its own runners' among them. Every worker is denied
// them but its own CLI's, which its runner lists in Needs.Own.
func AgentDirs(home string) []string {
	return under(home,
		".codex", ".claude", ".claude.json", ".config/claude", ".gemini", ".pi",
		".config/opencode", ".local/share/opencode", ".local/state/opencode", ".cache/opencode",
		".cursor", ".config/github-copilot", ".aider", ".continue", ".qwen", ".factory",
		".config/goose", ".amp", ".config/amp", ".crush", ".config/crush", ".local/share/crush", ".kiro", ".grok",
		".config/kilo", ".local/share/kilo", ".local/state/kilo", ".local/state/kilo-sandbox-policy", ".cache/kilo",
		".copilot",
	)
}

func under(home string, rel ...string) []string {
	if home == "" {
		return nil
	}
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = filepath.Join(home, r)
	}
	return out
}
