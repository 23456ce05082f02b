package pilot

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/internal/text"
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

// landlockABI probes the kernel; tests replace it.
var landlockABI = sandbox.LandlockABI

// sandboxMode returns the worker's mode and whether it was asked for (the
// task, its provider or the Dispatcher named it) rather than the default.
func (r *run) sandboxMode() (sandbox.Mode, bool) {
	return modeOf(r.task, r.prov, r.d)
}

func modeOf(t Task, p Provider, d *Dispatcher) (sandbox.Mode, bool) {
	for _, m := range []sandbox.Mode{t.Sandbox, p.Sandbox, d.Sandbox} {
		if m != "" {
			return m, true
		}
	}
	return sandbox.Default, false
}

// checkSandbox refuses, before anything is made, a mode that is not one, or
// one asked for that this machine cannot enforce.
func (d *Dispatcher) checkSandbox(t Task, p Provider) error {
	for _, m := range []sandbox.Mode{t.Sandbox, d.Sandbox} {
		if _, err := sandbox.ParseMode(string(m)); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
	}
	mode, asked := modeOf(t, p, d)
	if !asked || mode == sandbox.Off {
		return nil
	}
	_, _, err := enforceable(mode)
	return err
}

// enforceable returns the Landlock ABI this kernel offers and why mode
// cannot be enforced with it (nil when it can), as an *UnavailableError.
// On macOS the ABI is 0 and sandbox-exec decides.
func enforceable(mode sandbox.Mode) (int, string, error) {
	if runtime.GOOS == "darwin" {
		reason, err := seatbeltEnforceable(mode, sandboxExec)
		return 0, reason, err
	}
	if runtime.GOOS != "linux" {
		return 0, "pilot enforces sandboxes with Landlock, which " + runtime.GOOS + " does not have",
			&sandbox.UnavailableError{Mode: mode, Missing: "Linux Landlock (this is " + runtime.GOOS + ")"}
	}
	abi, abiErr := landlockABI()
	need := mode.NeedsABI()
	if abi >= need {
		return abi, "", nil
	}
	missing := fmt.Sprintf("Landlock ABI %d or later (this kernel offers ABI %d)", need, abi)
	if abiErr != nil {
		missing = fmt.Sprintf("Landlock, which this kernel does not offer (%v)", abiErr)
	}
	return abi, "needs " + missing + ": ran unconfined", &sandbox.UnavailableError{Mode: mode, Missing: missing}
}

// enforcedMode is the mode confine will enforce on the worker: Off when it
// applies no filesystem rules (mode off, or a mode the kernel cannot
// enforce: a default one runs unconfined, an asked-for one fails).
func (r *run) enforcedMode() sandbox.Mode {
	mode, _ := r.sandboxMode()
	if mode == sandbox.Off {
		return sandbox.Off
	}
	if _, _, err := enforceable(mode); err != nil {
		return sandbox.Off
	}
	return mode
}

// confine decides the sandbox of the worker whose environment is env: the
// Landlock ruleset the supervisor applies to it (nil for none) and the
// report its record and verdict carry. A mode that was asked for and cannot
// be enforced is an error, and nothing is started.
func (r *run) confine(env []string) (*landlock.Ruleset, sandbox.Report, error) {
	mode, asked := r.sandboxMode()
	rep := sandbox.Report{Mode: mode}
	if runtime.GOOS != "linux" {
		if runtime.GOOS == "darwin" {
			rep, err := r.confineSeatbelt(mode, asked, sandboxExec)
			return nil, rep, err
		}
		_, reason, err := enforceable(mode)
		rep.Reason = reason
		if mode == sandbox.Off {
			rep.Reason = "sandbox off"
		} else if asked {
			return nil, rep, err
		}
		return nil, rep, nil
	}
	abi, _ := landlockABI()
	rs := &landlock.Ruleset{}
	if abi >= sandbox.ScopeABI {
		rs.Scope = landlock.ScopeSignal | landlock.ScopeAbstractUnixSocket
		rep.Scoped = true
	}
	if mode == sandbox.Off {
		rep.Reason = "sandbox off"
		return scopedOnly(rs, abi), rep, nil
	}
	if _, reason, err := enforceable(mode); err != nil {
		if asked {
			return nil, rep, err
		}
		rep.Reason = reason
		return scopedOnly(rs, abi), rep, nil
	}

	// The CLI finds its files in the worker's HOME, which the provider's
	// env may move; the user's own secrets stay guarded all the same.
	home, user := envValue(env, "HOME"), r.home()
	if home == "" {
		home = user
	}
	needs := r.needs(home)
	guard, allow, write := r.sandboxPaths(mode, needs, home, user, sandboxDevices)
	rep.Allowed = expandHome(r.prov.SandboxAllow, home)
	pol := landlock.Policy{ReadAll: true, WriteAll: mode == sandbox.Secrets, Guard: guard, Allow: allow, Write: write}
	rs.FS = landlock.FSRights(abi)
	rs.Paths = landlock.Plan(pol, rs.FS, nil)
	if mode == sandbox.Strict {
		rs.Net = landlock.NetConnectTCP
		rep.Network = "tcp-port"
		rep.Connect = r.endpoints(needs)
		for _, hp := range rep.Connect {
			_, port, _ := net.SplitHostPort(hp)
			if n, err := strconv.ParseUint(port, 10, 16); err == nil {
				rs.Ports = append(rs.Ports, uint16(n))
			}
		}
	}
	rep.Enforced = true
	rep.Mechanism = "landlock-abi-" + strconv.Itoa(abi)
	return rs, rep, nil
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

// tmpDir is the worker's private temp dir, in its run directory.
func (r *run) tmpDir() string { return filepath.Join(r.dir, "tmp") }

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

// The words of a denied access, as the C library, Node.js, Python and Go
// print one.
var denialWords = [][]byte{[]byte("ermission denied"), []byte("not permitted"), []byte("EACCES"), []byte("EPERM")}

// noteDenial keeps the latest output line of a confined worker that shows
// an access it was denied: evidence beside the verdict of a worker that
// failed, whose class stays what its own failure says. Called with lineMu
// held.
func (r *run) noteDenial(l Line) {
	if !r.confined || l.Truncated {
		return
	}
	for _, w := range denialWords {
		if bytes.Contains(l.Data, w) {
			r.denial = text.FirstRunes(strings.ToValidUTF8(string(l.Data), "\uFFFD"), stderrTailRunes)
			return
		}
	}
}
