package pilot

import (
	"fmt"
	"net"
	"runtime"
	"strconv"

	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/sandbox"
)

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
	rs.Paths = landlock.CachedPlan(pol, rs.FS)
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
