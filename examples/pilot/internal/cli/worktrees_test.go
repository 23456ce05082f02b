package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
)

func TestParseJobSpec(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want jobSpec
	}{
		{"glm:review:t.md", jobSpec{Provider: "glm", Mode: "review", TaskFile: "t.md"}},
		{"glm:code:t.md:worktree", jobSpec{Provider: "glm", Mode: "code", TaskFile: "t.md", Worktree: true}},
		{"fix login=glm:code:/a:b.md:worktree", jobSpec{Name: "fix login", Provider: "glm", Mode: "code", TaskFile: "/a:b.md", Worktree: true}},
		{"glm:code:/tasks/a=b.md", jobSpec{Provider: "glm", Mode: "code", TaskFile: "/tasks/a=b.md"}},
		{"glm:code:./worktree", jobSpec{Provider: "glm", Mode: "code", TaskFile: "./worktree"}},
		{"glm:code:t.md:worktree:worktree", jobSpec{Provider: "glm", Mode: "code", TaskFile: "t.md:worktree", Worktree: true}},
	} {
		got, err := parseJobSpec(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseJobSpec(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestJobLabels(t *testing.T) {
	specs := []jobSpec{
		{Provider: "glm", Mode: "review", TaskFile: "/t/task.md"},
		{Provider: "glm", Mode: "review", TaskFile: "task.md"},
		{Name: "glm:review#3", Provider: "kimi", Mode: "code", TaskFile: "x.md"},
		{Provider: "glm", Mode: "review", TaskFile: "/u/task.md"},
		{Name: "glm:review", Provider: "opus", Mode: "code", TaskFile: "y.md"},
		{Provider: "glm", Mode: "code", TaskFile: "fix.md"},
	}
	got, err := jobLabels(specs)
	// A name a job was given is its own; the others are called as their
	// verdicts call them, "provider:mode", and make room for it.
	want := []string{"glm:review#2", "glm:review#4", "glm:review#3", "glm:review#5", "glm:review", "glm:code"}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("jobLabels = %q, %v; want %q", got, err, want)
	}
	if _, err := jobLabels([]jobSpec{{Name: "a"}, {Name: "b"}, {Name: "a"}}); err == nil || !strings.Contains(err.Error(), `jobs 1 and 3 are both named "a"`) {
		t.Errorf("jobLabels of two jobs named a: %v", err)
	}
}

// Off a terminal: a named job is "job": its name, in its verdict and its
// started line; a job without one keeps pilot-workers' "provider:mode";
// every verdict names its task file.
func TestFanoutJobNamesAndTaskFile(t *testing.T) {
	f := newFixture(t, map[string][]string{"glm": {"out=done"}, "kimi-k3": {"out=done"}})
	other := filepath.Join(f.dir, "other.md")
	os.WriteFile(other, []byte("# other\n"), 0o644)
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "review", "task_file": f.taskFile, "name": "first look"},
		{"provider": "kimi-k3", "mode": "review", "task_file": other},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	if diff := cmp.Diff([]string{"first look", "kimi-k3:review"}, jobsOf(vs)); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if vs[0]["task_file"] != f.taskFile || vs[1]["task_file"] != other {
		t.Errorf("task files %v, %v; want %s, %s", vs[0]["task_file"], vs[1]["task_file"], f.taskFile, other)
	}
	started := map[string]bool{}
	for _, s := range startedLines(t, errOut) {
		started[fmt.Sprint(s["job"])] = true
	}
	if diff := cmp.Diff(map[string]bool{"first look": true, "kimi-k3:review": true}, started); diff != "" {
		t.Errorf("started lines' jobs (-want +got):\n%s", diff)
	}
	// --job NAME=...: the same.
	code, out, _ = runCLI(f.fanoutArgs("--job", "again=glm:review:"+f.taskFile)...)
	if vs := fanoutVerdicts(t, out); code != 0 || vs[0]["job"] != "again" {
		t.Errorf("exit %d, verdicts %v; want the job named again", code, vs)
	}
}

// worktreeOf decodes a verdict's worktree.
func worktreeOf(t *testing.T, v map[string]any) pilot.WorktreeInfo {
	t.Helper()
	data, _ := json.Marshal(v["worktree"])
	var wt pilot.WorktreeInfo
	if err := json.Unmarshal(data, &wt); err != nil || wt.Branch == "" {
		t.Fatalf("verdict %v has no worktree", v)
	}
	return wt
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// A worktree job's work is committed on its branch, where git log, git
// diff and git merge see it; the worktree of a job that changed nothing
// goes with its branch. Then pilot worktrees lists, diffs, removes and
// prunes them.
func TestFanoutWorktreeJobsWorkIsOnItsBranch(t *testing.T) {
	f := newFixture(t, map[string][]string{
		"writer": {`write={workdir}/src/made.go=package src\n`, `write={workdir}/debug.log=ignored\n`, "out=wrote"},
		"reader": {"out=read"},
	})
	repo := gitWorkdir(t, f)
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "writer", "mode": "code", "task_file": f.taskFile, "worktree": true, "name": "fix login"},
		{"provider": "reader", "mode": "code", "task_file": f.taskFile, "worktree": true},
		{"provider": "writer", "mode": "code", "task_file": f.taskFile, "worktree": true},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	fix, reader, second := worktreeOf(t, vs[0]), worktreeOf(t, vs[1]), worktreeOf(t, vs[2])

	// Beside the repository, private, named after the job.
	dir := repo + ".pilot-worktrees"
	for _, wt := range []pilot.WorktreeInfo{fix, reader, second} {
		if filepath.Dir(wt.Path) != dir || wt.Repo != repo || wt.Base != gitOut(t, repo, "rev-parse", "main") {
			t.Errorf("worktree %+v; want it in %s, of %s at main", wt, dir, repo)
		}
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dir, m)
	}
	if m := mode(t, fix.Path); m != 0o700 {
		t.Errorf("%s has mode %v, want 0700", fix.Path, m)
	}
	if !strings.HasPrefix(fix.Branch, "pilot/fix-login-") || !strings.HasPrefix(second.Branch, "pilot/task-") {
		t.Errorf("branches %s and %s; want them named after the job", fix.Branch, second.Branch)
	}

	// The work is on the branch, committed by pilot, the ignored file
	// left out; the worktree is clean.
	if !fix.Kept || fix.Commit != gitOut(t, repo, "rev-parse", fix.Branch) {
		t.Errorf("worktree %+v; want it kept, its commit the branch's tip", fix)
	}
	if got := gitOut(t, repo, "diff", "--name-only", "main", fix.Branch); got != "src/made.go" {
		t.Errorf("git diff --name-only main %s = %q, want src/made.go", fix.Branch, got)
	}
	want := fmt.Sprintf("pilot <pilot@localhost>|pilot: job fix login (writer:code), run %s", vs[0]["run_id"])
	if got := gitOut(t, repo, "log", "-1", "--format=%an <%ae>|%s", fix.Branch); got != want {
		t.Errorf("the commit: %q, want %q", got, want)
	}
	if got := gitOut(t, repo, "log", "-1", "--format=%s", second.Branch); !strings.HasPrefix(got, "pilot: job task.md (writer:code), run ") {
		t.Errorf("the unnamed job's commit: %q", got)
	}
	if got := gitOut(t, fix.Path, "status", "--porcelain"); got != "" {
		t.Errorf("the worktree is not clean after the commit:\n%s", got)
	}
	if data, err := os.ReadFile(filepath.Join(fix.Path, "debug.log")); err != nil || string(data) != "ignored\n" {
		t.Errorf("the ignored file is gone from the worktree: %q, %v", data, err)
	}
	if reader.Kept || exists(reader.Path) || gitOut(t, repo, "branch", "--list", reader.Branch) != "" {
		t.Errorf("the reader's worktree %+v is still there; it changed nothing", reader)
	}

	// The listing: repository and task.
	code, out, _ = runCLI("worktrees", "--run-dir", f.runDir)
	for _, w := range []string{"NAME", "REPOSITORY", "TASK", fix.Name, repo, f.taskFile, "kept (committed " + fix.Commit[:10] + ")", "removed"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("pilot worktrees: exit %d, lacks %q:\n%s", code, w, out)
		}
	}
	code, out, _ = runCLI("worktrees", "--run-dir", f.runDir, "--json")
	var entries []map[string]any
	json.Unmarshal([]byte(out), &entries)
	byName := map[string]map[string]any{}
	for _, e := range entries {
		byName[fmt.Sprint(e["name"])] = e
	}
	if e := byName[fix.Name]; code != 0 || len(entries) != 3 || e["task_file"] != f.taskFile || e["job"] != "fix login (writer:code)" || e["commit"] != fix.Commit {
		t.Errorf("pilot worktrees --json: exit %d:\n%s", code, out)
	}

	// The diff: by name, by branch, by the start of the name.
	for _, name := range []string{fix.Name, fix.Branch, "fix-log"} {
		code, out, errOut = runCLI("worktrees", "diff", name, "--run-dir", f.runDir)
		if code != 0 || !strings.Contains(out, "+++ b/src/made.go") || !strings.Contains(out, "+package src") || errOut != "" {
			t.Errorf("pilot worktrees diff %s: exit %d, stdout %q, stderr %q", name, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"diff"}, {"diff", "nope"}, {"remove", "nope"}, {"remove"}} {
		code, out, errOut = runCLI(append(append([]string{"worktrees"}, args...), "--run-dir", f.runDir)...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("pilot worktrees %v: exit %d, stdout %q, stderr %q; want 2 and a message", args, code, out, errOut)
		}
	}

	// Remove refuses work found nowhere else, unless forced.
	code, out, errOut = runCLI("worktrees", "remove", fix.Name, "--run-dir", f.runDir)
	if code != 1 || !strings.Contains(errOut, "1 commit(s) on no other branch") || !strings.Contains(errOut, "--force") || !exists(fix.Path) {
		t.Errorf("remove of unmerged work: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI("worktrees", "remove", second.Name, "--force", "--run-dir", f.runDir)
	if code != 0 || !strings.Contains(out, "removed "+second.Name) || exists(second.Path) || gitOut(t, repo, "branch", "--list", second.Branch) != "" {
		t.Errorf("remove --force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Prune keeps the unmerged one; once merged, it goes.
	code, out, _ = runCLI("worktrees", "prune", "--run-dir", f.runDir)
	if code != 0 || !strings.Contains(out, "pruned 0 worktree(s)") || !exists(fix.Path) {
		t.Errorf("prune before the merge: exit %d:\n%s", code, out)
	}
	gitOut(t, repo, "merge", "-q", "--no-edit", fix.Branch)
	if got := gitOut(t, repo, "show", "main:src/made.go"); got != "package src" {
		t.Errorf("after git merge, main has %q", got)
	}
	code, out, _ = runCLI("worktrees", "prune", "--run-dir", f.runDir)
	if code != 0 || !strings.Contains(out, "pruned 1 worktree(s)") || exists(fix.Path) || gitOut(t, repo, "branch", "--list", fix.Branch) != "" {
		t.Errorf("prune after the merge: exit %d:\n%s", code, out)
	}
	if code, out, _ := runCLI("worktrees", "--run-dir", f.runDir); code != 0 || strings.TrimSpace(out) != "no worktrees" {
		t.Errorf("the inventory at the end: exit %d:\n%s", code, out)
	}
}

// --job P:M:F:worktree asks for a worktree; --worktree-dir puts it where it
// says; a merged worktree goes with pilot worktrees remove, no --force.
func TestFanoutJobSpecWorktreeAndWorktreeDir(t *testing.T) {
	f := newFixture(t, map[string][]string{"writer": {`write={workdir}/made.txt=work\n`, "out=wrote"}})
	repo := gitWorkdir(t, f)
	wtDir := filepath.Join(f.dir, "trees")
	code, out, errOut := runCLI(f.fanoutArgs("--worktree-dir", wtDir,
		"--job", "a=writer:code:"+f.taskFile+":worktree", "--job", "b=writer:code:"+f.taskFile+":worktree")...)
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	a := worktreeOf(t, vs[0])
	if filepath.Dir(a.Path) != wtDir || !a.Kept || mode(t, wtDir) != 0o700 {
		t.Errorf("worktree %+v; want it kept in %s (mode 0700)", a, wtDir)
	}
	if exists(repo + ".pilot-worktrees") {
		t.Errorf("%s.pilot-worktrees was made although --worktree-dir was given", repo)
	}
	gitOut(t, repo, "branch", "taken", a.Branch)
	code, out, errOut = runCLI("worktrees", "remove", a.Name, "--run-dir", f.runDir)
	if code != 0 || exists(a.Path) || gitOut(t, repo, "branch", "--list", a.Branch) != "" {
		t.Errorf("remove of a merged worktree: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// Without :worktree, two code jobs in one workdir are refused, and
	// the message says how to ask for worktrees.
	code, _, errOut = runCLI(f.fanoutArgs("--job", "writer:code:"+f.taskFile, "--job", "writer:code:"+f.taskFile)...)
	if code != 2 || !strings.Contains(errOut, "--job P:M:F:worktree") {
		t.Errorf("two code jobs without worktrees: exit %d, stderr %q", code, errOut)
	}
	// A worktrees directory that cannot be made is bad input: nothing runs.
	blocker := filepath.Join(f.dir, "file")
	os.WriteFile(blocker, nil, 0o644)
	code, out, errOut = runCLI(f.fanoutArgs("--worktree-dir", filepath.Join(blocker, "trees"), "--job", "writer:code:"+f.taskFile+":worktree")...)
	if code != 2 || out != "" || !strings.Contains(errOut, "worktrees directory") {
		t.Errorf("an impossible --worktree-dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Off a terminal (a CI log): each job's end is one line on stderr, with
// the name its verdict carries, the verdict and class, and its time.
func TestFanoutOffATerminalEndsEachJobInOneLine(t *testing.T) {
	f := newFixture(t, map[string][]string{
		"glm":     {"out=done"},
		"kimi-k3": {"out=done"},
		"broken":  {"out=trying", "err=fatal: the model said no", "exit=3"},
	})
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "glm", "mode": "review", "task_file": f.taskFile, "name": "first look"},
		{"provider": "kimi-k3", "mode": "review", "task_file": f.taskFile},
		{"provider": "broken", "mode": "explore", "task_file": f.taskFile},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d (one job failed); stderr:\n%s", code, exitFailed, errOut)
	}
	if vs := fanoutVerdicts(t, out); len(vs) != 3 {
		t.Fatalf("%d verdicts", len(vs))
	}
	end := regexp.MustCompile(`^pilot fanout: (.+?): (completed|error \([a-z-]+\)) after \d+(m\d\d)?s$`)
	got := map[string]string{}
	for _, l := range strings.Split(errOut, "\n") {
		m := end.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if _, twice := got[m[1]]; twice {
			t.Errorf("job %s ended twice:\n%s", m[1], errOut)
		}
		got[m[1]] = m[2]
	}
	want := map[string]string{
		"first look (glm:review)": "completed",
		"kimi-k3:review":          "completed",
		"broken:explore":          "error (generic-error)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("end lines (-want +got):\n%s\nstderr:\n%s", diff, errOut)
	}
}

// A worktree whose directory a person removed by hand is listed as
// missing; remove refuses it while its branch holds work, and with
// --force removes the branch; prune says what it dropped.
func TestWorktreeRemovedByHand(t *testing.T) {
	f := newFixture(t, map[string][]string{"writer": {`write={workdir}/made.txt=work\n`, "out=wrote"}})
	repo := gitWorkdir(t, f)
	jobs := writeJobsFile(t, f.dir, []map[string]any{
		{"provider": "writer", "mode": "code", "task_file": f.taskFile, "worktree": true, "name": "one"},
		{"provider": "writer", "mode": "code", "task_file": f.taskFile, "worktree": true, "name": "two"},
	})
	code, out, errOut := runCLI(f.fanoutArgs("--jobs-file", jobs)...)
	if code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, errOut)
	}
	vs := fanoutVerdicts(t, out)
	one, two := worktreeOf(t, vs[0]), worktreeOf(t, vs[1])
	for _, wt := range []pilot.WorktreeInfo{one, two} {
		if err := os.RemoveAll(wt.Path); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = runCLI("worktrees", "--run-dir", f.runDir)
	if code != 0 || strings.Count(out, " missing ") != 2 {
		t.Errorf("pilot worktrees: exit %d:\n%s\nwant both missing", code, out)
	}
	name := filepath.Base(one.Path)
	if code, _, errOut := runCLI("worktrees", "remove", name, "--run-dir", f.runDir); code == 0 || !strings.Contains(errOut, "commit(s) on no other branch") {
		t.Errorf("remove of a missing worktree with work: exit %d, %q; want a refusal naming its commits", code, errOut)
	}
	if code, _, errOut := runCLI("worktrees", "remove", name, "--force", "--run-dir", f.runDir); code != 0 {
		t.Errorf("remove --force: exit %d, %q", code, errOut)
	}
	if got := gitOut(t, repo, "branch", "--list", one.Branch); got != "" {
		t.Errorf("its branch %s is still there", one.Branch)
	}
	code, out, _ = runCLI("worktrees", "prune", "--run-dir", f.runDir)
	if code != 0 || !strings.Contains(out, "pruned 0 worktree(s); dropped 1 whose directory was gone") || !strings.Contains(out, filepath.Base(two.Path)) {
		t.Errorf("prune: exit %d:\n%s", code, out)
	}
	if got := gitOut(t, repo, "branch", "--list", two.Branch); got == "" {
		t.Errorf("prune deleted branch %s, which holds work", two.Branch)
	}
	if _, out, _ := runCLI("worktrees", "--run-dir", f.runDir); !strings.Contains(out, "no worktrees") {
		t.Errorf("after prune:\n%s", out)
	}
}
