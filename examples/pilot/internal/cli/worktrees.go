package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/worktrees"
)

// cmdWorktrees lists the worktree inventory, or prunes it, or shows or
// removes one worktree.
func cmdWorktrees(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "diff":
			return worktreesDiff(ctx, args[1:], stdout, stderr)
		case "remove":
			return worktreesRemove(ctx, args[1:], stdout, stderr)
		}
	}
	prune := false
	if len(args) > 0 && args[0] == "prune" {
		prune, args = true, args[1:]
	} else if len(args) > 0 {
		if code, ok := unknownSubcommand(stderr, "worktrees", args[0], "diff", "remove", "prune"); ok {
			return code
		}
	}
	fs := newFlagSet("worktrees", "[prune] [--run-dir DIR] [--json] | diff NAME | remove NAME [--force]", stdout, stderr)
	runDir := worktreesRunDirFlag(fs)
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
		gone := 0
		for _, e := range entries {
			if e.State == worktrees.StateMissing {
				gone++
			}
		}
		fmt.Fprintf(stdout, "pruned %d worktree(s)", len(entries)-gone)
		if gone > 0 {
			fmt.Fprintf(stdout, "; dropped %d whose directory was gone (each branch with work kept)", gone)
		}
		fmt.Fprintln(stdout)
	}
	if len(entries) == 0 {
		if !prune {
			fmt.Fprintln(stdout, "no worktrees")
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tREPOSITORY\tTASK\tRUN\tPATH")
	for _, e := range entries {
		state := e.State
		if e.State == "kept" && e.Commit != "" {
			state += " (committed " + e.Commit[:min(len(e.Commit), 10)] + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, state, e.Repo, dash(e.TaskFile), dash(e.RunID), e.Path)
	}
	tw.Flush()
	return exitOK
}

// worktreesRunDirFlag adds --run-dir to fs.
func worktreesRunDirFlag(fs *flagSet) *string {
	return fs.String("run-dir", "", "`directory` of the fanout's run records, which holds the inventory (default "+pilot.DefaultRunDir()+")")
}

// worktreesDiff prints the diff of a worktree's branch against the commit
// it started from.
func worktreesDiff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worktrees diff", "NAME [--run-dir DIR]", stdout, stderr)
	runDir := worktreesRunDirFlag(fs)
	rest, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return badInput(stderr, "worktrees diff", "want one worktree NAME (its name, its branch, or the start of its name; pilot worktrees lists them)")
	}
	e, err := worktrees.Diff(ctx, *runDir, rest[0], stdout)
	if err != nil {
		return badInput(stderr, "worktrees diff", "%v", err)
	}
	if e.State == "active" {
		fmt.Fprintf(stderr, "pilot worktrees diff: note: the job of %s may still be running; what it has not finished is not on the branch yet (see git -C %s status)\n", e.Name, e.Path)
	}
	return exitOK
}

// worktreesRemove removes a worktree and its branch.
func worktreesRemove(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("worktrees remove", "NAME [--force] [--run-dir DIR]", stdout, stderr)
	runDir := worktreesRunDirFlag(fs)
	force := fs.Bool("force", false, "remove it even when it holds work found nowhere else (uncommitted changes, commits on no other branch): that work is lost")
	rest, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return badInput(stderr, "worktrees remove", "want one worktree NAME (its name, its branch, or the start of its name; pilot worktrees lists them)")
	}
	e, err := worktrees.Remove(ctx, *runDir, rest[0], *force)
	if errors.Is(err, worktrees.ErrUnmerged) {
		fmt.Fprintf(stderr, "pilot worktrees remove: %v (--force removes it anyway; pilot worktrees diff %s shows the work)\n", err, e.Name)
		return exitFailed
	}
	if errors.Is(err, worktrees.ErrInUse) {
		fmt.Fprintf(stderr, "pilot worktrees remove: %v\n", err)
		return exitFailed
	}
	if err != nil {
		return badInput(stderr, "worktrees remove", "%v", err)
	}
	fmt.Fprintf(stdout, "removed %s (branch %s, %s)\n", e.Name, e.Branch, e.Path)
	return exitOK
}
