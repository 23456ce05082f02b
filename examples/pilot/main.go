// Command pilot dispatches bounded tasks to isolated LLM coding-agent
// workers and reports each outcome as a verdict. It keeps pilot-workers'
// command-line and JSON contracts.
//
//	pilot dispatch --provider P --mode M --task-file F --workdir D [flags]
//	pilot run      (same flags; streams the worker's output)
//	pilot demo     (scripted jobs on the built-in fake agent; no API key)
//	pilot providers [--providers-file J] [--json]
//	pilot template code|explore|test|review
//	pilot credentials P [--providers-file J]            (stores the secret on stdin)
//	pilot credentials P --status [--providers-file J]   (is it configured?)
//	pilot classify [--runner R] [--stream S] [FILE|-]
//	pilot phase [FILE|-]
//	pilot fanout --workdir D (--job [NAME=]P:M:F[:worktree] ... | --jobs-file J | --providers a,b --mode M --task-file F)
//	pilot worktrees [prune] [--run-dir DIR] | worktrees diff NAME | worktrees remove NAME [--force]
//	pilot runs [show ID | logs ID [-f] | prune --older-than D] [--reconcile]
//	pilot install runner NAME | pilot install PROVIDER on HOST [--scope user|project]
//	pilot uninstall runner NAME | pilot uninstall PROVIDER on HOST
//	pilot state (--state DIR | --workdir D) [--clear-blocked GROUP [--dry-run]]
//
// fanout and dispatch --worktree run jobs in git worktrees of their own,
// in --worktree-dir (default <repo>.pilot-worktrees beside the repository
// <repo>); when a job ends, pilot commits what it changed on the
// worktree's branch, or removes a worktree it left unchanged.
//
// dispatch, run and fanout take --max-failures N (consecutive failures
// before a job is blocked; retryable failures are retried until then;
// default 1, one attempt) and --state DIR (the state file's directory;
// default .git/pilot of the workdir's repository when N is above 1).
//
// Providers are pilot's built-ins (glm, kimi-k3, pi, codex, claude, gemini;
// see agents.Providers) with the providers file over them: the file
// named by --providers-file, else $PILOT_PROVIDERS_FILE (both must exist),
// else $XDG_CONFIG_HOME/pilot/providers.json (~/.config/...) when it
// exists. A provider's credential comes from its credential_env variable,
// else from the 0600 file 'pilot credentials P' stores under
// $XDG_CONFIG_HOME/pilot/credentials; a file that group or others may read
// is refused with the chmod that fixes it.
//
// 'pilot credentials P' used to print the credential's status; it now
// stores a secret read from stdin (without echo on a terminal), and
// 'pilot credentials P --status' prints the status as before (one JSON
// line: provider, configured, secure_mode, source; exit 1 when not
// configured).
//
// Exit status: 0 when the verdict is completed or step_capped_partial, 1
// otherwise, 2 for bad input (with a message on stderr).
//
// The command is package cli (internal/cli); examples/pilot/otel is the
// same command with OpenTelemetry export.
package main

import (
	"os"

	"github.com/pilotworkers/pilot/examples/pilot/internal/cli"
)

func main() {
	// cli.Main first serves as the demo's fake agent when this binary was
	// re-executed as one.
	os.Exit(cli.Main(cli.Hooks{}))
}
