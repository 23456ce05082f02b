package pilot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pilotworkers/pilot/internal/seatbelt"
	"github.com/pilotworkers/pilot/sandbox"
)

// This file is confine on macOS. It builds on every OS, so that its tests
// run where Landlock does; confine calls it on darwin alone.

// sandboxExec is macOS's sandbox-exec. Pilot runs it from this path only,
// never from the worker's PATH.
const sandboxExec = "/usr/bin/sandbox-exec"

// seatbeltDevices are the devices a macOS workspace worker may write: the
// sinks and sources, its terminal, the descriptor files, and dtrace's
// helper, which dyld opens for a program with USDT probes (node has some).
var seatbeltDevices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/fd", "/dev/stdout", "/dev/stderr", "/dev/dtracehelper"}

// confineSeatbelt decides a macOS worker's sandbox, with exe as
// sandbox-exec: Secrets and Workspace run the worker beneath
// "exe -p PROFILE --" (r.wrapper), with the profile also written to the run
// directory for the record; Strict is never offered. A mode that was asked
// for and cannot be enforced is an error, as on Linux. Nothing is scoped:
// macOS has no equivalent of Landlock's signal scope.
func (r *run) confineSeatbelt(mode sandbox.Mode, asked bool, exe string) (sandbox.Report, error) {
	rep := sandbox.Report{Mode: mode}
	if mode == sandbox.Off {
		rep.Reason = "sandbox off"
		return rep, nil
	}
	if reason, err := seatbeltEnforceable(mode, exe); err != nil {
		if asked {
			return rep, err
		}
		rep.Reason = reason
		return rep, nil
	}
	home := r.home()
	needs := r.needs(home)
	if needs.Seatbelt {
		missing := "a sandbox that may nest another, which macOS refuses: runner " + r.runner.Name() + "'s CLI runs its commands beneath its own sandbox-exec"
		if asked {
			return rep, &sandbox.UnavailableError{Mode: mode, Missing: missing}
		}
		rep.Reason = "needs " + missing + ": ran unconfined"
		return rep, nil
	}
	pol, allow := r.seatbeltPolicy(mode, needs, home)
	profile := seatbelt.Profile(pol)
	file := filepath.Join(r.dir, "sandbox.sb")
	if err := os.WriteFile(file, []byte(profile), 0o600); err != nil {
		return rep, fmt.Errorf("pilot: writing the sandbox profile: %w", err)
	}
	r.wrapper = []string{exe, "-p", profile, "--"}
	rep.Enforced = true
	rep.Mechanism = "sandbox-exec"
	rep.Profile = file
	rep.Allowed = allow
	return rep, nil
}

// seatbeltEnforceable returns why macOS cannot enforce mode with exe as
// sandbox-exec (nil when it can), as an *UnavailableError, and the reason a
// default worker then carries. Strict is never offered: sandbox-exec cannot
// hold connections to one host.
func seatbeltEnforceable(mode sandbox.Mode, exe string) (string, error) {
	var missing string
	switch mode {
	case sandbox.Off:
		return "", nil
	case sandbox.Strict:
		missing = "connect filtering by endpoint, which macOS's sandbox-exec cannot do reliably (workspace is offered)"
	default:
		if _, err := os.Stat(exe); err != nil {
			missing = fmt.Sprintf("%s, which this Mac lacks (%v)", exe, err)
		} else if err := seatbeltApplies(exe); err != nil {
			missing = fmt.Sprintf("a sandbox-exec that can apply a profile: here it cannot, as inside another sandbox (%v)", err)
		} else {
			return "", nil
		}
	}
	return "needs " + missing + ": ran unconfined", &sandbox.UnavailableError{Mode: mode, Missing: missing}
}

// seatbeltProbe is the least profile that macOS refuses inside another
// sandbox: one with a deny (allow default alone is accepted).
const seatbeltProbe = `(version 1)(allow default)(deny file-write* (literal "/pilot-sandbox-probe"))`

var seatbeltProbes sync.Map // exe → func() error, its probe's result

// seatbeltApplies returns why exe cannot apply a profile here, nil when it
// can. It fails when pilot itself runs in a sandbox (an agent CLI's), and
// then every worker beneath it would fail before it began (exit 71). Each
// exe is probed once per process.
func seatbeltApplies(exe string) error {
	probe, _ := seatbeltProbes.LoadOrStore(exe, sync.OnceValue(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, exe, "-p", seatbeltProbe, "--", "/usr/bin/true").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %.200s", err, bytes.TrimSpace(out))
		}
		return nil
	}))
	return probe.(func() error)()
}

// seatbeltPolicy returns the paths of mode's policy for a worker whose CLI
// has needs, as confine computes them for Landlock, and the provider's
// sandbox_allow. Paths are given both as named and with symbolic links
// resolved (the sandbox matches the resolved path: /private/tmp, not /tmp).
// A missing write dir of the CLI's is created, as on Linux.
func (r *run) seatbeltPolicy(mode sandbox.Mode, needs sandbox.Needs, home string) (seatbelt.Policy, []string) {
	guard, allow, write := r.sandboxPaths(mode, needs, home, home, seatbeltDevices)
	pol := seatbelt.Policy{
		Guard:    resolvedPaths(guard),
		Allow:    resolvedPaths(allow),
		WriteAll: mode == sandbox.Secrets,
		Write:    resolvedPaths(write),
	}
	return pol, expandHome(r.prov.SandboxAllow, home)
}

// resolvedPaths returns each path absolute and with symbolic links
// resolved, and also as named when that differs. A path that does not
// exist is resolved as far as it does.
func resolvedPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		out = append(out, realPath(abs))
		if out[len(out)-1] != abs {
			out = append(out, abs)
		}
	}
	return out
}

// realPath is the absolute, clean path p with symbolic links resolved as far
// as its directories exist.
func realPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	dir := filepath.Dir(p)
	if dir == p {
		return p
	}
	return filepath.Join(realPath(dir), filepath.Base(p))
}

// wrapped returns the program and argv that start a worker whose program
// is at path: as they are, or beneath wrapper (which names its program
// first), with argv[0] replaced by path.
func wrapped(wrapper []string, path string, argv []string) (string, []string) {
	if len(wrapper) == 0 {
		return path, argv
	}
	return wrapper[0], slices.Concat(wrapper, []string{path}, argv[1:])
}
