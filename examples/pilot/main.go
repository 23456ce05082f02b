// Command pilot dispatches bounded tasks to isolated LLM coding-agent
// workers and reports each outcome as a verdict. It keeps pilot-workers'
// command-line and JSON contracts.
//
//	pilot dispatch --provider P --mode M --task-file F --workdir D [flags]
//	pilot run      (same flags; streams the worker's output)
//	pilot demo     (scripted jobs on the built-in fake agent; no API key)
//	pilot credentials P [--providers-file J]
//	pilot classify [--runner R] [--stream S] [FILE|-]
//	pilot phase [FILE|-]
//	pilot fanout --workdir D (--job P:M:F ... | --jobs-file J | --providers a,b --mode M --task-file F)
//	pilot worktrees [prune] [--run-dir DIR]
//
// Exit status: 0 when the verdict is completed or step_capped_partial, 1
// otherwise, 2 for bad input (with a message on stderr).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

func main() {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		// The demo's worker: this binary, re-executed as the fake agent.
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
