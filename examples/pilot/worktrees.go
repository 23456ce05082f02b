package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/worktrees"
)

// cmdWorktrees lists the worktree inventory, or prunes it.
func cmdWorktrees(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prune := false
	if len(args) > 0 && args[0] == "prune" {
		prune, args = true, args[1:]
	}
	fs := newFlagSet("worktrees", "[prune] [--run-dir DIR] [--json]", stdout, stderr)
	runDir := fs.String("run-dir", "", "`directory` of the fanout's run records (default "+pilot.DefaultRunDir()+")")
	asJSON := fs.Bool("json", false, "print the entries as a JSON array")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	var entries []worktrees.Entry
	var err error
	if prune {
		entries, err = worktrees.Prune(ctx, *runDir)
	} else {
		entries, err = worktrees.List(*runDir)
	}
	if err != nil {
		return badInput(stderr, "worktrees", "%v", err)
	}
	if *asJSON {
		if entries == nil {
			entries = []worktrees.Entry{}
		}
		writeJSON(stdout, entries)
		return exitOK
	}
	if prune {
		fmt.Fprintf(stdout, "pruned %d worktree(s)\n", len(entries))
	}
	if len(entries) == 0 {
		if !prune {
			fmt.Fprintln(stdout, "no worktrees")
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tBRANCH\tPATH\tRUN\tOWNER PID")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", e.State, e.Branch, e.Path, e.RunID, e.OwnerPID)
	}
	tw.Flush()
	return exitOK
}
