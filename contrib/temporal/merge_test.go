package temporal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

// writing is a worker that writes the task's prompt to the file its label
// names (a path in the worktree) and commits it; it records the files its
// worktree held when it started.
func writing(saw map[string][]string) pilot.TaskDispatcher {
	return pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		var files []string
		entries, _ := os.ReadDir(task.Workdir)
		for _, e := range entries {
			if e.Name() != ".git" {
				files = append(files, e.Name())
			}
		}
		saw[task.Key] = files
		name, _, _ := strings.Cut(task.Label, ":")
		if err := os.WriteFile(filepath.Join(task.Workdir, name), []byte(task.Prompt+"\n"), 0o644); err != nil {
			return pilot.Verdict{}, err
		}
		for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-m", "work of " + task.Key}} {
			if _, err := git(ctx, task.Workdir, nil, args...); err != nil {
				return pilot.Verdict{}, err
			}
		}
		return verdict(task, pilot.Completed, ""), nil
	})
}

// A diamond, on this host and on a git server: d starts from a's, b's and
// c's work merged; a conflict between b and c fails d with the path named,
// launches nothing and leaves the job's branch unmade.
func TestRunJobStartsFromItsDependenciesWork(t *testing.T) {
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "local", true: "remote"}[remote]
		t.Run(name, func(t *testing.T) {
			repo := pilottest.GitRepo(t)
			if remote {
				repo = startGitServer(t).repo(t, "r")
			}
			saw := map[string][]string{}
			a := &Activities{Dispatcher: writing(saw), CacheDir: t.TempDir(), WorktreeDir: t.TempDir()}
			env := activityEnv(t, a)
			job := func(n, file, content string, merge ...string) Job {
				j := testJob(repo, n)
				j.Label, j.Prompt, j.Merge = file, content, merge
				return j
			}
			for _, j := range []Job{
				job("a", "a.txt", "a"), job("b", "b.txt", "b"), job("c", "c.txt", "c"),
				job("d", "d.txt", "d", "a", "b", "c"),
			} {
				if _, err := runJob(t, env, j); err != nil {
					t.Fatalf("job %s: %v", j.Name, err)
				}
			}
			if got := strings.Join(saw["d"], " "); got != "a.txt b.txt c.txt" {
				t.Errorf("d's worktree held %q when it started; want a's, b's and c's files", got)
			}

			// b2 and c2 write one file differently: d2 cannot start.
			for _, j := range []Job{job("b2", "same.txt", "from b2"), job("c2", "same.txt", "from c2")} {
				if _, err := runJob(t, env, j); err != nil {
					t.Fatalf("job %s: %v", j.Name, err)
				}
			}
			var calls atomic.Int32
			a2 := &Activities{Dispatcher: committing(&calls), CacheDir: a.CacheDir, WorktreeDir: a.WorktreeDir}
			_, err := runJob(t, activityEnv(t, a2), job("d2", "d2.txt", "d2", "b2", "c2"))
			if err == nil || !strings.Contains(err.Error(), "conflict in same.txt") || !strings.Contains(err.Error(), "pilot/job/c2") {
				t.Errorf("d2: %v; want a conflict naming c2's branch and same.txt", err)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("d2's worker ran %d times; want never", n)
			}
		})
	}
}
