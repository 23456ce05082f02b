//go:build linux

package worktrees_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/worktrees"
)

// A fanout job in a worktree of its own leaves its work committed on its
// branch; the package shows the work, and removes the worktree once the
// work is merged (or when forced).
func Example() {
	tmp, err := os.MkdirTemp("", "worktrees-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	repo, runDir := filepath.Join(tmp, "repo"), filepath.Join(tmp, "runs")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=Example", "-c", "user.email=example@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			log.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	// A worker that writes a file where it runs: its worktree.
	worker := pilottest.DispatchFunc(func(_ context.Context, t pilot.Task) (pilot.Verdict, error) {
		err := os.WriteFile(filepath.Join(t.Workdir, "fix.txt"), []byte("fixed\n"), 0o644)
		return pilot.Verdict{Verdict: pilot.Completed, RunID: "run-1"}, err
	})
	ctx := context.Background()
	f := &pilot.Fanout{Dispatcher: worker, Worktrees: worktrees.New(runDir, filepath.Join(tmp, "trees"))}
	vs, err := f.Run(ctx, []pilot.Job{{
		Task:     pilot.Task{Provider: "fake", Mode: pilot.ModeCode, Prompt: "fix it", Workdir: repo},
		Worktree: true,
		Name:     "fix",
	}})
	if err != nil {
		log.Fatal(err)
	}
	wt := vs[0].Worktree
	fmt.Println("kept:", wt.Kept, "committed:", wt.Commit != "")

	var diff strings.Builder
	if _, err := worktrees.Diff(ctx, runDir, wt.Branch, &diff); err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(diff.String(), "\n") {
		if strings.HasPrefix(line, "+") {
			fmt.Println(line)
		}
	}

	_, err = worktrees.Remove(ctx, runDir, wt.Name, false)
	fmt.Println("unmerged:", errors.Is(err, worktrees.ErrUnmerged))
	if _, err := worktrees.Remove(ctx, runDir, wt.Name, true); err != nil {
		log.Fatal(err)
	}
	entries, err := worktrees.List(runDir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", len(entries))
	// Output:
	// kept: true committed: true
	// +++ b/fix.txt
	// +fixed
	// unmerged: true
	// left: 0
}
