package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"
)

// A doctorCheck is one provider as 'pilot doctor' sees it.
type doctorCheck struct {
	Provider string `json:"provider"`
	Runner   string `json:"runner"`
	// Binary is the CLI it would run (found or not), Version what it
	// says, Tested the version pilot's end-to-end tests pin for the
	// runner ("" for runners pilot does not install).
	Binary      string `json:"binary"`
	BinaryFound bool   `json:"binary_found"`
	Version     string `json:"version,omitempty"`
	Tested      string `json:"tested_version,omitempty"`
	// Credential is whether its credential is configured (never the
	// value).
	Credential bool `json:"credential_configured"`
	// Sandbox is the mode its workers run in when the call names none:
	// the provider's "sandbox" (SandboxFrom "provider"), else the
	// default ("default"); SandboxEnforceable whether this machine
	// enforces it.
	Sandbox            sandbox.Mode `json:"sandbox"`
	SandboxFrom        string       `json:"sandbox_from"`
	SandboxEnforceable bool         `json:"sandbox_enforceable"`
	// Status is "ok", "not configured" (no credential: not a problem
	// until it is used), "not installed" (a built-in provider that needs
	// no credential, without its CLI), or "cannot run" (configured, but no
	// CLI, or a sandbox mode this machine cannot enforce: the problems
	// doctor exits 1 for); Problem says what is wrong and what to do.
	Status  string `json:"status"`
	Problem string `json:"problem,omitempty"`
}

// doctorReport is the --json output of 'pilot doctor'.
type doctorReport struct {
	Providers []doctorCheck `json:"providers"`
	RunDir    string        `json:"run_dir"`
	// FreeBytes is the free space of the run dir's file system (of its
	// nearest existing parent); -1 when this system does not say.
	FreeBytes int64  `json:"free_bytes"`
	Problems  int    `json:"problems"`
	Note      string `json:"note,omitempty"`
	// Sandbox is what this machine can enforce.
	Sandbox doctorSandbox `json:"sandbox"`
}

// doctorSandbox is what confinement this machine offers workers.
type doctorSandbox struct {
	Mechanism string `json:"mechanism"` // "landlock"
	// ABI is the Landlock ABI the kernel offers, 0 for none; Error is why
	// none (the probe's error).
	ABI   int    `json:"landlock_abi"`
	Error string `json:"error,omitempty"`
	// Scoped is whether workers are kept from signalling, tracing or
	// reaching the abstract sockets of processes outside their own tree.
	Scoped bool         `json:"scoped"`
	Modes  []doctorMode `json:"modes"`
}

// doctorMode is one sandbox mode on this machine.
type doctorMode struct {
	Mode        sandbox.Mode `json:"mode"`
	Enforceable bool         `json:"enforceable"`
	Default     bool         `json:"default,omitempty"`
	// Needs is the kernel feature the mode needs, when this machine
	// lacks it; Note is what becomes of a worker in the mode here.
	Needs string `json:"needs,omitempty"`
	Note  string `json:"note,omitempty"`
}

// sandboxReport is what a machine whose Landlock probe says abi, err can
// enforce.
func sandboxReport(abi int, err error) doctorSandbox {
	rep := doctorSandbox{Mechanism: "landlock", ABI: abi, Scoped: err == nil && abi >= sandbox.ScopeABI}
	if err != nil {
		rep.ABI, rep.Error = 0, err.Error()
	}
	for _, m := range sandboxModes {
		dm := doctorMode{Mode: m, Default: m == sandbox.Default}
		need := m.NeedsABI()
		dm.Enforceable = need == 0 || rep.ABI >= need
		if !dm.Enforceable {
			dm.Needs = fmt.Sprintf("Landlock ABI %d", need)
		}
		switch {
		case m == sandbox.Off:
			dm.Note = "nothing is confined"
			if rep.Scoped {
				dm.Note = "no guards; the worker is still kept to its own process tree"
			}
		case dm.Enforceable && dm.Default:
			dm.Note = "the default"
		case dm.Default:
			dm.Note = "the default runs unconfined (its verdicts say \"enforced\": false); asked for, nothing runs"
		case !dm.Enforceable:
			dm.Note = "asked for, nothing runs"
		}
		rep.Modes = append(rep.Modes, dm)
	}
	return rep
}

// enforceable reports whether rep's machine enforces m.
func (rep doctorSandbox) enforceable(m sandbox.Mode) bool {
	for _, dm := range rep.Modes {
		if dm.Mode == m {
			return dm.Enforceable
		}
	}
	return false
}

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", "[--providers-file F] [--run-dir DIR] [--json]", stdout, stderr)
	providersFile := providersFlag(fs)
	runDir := fs.String("run-dir", "", "the run `directory` whose free space to check (default "+pilot.DefaultRunDir()+")")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return badInput(stderr, "doctor", "%v", err)
	}
	rep := doctorReport{RunDir: *runDir}
	if rep.RunDir == "" {
		rep.RunDir = pilot.DefaultRunDir()
	}
	rep.Sandbox = sandboxReport(landlockABI())
	pins := runnerPackages()
	for _, st := range providerStatuses(ctx, reg, providersPath(*providersFile)) {
		c := doctorCheck{Provider: st.Name, Runner: st.Runner, Binary: st.Binary, BinaryFound: st.BinaryFound,
			Version: st.BinaryVersion, Credential: st.CredentialConfigured, Sandbox: sandbox.Default, SandboxFrom: "default"}
		if pin, ok := pins[st.Runner]; ok {
			c.Tested = pin.Version
		}
		if p, _ := reg.Lookup(st.Name); p.Sandbox != "" {
			c.Sandbox, c.SandboxFrom = p.Sandbox, "provider"
		}
		c.SandboxEnforceable = rep.Sandbox.enforceable(c.Sandbox)
		// A built-in provider that needs no credential (pi) is only
		// there to use: without its CLI it is not installed, not broken.
		configured := st.CredentialConfigured && (st.CredentialEnv != "" || st.From != "built-in")
		switch {
		case !configured && st.CredentialConfigured && !st.BinaryFound:
			c.Status, c.Problem = "not installed", st.Error
		case configured && !st.BinaryFound:
			c.Status, c.Problem = "cannot run", st.Error
			rep.Problems++
		case !st.CredentialConfigured:
			c.Status = "not configured"
			if st.Error != "" {
				c.Problem = st.Error
			} else if st.CredentialEnv != "" {
				c.Problem = "no credential: set " + st.CredentialEnv + " or run: pilot credentials " + st.Name
			}
		default:
			c.Status = "ok"
			if c.Tested != "" && c.Version != "" && !strings.Contains(c.Version, c.Tested) {
				c.Problem = fmt.Sprintf("%s says %q; pilot is tested with %s (pilot install runner %s installs it)", c.Binary, c.Version, c.Tested, c.Runner)
			}
		}
		if c.SandboxFrom == "provider" && !c.SandboxEnforceable {
			// A mode asked for and not enforceable fails every
			// dispatch that does not name another.
			p := fmt.Sprintf("its sandbox %s cannot be enforced here (%s): its dispatches fail unless they name another mode with --sandbox; set another \"sandbox\" for it in the providers file", c.Sandbox, rep.Sandbox.missing(c.Sandbox))
			if c.Problem != "" {
				p = c.Problem + "; " + p
			}
			c.Problem = p
			if configured && c.Status != "cannot run" {
				c.Status = "cannot run"
				rep.Problems++
			}
		}
		rep.Providers = append(rep.Providers, c)
	}
	rep.FreeBytes = -1
	if free, err := freeSpace(rep.RunDir); err == nil {
		rep.FreeBytes = int64(free)
	} else {
		rep.Note = "free space of the run dir unknown: " + err.Error()
	}
	if *asJSON {
		writeJSON(stdout, rep)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tSTATUS\tCLI\tVERSION\tTESTED WITH\tCREDENTIAL\tSANDBOX")
		for _, c := range rep.Providers {
			bin := c.Binary
			if !c.BinaryFound {
				bin += " (not found)"
			}
			cred := "no"
			if c.Credential {
				cred = "yes"
			}
			sb := string(c.Sandbox)
			switch {
			case !c.SandboxEnforceable && c.SandboxFrom == "provider":
				sb += " (cannot be enforced)"
			case !c.SandboxEnforceable:
				sb += " (unconfined)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Provider, c.Status, bin, orDash(c.Version), orDash(c.Tested), cred, sb)
		}
		tw.Flush()
		for _, c := range rep.Providers {
			if c.Problem != "" {
				fmt.Fprintf(stdout, "%s: %s\n", c.Provider, c.Problem)
			}
		}
		if rep.FreeBytes >= 0 {
			fmt.Fprintf(stdout, "run dir %s: %s free\n", rep.RunDir, humanBytes(rep.FreeBytes))
		} else {
			fmt.Fprintf(stdout, "run dir %s: %s\n", rep.RunDir, rep.Note)
		}
		printSandbox(stdout, rep.Sandbox)
	}
	if rep.Problems > 0 {
		return exitFailed
	}
	return exitOK
}

// missing is what rep's machine lacks for m.
func (rep doctorSandbox) missing(m sandbox.Mode) string {
	if rep.Error != "" {
		return "no Landlock: " + rep.Error
	}
	return fmt.Sprintf("it needs Landlock ABI %d, this kernel offers ABI %d", m.NeedsABI(), rep.ABI)
}

// printSandbox writes doctor's sandbox section: the Landlock ABI (or why
// none), then each mode, enforceable or not, and what becomes of a worker
// in it.
func printSandbox(w io.Writer, rep doctorSandbox) {
	switch {
	case rep.Error != "":
		fmt.Fprintf(w, "sandbox: no Landlock: %s\n", rep.Error)
	case rep.Scoped:
		fmt.Fprintf(w, "sandbox: Landlock ABI %d; workers cannot signal, trace or reach processes outside their own tree\n", rep.ABI)
	default:
		fmt.Fprintf(w, "sandbox: Landlock ABI %d; workers can signal processes outside their own tree (scoping needs ABI %d)\n", rep.ABI, sandbox.ScopeABI)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range rep.Modes {
		can := "enforceable"
		if !m.Enforceable {
			can = "not enforceable: needs " + m.Needs
		}
		line := "  " + string(m.Mode) + "\t" + can
		if m.Note != "" {
			line += "\t" + m.Note
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// existingParent is dir, or its nearest parent that exists.
func existingParent(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
		parent := dir[:max(strings.LastIndexByte(dir, os.PathSeparator), 0)]
		if parent == "" || parent == dir {
			return string(os.PathSeparator)
		}
		dir = parent
	}
}
