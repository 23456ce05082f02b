package cli

import (
	"context"
	"fmt"
	"io"
)

const installSynopsis = `runner NAME | (PROVIDER|all) on (HOST|all) [flags]

  install runner NAME          install the agent CLI a runner needs (its npm package at the
                               version pilot is tested with) into pilot's data dir
  install PROVIDER on HOST     write HOST's own integration (skill, command, prompt) that tells
                               the agent working in HOST how to hand work to PROVIDER
  'all' as PROVIDER is every provider with a credential configured; as HOST, every host
  whose CLI is on PATH. Hosts: ` + "claude, codex, opencode, gemini, pi"

// cmdInstall is 'pilot install' and, with remove set, 'pilot uninstall'.
func cmdInstall(ctx context.Context, args []string, stdout, stderr io.Writer, remove bool) int {
	name := "install"
	if remove {
		name = "uninstall"
	}
	fs := newFlagSet(name, installSynopsis, stdout, stderr)
	dryRun := fs.Bool("dry-run", false, "print what would be done, and do nothing")
	scope := fs.String("scope", "user", "`scope` of a host integration: user (the host's config dir) or project (--project-dir)")
	projectDir := fs.String("project-dir", ".", "the project `directory` of --scope project")
	providersFile := providersFlag(fs)
	// Positional words first, then flags.
	var words []string
	for len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		words, args = append(words, args[0]), args[1:]
	}
	if code := fs.parse(args); code >= 0 {
		return code
	}
	switch {
	case len(words) == 2 && words[0] == "runner":
		var err error
		if remove {
			err = uninstallRunner(words[1], *dryRun, stdout)
		} else {
			err = installRunner(ctx, words[1], *dryRun, stdout)
		}
		if err != nil {
			if _, known := runnerPackages()[words[1]]; !known {
				return badInput(stderr, name, "%v", err)
			}
			fmt.Fprintf(stderr, "pilot %s: %v\n", name, err)
			return exitFailed
		}
		return exitOK
	case len(words) == 3 && words[1] == "on":
		return installOnHosts(ctx, hostRequest{
			remove: remove, provider: words[0], host: words[2], scope: *scope, projectDir: *projectDir,
			dryRun: *dryRun, providersFile: *providersFile,
		}, stdout, stderr)
	}
	return badInput(stderr, name, "want 'pilot %s runner NAME' or 'pilot %s PROVIDER on HOST' (see pilot %s --help), got %q", name, name, name, words)
}
