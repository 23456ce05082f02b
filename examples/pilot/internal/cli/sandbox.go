package cli

import (
	"fmt"
	"strings"

	"github.com/pilotworkers/pilot/sandbox"
)

// sandboxModes are the sandbox modes, least confined first.
var sandboxModes = []sandbox.Mode{sandbox.Off, sandbox.Secrets, sandbox.Workspace, sandbox.Strict}

// sandboxModeList is "off, secrets, workspace or strict".
func sandboxModeList() string {
	names := make([]string, len(sandboxModes))
	for i, m := range sandboxModes {
		names[i] = string(m)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// parseSandbox is sandbox.ParseMode with the command line's message.
func parseSandbox(s string) (sandbox.Mode, error) {
	m, err := sandbox.ParseMode(s)
	if err != nil {
		return "", fmt.Errorf("unknown mode %q: want %s", s, sandboxModeList())
	}
	return m, nil
}

// sandboxFlag adds --sandbox to fs, the mode of every task of the call.
func sandboxFlag(fs *flagSet, m *sandbox.Mode) {
	fs.Func("sandbox", "confine every worker to `mode`: "+sandboxModeList()+"; it wins over the provider's \"sandbox\", and is enforced or nothing runs"+
		" (default: the provider's, else secrets, unconfined where this machine cannot enforce it; see pilot doctor)",
		func(s string) error {
			mode, err := parseSandbox(s)
			if err == nil {
				*m = mode
			}
			return err
		})
}

// sandboxHint is e's message in the command line's terms.
func sandboxHint(e *sandbox.UnavailableError) string {
	return fmt.Sprintf("sandbox %s cannot be enforced here: %s; ask for a mode this machine enforces with --sandbox (pilot doctor lists them), or run unconfined with --sandbox off", e.Mode, e.Missing)
}

// landlockABI probes the Landlock ABI this machine offers, and why none (a
// variable: tests give doctor kernels of their own).
var landlockABI = sandbox.LandlockABI
