//go:build unix

package worktree

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// branchWith makes branch name off the repository's HEAD with one commit
// writing file = data, through a worktree of its own, and returns its tip.
func branchWith(t *testing.T, repo, name, file, data string) string {
	t.Helper()
	wt := filepath.Join(t.TempDir(), name)
	gitT(t, repo, "worktree", "add", "-q", "-b", name, wt, "HEAD")
	writeFile(t, filepath.Join(wt, file), data)
	gitT(t, wt, "add", "-A")
	gitT(t, wt, "commit", "-q", "-m", name)
	gitT(t, repo, "worktree", "remove", wt)
	return gitT(t, repo, "rev-parse", name)
}

// files lists the files of commit c.
func files(t *testing.T, repo, c string) []string {
	t.Helper()
	return strings.Split(gitT(t, repo, "ls-tree", "-r", "--name-only", c), "\n")
}

func TestMerge(t *testing.T) {
	repo := initRepo(t)
	head := gitT(t, repo, "rev-parse", "HEAD")
	status := gitT(t, repo, "status", "--porcelain")
	a := branchWith(t, repo, "a", "a.txt", "a\n")
	branchWith(t, repo, "b", "b.txt", "b\n")
	branchWith(t, repo, "c", "README", "c's hello\n")
	branchWith(t, repo, "d", "README", "d's hello\n")

	t.Run("nothing to merge is onto itself", func(t *testing.T) {
		got, err := Merge(t.Context(), repo, "HEAD", nil)
		if err != nil || got != head {
			t.Fatalf("Merge = %s, %v; want HEAD %s", got, err, head)
		}
	})
	t.Run("one branch ahead is a fast-forward", func(t *testing.T) {
		got, err := Merge(t.Context(), repo, "HEAD", []string{"a"})
		if err != nil || got != a {
			t.Fatalf("Merge = %s, %v; want a's tip %s", got, err, a)
		}
	})
	t.Run("two branches: a merge commit holding both", func(t *testing.T) {
		got, err := Merge(t.Context(), repo, "HEAD", []string{"a", "b", "a"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{".gitignore", "README", "a.txt", "b.txt"}, files(t, repo, got)); diff != "" {
			t.Errorf("merged files (-want +got):\n%s", diff)
		}
		if parents := strings.Fields(gitT(t, repo, "log", "-1", "--format=%P", got)); len(parents) != 2 {
			t.Errorf("parents = %v, want a merge of two", parents)
		}
		if who := gitT(t, repo, "log", "-1", "--format=%an <%ae>", got); who != CommitName+" <"+CommitEmail+">" {
			t.Errorf("merge author = %s, want pilot's own", who)
		}
	})
	t.Run("a conflict names the branches and the path and touches nothing", func(t *testing.T) {
		_, err := Merge(t.Context(), repo, "HEAD", []string{"a", "c", "d"})
		var c *Conflict
		if !errors.As(err, &c) {
			t.Fatalf("err = %v, want a *Conflict", err)
		}
		want := &Conflict{Branch: "d", Onto: "HEAD", Merged: []string{"a", "c"}, Paths: []string{"README"}}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("conflict (-want +got):\n%s", diff)
		}
		if !strings.Contains(err.Error(), "merging d onto HEAD with a, c: conflict in README") {
			t.Errorf("message %q does not name the path", err)
		}
	})
	t.Run("an unknown branch is an error", func(t *testing.T) {
		if _, err := Merge(t.Context(), repo, "HEAD", []string{"nope"}); err == nil || !strings.Contains(err.Error(), "no such branch") {
			t.Fatalf("err = %v, want no such branch", err)
		}
	})
	if got := gitT(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if got := gitT(t, repo, "status", "--porcelain"); got != status {
		t.Errorf("the work tree changed: %q", got)
	}
}

func TestAdvance(t *testing.T) {
	repo := initRepo(t)
	head := gitT(t, repo, "rev-parse", "HEAD")
	branchWith(t, repo, "a", "a.txt", "a\n")
	branchWith(t, repo, "b", "b.txt", "b\n")
	branchWith(t, repo, "c", "a.txt", "c's a\n")

	tip, err := Advance(t.Context(), repo, "int", head, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, repo, "rev-parse", "int"); got != tip {
		t.Fatalf("int = %s, want %s", got, tip)
	}
	if _, err := Advance(t.Context(), repo, "int", head, "b"); err != nil {
		t.Fatal(err)
	}
	before := gitT(t, repo, "rev-parse", "int")
	_, err = Advance(t.Context(), repo, "int", head, "c")
	var c *Conflict
	if !errors.As(err, &c) || c.Onto != "int" || c.Branch != "c" {
		t.Fatalf("err = %v, want c's conflict onto int", err)
	}
	if got := gitT(t, repo, "rev-parse", "int"); got != before {
		t.Errorf("a conflict moved int from %s to %s", before, got)
	}
	if diff := cmp.Diff([]string{".gitignore", "README", "a.txt", "b.txt"}, files(t, repo, "int")); diff != "" {
		t.Errorf("int's files (-want +got):\n%s", diff)
	}

	cur := gitT(t, repo, "symbolic-ref", "--short", "HEAD")
	if _, err := Advance(t.Context(), repo, cur, head, "a"); err == nil || !strings.Contains(err.Error(), "checked out") {
		t.Errorf("advancing the checked-out %s: err = %v, want a refusal", cur, err)
	}
	if got := gitT(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if _, err := Advance(t.Context(), repo, "bad..name", head, "a"); err == nil || !strings.Contains(err.Error(), "not a valid branch name") {
		t.Errorf("a bad branch name: err = %v", err)
	}
}

func TestCreateAt(t *testing.T) {
	repo := initRepo(t)
	m := newManager(t)
	branchWith(t, repo, "a", "a.txt", "a\n")
	start, err := Merge(t.Context(), repo, "HEAD", []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := m.CreateAt(t.Context(), repo, "dep", start)
	if err != nil {
		t.Fatal(err)
	}
	if e.Base != start {
		t.Errorf("Base = %s, want the merged start %s", e.Base, start)
	}
	if !exists(t, filepath.Join(e.Path, "a.txt")) {
		t.Error("the worktree lacks its dependency's file")
	}
	// Nothing of its own: Finish removes it, as for any unchanged worktree.
	if kept, err := m.Finish(t.Context(), e, Run{ID: "r"}); err != nil || kept {
		t.Errorf("Finish = %v, %v; want removed", kept, err)
	}
	if _, err := m.CreateAt(t.Context(), repo, "x", "no-such-rev"); err == nil || !strings.Contains(err.Error(), "no commit") {
		t.Errorf("CreateAt at a missing commit: err = %v", err)
	}
}
