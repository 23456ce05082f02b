package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot/pilottest"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// userCheckout is what the repository's own checkout holds: its branch,
// HEAD, status and files.
func userCheckout(t *testing.T, repo string) string {
	t.Helper()
	entries, _ := os.ReadDir(repo)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join([]string{gitIn(t, repo, "symbolic-ref", "HEAD"), gitIn(t, repo, "rev-parse", "HEAD"),
		gitIn(t, repo, "status", "--porcelain"), strings.Join(names, " ")}, "\n")
}

// diamondFixture is a repository holding shared.txt and a diamond of
// worktree jobs a -> b, c -> d whose fake agents each write a file of their
// own (and, for the ids in shared, their line of shared.txt).
func diamondFixture(t *testing.T, shared ...string) (fixture, string) {
	t.Helper()
	scripts := map[string][]string{}
	for _, id := range []string{"a", "b", "c", "d"} {
		s := []string{"write=" + id + ".txt=" + id + `\n`}
		for _, sh := range shared {
			if sh == id {
				s = append(s, "write=shared.txt=line by "+id+`\n`)
			}
		}
		scripts["p"+id] = append(s, "out=done")
	}
	f := newFixture(t, scripts)
	f.workdir = pilottest.GitRepo(t)
	os.WriteFile(filepath.Join(f.workdir, "shared.txt"), []byte("the base line\n"), 0o644)
	gitIn(t, f.workdir, "add", "shared.txt")
	gitIn(t, f.workdir, "commit", "-q", "-m", "shared")
	wj := func(id string, deps ...string) map[string]any {
		j := gjob(id, "p"+id, f, deps...)
		j["worktree"] = true
		return j
	}
	return f, f.writeGraph(t, wj("a"), wj("b", "a"), wj("c", "a"), wj("d", "b", "c"))
}

func treeOf(t *testing.T, repo, rev string) []string {
	t.Helper()
	return strings.Fields(gitIn(t, repo, "ls-tree", "-r", "--name-only", rev))
}

// The dependents of worktree jobs start from their dependencies' work, and
// --integrate merges every job's branch into one branch, without touching
// the repository's checkout.
func TestScheduleDiamondBuildsAndIntegrates(t *testing.T) {
	f, graph := diamondFixture(t)
	before := userCheckout(t, f.workdir)
	code, out, errOut := runCLI(f.scheduleArgs(graph, "--integrate", "main-int")...)
	var vs []scheduledVerdict
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 4 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	for _, v := range vs {
		if v.Integrated == nil || !*v.Integrated || v.Worktree == nil || !v.Worktree.Kept {
			t.Errorf("%s: integrated %v, worktree %+v; want its kept branch integrated", v.ID, v.Integrated, v.Worktree)
		}
	}
	if diff := cmp.Diff([]string{"a.txt", "b.txt", "c.txt", "d.txt", "shared.txt"}, treeOf(t, f.workdir, vs[3].Worktree.Branch)); diff != "" {
		t.Errorf("d's branch, which started from a's, b's and c's work (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a.txt", "b.txt", "c.txt", "d.txt", "shared.txt"}, treeOf(t, f.workdir, "main-int")); diff != "" {
		t.Errorf("main-int (-want +got):\n%s", diff)
	}
	if d := gitIn(t, f.workdir, "diff", "--name-only", vs[3].Worktree.Base, vs[3].Worktree.Branch); d != "d.txt" {
		t.Errorf("git diff base branch of d = %q, want its own work alone (d.txt)", d)
	}
	if !strings.Contains(errOut, "pilot schedule: integrated into main-int: a, b, c, d") {
		t.Errorf("stderr does not list what was integrated:\n%s", errOut)
	}
	if after := userCheckout(t, f.workdir); after != before {
		t.Errorf("the repository's checkout changed:\nbefore %s\nafter  %s", before, after)
	}
}

// b and c edit one line: d cannot start from both (it is blocked with the
// path and the branches), and the integration takes a and b, reporting c.
func TestScheduleDiamondConflict(t *testing.T) {
	f, graph := diamondFixture(t, "b", "c")
	before := userCheckout(t, f.workdir)
	code, out, errOut := runCLI(f.scheduleArgs(graph, "--integrate", "main-int")...)
	var vs []scheduledVerdict
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 1 || len(vs) != 4 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	d := vs[3]
	for _, want := range []string{"conflict in shared.txt", "pilot/schedule-b-", "pilot/schedule-c-"} {
		if d.Status != "blocked" || !strings.Contains(d.BlockedReason, want) {
			t.Errorf("d: %s (%s); want blocked, saying %q", d.Status, d.BlockedReason, want)
		}
	}
	if d.Integrated != nil {
		t.Errorf("d was never run, yet integrated = %v", *d.Integrated)
	}
	for i, want := range []bool{true, true, false} {
		if v := vs[i]; v.Integrated == nil || *v.Integrated != want {
			t.Errorf("%s: integrated %v, want %v", v.ID, v.Integrated, want)
		}
	}
	if diff := cmp.Diff([]string{"shared.txt"}, vs[2].IntegrationConflict); diff != "" {
		t.Errorf("c's integration conflict (-want +got):\n%s", diff)
	}
	if got := gitIn(t, f.workdir, "show", "main-int:shared.txt"); got != "line by b" {
		t.Errorf("main-int's shared.txt = %q, want b's line", got)
	}
	if diff := cmp.Diff([]string{"a.txt", "b.txt", "shared.txt"}, treeOf(t, f.workdir, "main-int")); diff != "" {
		t.Errorf("main-int (-want +got):\n%s", diff)
	}
	if !strings.Contains(errOut, "not integrated: c (conflict in shared.txt; its branch "+vs[2].Worktree.Branch+" is kept)") {
		t.Errorf("stderr does not report c's conflict:\n%s", errOut)
	}
	if after := userCheckout(t, f.workdir); after != before {
		t.Errorf("the repository's checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	// The checked-out branch is never an integration branch.
	cur := gitIn(t, f.workdir, "symbolic-ref", "--short", "HEAD")
	code, out, errOut = runCLI(f.scheduleArgs(graph, "--integrate", cur, "--rerun", "all")...)
	if code != 2 || out != "" || !strings.Contains(errOut, "is checked out in "+f.workdir) {
		t.Errorf("--integrate %s: exit %d\nstdout %s\nstderr %s; want a refusal before anything runs", cur, code, out, errOut)
	}
	if after := userCheckout(t, f.workdir); after != before {
		t.Errorf("--integrate %s changed the checkout:\nbefore %s\nafter  %s", cur, before, after)
	}
}

// A finished graph runs again only where its definition changed, or where
// --rerun or schedule reset says so.
func TestScheduleRerun(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	taskB := filepath.Join(f.dir, "b.md")
	os.WriteFile(taskB, []byte("b\n"), 0o644)
	b := gjob("b", "ok", f, "a")
	b["task_file"] = taskB
	graph := f.writeGraph(t, gjob("a", "ok", f), b)
	ran := func(args ...string) []string {
		t.Helper()
		code, out, errOut := runCLI(f.scheduleArgs(graph, args...)...)
		var vs []scheduledVerdict
		if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v\nstdout %s\nstderr %s", args, code, err, out, errOut)
		}
		var ids []string
		for _, v := range vs {
			if v.RunID != "" {
				ids = append(ids, v.ID)
			}
		}
		return ids
	}
	if diff := cmp.Diff([]string{"a", "b"}, ran()); diff != "" {
		t.Fatalf("first run (-want +got):\n%s", diff)
	}
	if got := ran(); got != nil {
		t.Errorf("the same graph again ran %v, want nothing", got)
	}
	os.WriteFile(taskB, []byte("b, changed\n"), 0o644)
	if diff := cmp.Diff([]string{"b"}, ran()); diff != "" {
		t.Errorf("after b's task file changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a"}, ran("--rerun", "a")); diff != "" {
		t.Errorf("--rerun a (-want +got):\n%s", diff)
	}
	if code, _, errOut := runCLI(f.scheduleArgs(graph, "--rerun", "zz")...); code != 2 || !strings.Contains(errOut, `--rerun: no job "zz" in the graph (its jobs: a, b; or all)`) {
		t.Errorf("--rerun zz: exit %d, stderr %s", code, errOut)
	}

	reset := func(extra ...string) (int, string, string) {
		return runCLI(append([]string{"schedule", "reset", "--graph", graph, "--workdir", f.workdir, "--state", filepath.Join(f.dir, "state")}, extra...)...)
	}
	code, out, errOut := reset("--dry-run")
	var said struct {
		DryRun  bool     `json:"dry_run"`
		Cleared []string `json:"cleared"`
	}
	if err := json.Unmarshal([]byte(out), &said); err != nil || code != 0 || !said.DryRun || strings.Join(said.Cleared, ",") != "a,b" {
		t.Fatalf("reset --dry-run: exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	if got := ran(); got != nil {
		t.Errorf("after a dry-run reset the graph ran %v, want nothing", got)
	}
	if code, out, errOut := reset("--job", "b"); code != 0 || !strings.Contains(out, `"b"`) {
		t.Fatalf("reset --job b: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if diff := cmp.Diff([]string{"b"}, ran()); diff != "" {
		t.Errorf("after reset --job b (-want +got):\n%s", diff)
	}
	if code, _, _ := reset(); code != 0 {
		t.Fatalf("reset: exit %d", code)
	}
	if diff := cmp.Diff([]string{"a", "b"}, ran()); diff != "" {
		t.Errorf("after reset (-want +got):\n%s", diff)
	}
}

// On a terminal, the conflict diamond says in the table why d never ran,
// and under it what was integrated and what was not.
func TestScheduleDiamondConflictOnATerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "1")
	f, graph := diamondFixture(t, "b", "c")
	ptm, pts := openPTY(t, 200, 40)
	defer ptm.Close()
	term := readTerminal(ptm)
	var out bytes.Buffer
	code := run(context.Background(), f.scheduleArgs(graph, "--integrate", "main-int"), nil, &out, pts)
	pts.Close()
	<-term.done
	if code != exitFailed {
		t.Errorf("exit %d, want 1", code)
	}
	screen := strings.Join(screenOf(t, term.String()), "\n")
	for _, re := range []string{
		`pilot schedule: 4 job\(s\) in \S+: 3 succeeded, 0 failed, 1 blocked\n`,
		`\n4  d +pd:code +blocked +- +-\n   ↳ its dependencies' work does not merge: merging pilot/schedule-c-\w+ onto the base [0-9a-f]{12} with pilot/schedule-a-\w+, pilot/schedule-b-\w+: conflict in shared.txt`,
		`\npilot schedule: integrated into main-int: a, b\npilot schedule: not integrated: c \(conflict in shared.txt; its branch pilot/schedule-c-\w+ is kept\)`,
	} {
		if !regexp.MustCompile(re).MatchString(screen) {
			t.Errorf("the screen does not match %s:\n%s", re, screen)
		}
	}
}
