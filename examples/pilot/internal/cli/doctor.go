package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/pilotworkers/pilot"
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
	// Status is "ok", "not configured" (no credential: not a problem
	// until it is used), "not installed" (a built-in provider that needs
	// no credential, without its CLI), or "cannot run" (configured, but no
	// CLI: the problem doctor exits 1 for); Problem says what is wrong
	// and what to do.
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
	pins := runnerPackages()
	for _, st := range providerStatuses(ctx, reg, providersPath(*providersFile)) {
		c := doctorCheck{Provider: st.Name, Runner: st.Runner, Binary: st.Binary, BinaryFound: st.BinaryFound,
			Version: st.BinaryVersion, Credential: st.CredentialConfigured}
		if pin, ok := pins[st.Runner]; ok {
			c.Tested = pin.Version
		}
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
		fmt.Fprintln(tw, "PROVIDER\tSTATUS\tCLI\tVERSION\tTESTED WITH\tCREDENTIAL")
		for _, c := range rep.Providers {
			bin := c.Binary
			if !c.BinaryFound {
				bin += " (not found)"
			}
			cred := "no"
			if c.Credential {
				cred = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Provider, c.Status, bin, orDash(c.Version), orDash(c.Tested), cred)
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
	}
	if rep.Problems > 0 {
		return exitFailed
	}
	return exitOK
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
