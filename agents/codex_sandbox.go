package agents

import (
	"slices"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"
)

// SandboxNeeds implements pilot.SandboxRunner. codex runs each command
// beneath a sandbox of its own (sandbox-exec on macOS) unless the
// provider's args turn it off, and macOS refuses a sandbox inside
// another: Seatbelt says so. It declares no dirs of its own yet.
func (CodexRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	off := slices.ContainsFunc(p.Args, func(a string) bool {
		return a == "--dangerously-bypass-approvals-and-sandbox" || a == "danger-full-access" || a == "--sandbox=danger-full-access"
	})
	return sandbox.Needs{Seatbelt: !off}
}
