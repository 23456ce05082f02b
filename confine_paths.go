package pilot

// This file is what a confined worker needs and what it must not reach:
// the paths and endpoints the sandbox of either OS is built from.

import (
	"bytes"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/sandbox"
)

// sandboxRunner is a Runner whose CLI keeps files of its own or connects to
// a default endpoint (see Runner): SandboxNeeds tells the sandbox what to
// guard from other workers and what its own worker needs.
type sandboxRunner interface {
	Runner
	SandboxNeeds(p Provider, home string) sandbox.Needs
}

// credentialStore is a CredentialSource that keeps secrets in files (see
// CredentialSource): no worker may read or write CredentialPaths.
type credentialStore interface {
	CredentialSource
	CredentialPaths() []string
}

// needs is what the worker's runner declares its CLI needs, for a worker
// whose home is home; nothing for a runner that declares nothing.
func (r *run) needs(home string) sandbox.Needs {
	if sr, ok := r.runner.(sandboxRunner); ok {
		return sr.SandboxNeeds(r.prov, home)
	}
	return sandbox.Needs{}
}

// sandboxPaths returns, as named, the paths mode guards from the worker
// (the secret stores and other CLIs' dirs beneath home and the user's own
// home, the credential store), the paths the guard is lifted from (the
// CLI's own, the provider's sandbox_allow) and, but in secrets, the paths
// it may write (devices among them). A missing write dir of the CLI's is
// made, in every mode: a new entry in $HOME, or in any directory on the way
// to a guarded path, is out of a confined worker's reach.
func (r *run) sandboxPaths(mode sandbox.Mode, needs sandbox.Needs, home, user string, devices []string) (guard, allow, write []string) {
	own := needs.Own
	if cs, ok := r.d.Credentials.(credentialStore); ok {
		guard = append(guard, cs.CredentialPaths()...)
	}
	for _, h := range []string{home, user} {
		guard = append(guard, sandbox.SecretStores(h)...)
		guard = append(guard, sandbox.AgentDirs(h)...)
		for _, other := range r.d.allRunners() {
			sr, ok := other.(sandboxRunner)
			if !ok || (other.Name() == r.runner.Name() && h == home) {
				continue
			}
			guard = append(guard, sr.SandboxNeeds(Provider{}, h).Own...)
		}
		if user == home {
			break
		}
	}
	guard = slices.DeleteFunc(guard, func(p string) bool { return slices.Contains(own, p) })
	allow = slices.Concat(own, expandHome(r.prov.SandboxAllow, home))
	for _, w := range needs.Write {
		if _, err := os.Stat(w); errors.Is(err, os.ErrNotExist) {
			_ = os.MkdirAll(w, 0o700) // the CLI would make it; it cannot once confined
		}
	}
	if mode != sandbox.Secrets {
		write = slices.Concat([]string{r.task.Workdir, r.dir, r.tmpDir()}, own, needs.Write,
			expandHome(r.prov.SandboxWrite, home), devices)
		if gitdir := worktreeGitdir(r.task.Workdir); gitdir != "" {
			write = append(write, gitdir)
		}
	}
	return guard, allow, write
}

// scopedOnly is rs with everything beneath / granted, when it scopes
// anything, else nil: nothing to apply. A domain that handles no filesystem
// right does not keep its processes from tracing others (Linux 6.18: they
// could read /proc/PID/mem of any process of the user); one that handles
// them all, and grants them all, does, and leaves the filesystem as it is.
func scopedOnly(rs *landlock.Ruleset, abi int) *landlock.Ruleset {
	if rs.Scope == 0 {
		return nil
	}
	rs.FS = landlock.FSRights(abi)
	rs.Paths = []landlock.PathRule{{Path: []byte("/"), Access: rs.FS}}
	return rs
}

// sandboxDevices are the devices a workspace worker may write: the sinks,
// sources and terminals programs open for writing as a matter of course.
var sandboxDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// endpoints returns the host:port endpoints a strict worker may connect to:
// the provider's base_url, else its CLI's defaults, and its sandbox_connect.
func (r *run) endpoints(needs sandbox.Needs) []string {
	var out []string
	if u, err := url.Parse(r.prov.BaseURL); err == nil && r.prov.BaseURL != "" {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port))
	} else {
		out = append(out, needs.Connect...)
	}
	for _, hp := range r.prov.SandboxConnect {
		if !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	return out
}

// envValue returns the value of the variable name in env ("" when unset).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// home is the user's home directory: the HOME pilot's environment gives
// workers, else the user's own.
func (r *run) home() string {
	if h, ok := r.d.LookupEnv("HOME"); ok && h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// allRunners returns every runner the Dispatcher has, the command runner
// included, once each by name.
func (d *Dispatcher) allRunners() []Runner {
	seen := map[string]bool{}
	var out []Runner
	for i := len(d.Runners) - 1; i >= 0; i-- {
		if n := d.Runners[i].Name(); !seen[n] {
			seen[n] = true
			out = append(out, d.Runners[i])
		}
	}
	return out
}

// worktreeGitdir returns the private git directory of the linked worktree
// dir (its .git file's "gitdir:"), which a worker in it writes (its index,
// HEAD), or "" when dir is not a linked worktree.
func worktreeGitdir(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return ""
	}
	rest, ok := bytes.CutPrefix(data, []byte("gitdir: "))
	if !ok {
		return ""
	}
	gitdir := strings.TrimSpace(string(rest))
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	return filepath.Clean(gitdir)
}

func expandHome(paths []string, home string) []string {
	var out []string
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if home == "" {
				continue
			}
			p = filepath.Join(home, rest)
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}
