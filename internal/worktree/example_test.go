package worktree_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pilotworkers/pilot/internal/worktree"
)

func ExampleManager() {
	tmp, err := os.MkdirTemp("", "worktree-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	repo := filepath.Join(tmp, "repo")
	for _, args := range [][]string{
		{"init", "-q", repo},
		{"-C", repo, "-c", "user.name=Example", "-c", "user.email=example@example.com", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			log.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	ctx := context.Background()
	m := &worktree.Manager{Dir: filepath.Join(tmp, "worktrees"), Inventory: filepath.Join(tmp, "worktrees.json")}
	e, err := m.Create(ctx, repo, "job-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.Branch, e.State)

	// The worker runs in e.Path and leaves nothing behind.
	kept, err := m.Finish(ctx, e, worktree.Run{ID: "run-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kept:", kept)

	entries, err := m.List()
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Name, e.State, e.RunID)
	}
	// Output:
	// pilot/job-1 active
	// kept: false
	// job-1 removed run-1
}
