package schedule_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
	"github.com/pilotworkers/pilot/worktrees"
)

func gitOut(t *testing.T, dir string, args ...string) string {
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

// checkout is what the user's own checkout of repo holds: its branch, HEAD,
// status and files, which no worktree job may change.
func checkout(t *testing.T, repo string) string {
	t.Helper()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join([]string{gitOut(t, repo, "symbolic-ref", "HEAD"), gitOut(t, repo, "rev-parse", "HEAD"),
		gitOut(t, repo, "status", "--porcelain"), strings.Join(names, " ")}, "\n")
}

// agentWrites is a fake agent that, as job id, commits id.txt in its
// workdir (and, for the ids in shared, a line of its own in shared.txt),
// and records the files it found there when it started.
type agentWrites struct {
	shared []string
	mu     sync.Mutex
	found  map[string][]string
}

func (a *agentWrites) dispatch(t *testing.T) pilot.TaskDispatcher {
	return pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		entries, err := os.ReadDir(tk.Workdir)
		if err != nil {
			return pilot.Verdict{}, err
		}
		var names []string
		for _, e := range entries {
			if e.Name() != ".git" {
				names = append(names, e.Name())
			}
		}
		a.mu.Lock()
		a.found[tk.Label] = names
		a.mu.Unlock()
		files := []string{tk.Label + ".txt"}
		os.WriteFile(filepath.Join(tk.Workdir, tk.Label+".txt"), []byte(tk.Label+"\n"), 0o644)
		if slices.Contains(a.shared, tk.Label) {
			os.WriteFile(filepath.Join(tk.Workdir, "shared.txt"), []byte("line by "+tk.Label+"\n"), 0o644)
			files = append(files, "shared.txt")
		}
		gitOut(t, tk.Workdir, append([]string{"add"}, files...)...)
		gitOut(t, tk.Workdir, "commit", "-q", "-m", tk.Label)
		return pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, Label: tk.Label, RunID: "run-" + tk.Label, Verdict: pilot.Completed}, nil
	})
}

func diamond(repo string) schedule.Graph {
	wj := func(id string, deps ...string) schedule.Job {
		j := job(id, deps...)
		j.Worktree, j.Task.Workdir = true, repo
		return j
	}
	return schedule.Graph{Workdir: repo, Jobs: []schedule.Job{wj("a"), wj("b", "a"), wj("c", "a"), wj("d", "b", "c")}}
}

func TestDependentsBuildOnTheirDependencies(t *testing.T) {
	repo := pilottest.GitRepo(t)
	os.WriteFile(filepath.Join(repo, "shared.txt"), []byte("the base line\n"), 0o644)
	gitOut(t, repo, "add", "shared.txt")
	gitOut(t, repo, "commit", "-q", "-m", "shared")
	before := checkout(t, repo)

	for _, tt := range []struct {
		name       string
		shared     []string // the jobs that edit shared.txt's line
		status     map[string]string
		integrated map[string]bool
		conflict   map[string][]string
		intFiles   []string
	}{
		{
			name:       "a diamond",
			status:     map[string]string{"a": "a: complete", "b": "b: complete", "c": "c: complete", "d": "d: complete"},
			integrated: map[string]bool{"a": true, "b": true, "c": true, "d": true},
			intFiles:   []string{"a.txt", "b.txt", "c.txt", "d.txt", "shared.txt"},
		},
		{
			name:   "b and c edit one line",
			shared: []string{"b", "c"},
			status: map[string]string{"a": "a: complete", "b": "b: complete", "c": "c: complete",
				"d": "d: blocked (its dependencies' work does not merge: merging pilot/schedule-c-* onto the base * with pilot/schedule-a-*, pilot/schedule-b-*: conflict in shared.txt)"},
			integrated: map[string]bool{"a": true, "b": true, "c": false},
			conflict:   map[string][]string{"c": {"shared.txt"}},
			intFiles:   []string{"a.txt", "b.txt", "shared.txt"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			into := "int-" + strings.ReplaceAll(tt.name, " ", "-")
			agent := &agentWrites{shared: tt.shared, found: map[string][]string{}}
			s := &schedule.Scheduler{Dispatcher: agent.dispatch(t), Worktrees: worktrees.New(t.TempDir(), t.TempDir()), Integrate: into}
			rs := run(t, s, diamond(repo))
			got := statuses(rs)
			for id, want := range tt.status {
				if ok, _ := filepath.Match(want, got[id]); !ok {
					t.Errorf("%s = %q, want %q", id, got[id], want)
				}
			}
			if tt.shared == nil {
				if diff := cmp.Diff([]string{"a.txt", "b.txt", "c.txt", "shared.txt"}, agent.found["d"]); diff != "" {
					t.Errorf("d's worktree when it started (-want +got):\n%s", diff)
				}
			}
			for _, r := range rs {
				want, ok := tt.integrated[r.ID]
				if !ok {
					if r.Integration != nil {
						t.Errorf("%s: integration %+v, want none", r.ID, r.Integration)
					}
					continue
				}
				if r.Integration == nil || r.Integration.Merged != want || r.Integration.Branch != into {
					t.Errorf("%s: integration %+v, want merged=%v into %s", r.ID, r.Integration, want, into)
					continue
				}
				if diff := cmp.Diff(tt.conflict[r.ID], r.Integration.Conflict); diff != "" {
					t.Errorf("%s: conflict (-want +got):\n%s", r.ID, diff)
				}
			}
			files := strings.Fields(gitOut(t, repo, "ls-tree", "-r", "--name-only", into))
			if diff := cmp.Diff(tt.intFiles, files); diff != "" {
				t.Errorf("%s's files (-want +got):\n%s", into, diff)
			}
			if after := checkout(t, repo); after != before {
				t.Errorf("the repository's own checkout changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestWorktreeJobsNeedWorktrees(t *testing.T) {
	repo := pilottest.GitRepo(t)
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(ok)}
	if _, err := s.Run(context.Background(), diamond(repo)); err == nil || !strings.Contains(err.Error(), "set Scheduler.Worktrees") {
		t.Errorf("Run without Worktrees: err = %v", err)
	}
	s = &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(ok), Integrate: "int"}
	if _, err := s.Run(context.Background(), schedule.Graph{Jobs: []schedule.Job{job("a")}}); err == nil || !strings.Contains(err.Error(), "no job of the graph is a worktree job") {
		t.Errorf("Integrate without worktree jobs: err = %v", err)
	}
}

func TestWorktreeNamesAreUniquePerRun(t *testing.T) {
	repo := pilottest.GitRepo(t)
	runDir := t.TempDir()
	for i := range 2 {
		// A fresh state each time: nothing says the jobs ran before.
		agent := &agentWrites{found: map[string][]string{}}
		st, err := schedule.OpenStore(filepath.Join(t.TempDir(), schedule.StoreFileName), false)
		if err != nil {
			t.Fatal(err)
		}
		s := &schedule.Scheduler{Dispatcher: agent.dispatch(t), Worktrees: worktrees.New(runDir, ""), Store: st}
		for _, r := range run(t, s, diamond(repo)) {
			if r.Status != schedule.StatusComplete {
				t.Errorf("run %d: %s: %s, %s", i+1, r, r.Verdict.FailureClass, r.Verdict.EvidenceExcerpt)
			}
		}
	}
	if n := len(strings.Fields(gitOut(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/pilot/"))); n != 8 {
		t.Errorf("%d pilot branches, want 8: one per job and run", n)
	}
}

// brokenWorktrees fails to make any worktree.
type brokenWorktrees struct{ schedule.Worktrees }

func (brokenWorktrees) CreateAt(context.Context, string, string, string) (pilot.WorktreeInfo, error) {
	return pilot.WorktreeInfo{}, os.ErrPermission
}

func TestPilotsOwnFailureHasAClass(t *testing.T) {
	repo := pilottest.GitRepo(t)
	s := &schedule.Scheduler{Dispatcher: pilottest.DispatchFunc(ok), Worktrees: brokenWorktrees{worktrees.New(t.TempDir(), "")}}
	rs := run(t, s, diamond(repo))
	v := rs[0].Verdict
	if rs[0].Status != schedule.StatusFailed || v.FailureClass != pilot.FailPilot || v.EvidenceSource != "pilot" ||
		v.EvidenceExcerpt != "pilot: worktree: permission denied" || v.StderrTail != v.EvidenceExcerpt {
		t.Errorf("a: %s, verdict %+v; want failed, pilot-error with pilot's error as evidence", rs[0], v)
	}
	if rs[3].Status != schedule.StatusWaiting {
		t.Errorf("d: %s, want waiting", rs[3])
	}
}

// A worktree job its provider rate limits resumes in the worktree it had,
// and its work there is kept once.
func TestGatedWorktreeJobResumesInItsWorktree(t *testing.T) {
	repo := pilottest.GitRepo(t)
	var dirs []string
	s := &schedule.Scheduler{
		Worktrees: worktrees.New(t.TempDir(), t.TempDir()),
		After: func(time.Duration) <-chan time.Time {
			c := make(chan time.Time, 1)
			c <- time.Now()
			return c
		},
		Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			dirs = append(dirs, tk.Workdir)
			os.WriteFile(filepath.Join(tk.Workdir, fmt.Sprintf("part%d.txt", len(dirs))), []byte("x\n"), 0o644)
			v := pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, RunID: fmt.Sprint("run-", len(dirs)), Verdict: pilot.Completed}
			if len(dirs) == 1 {
				v.Verdict = pilot.Failed
				v.FailureClass, v.RetryAfterMS = pilot.FailProviderRateLimit, 1
			}
			return v, nil
		}),
	}
	j := job("a")
	j.Worktree, j.Task.Workdir = true, repo
	rs := run(t, s, schedule.Graph{Workdir: repo, Jobs: []schedule.Job{j}})
	if len(dirs) != 2 || dirs[0] != dirs[1] {
		t.Fatalf("the dispatches ran in %v, want twice in one worktree", dirs)
	}
	w := rs[0].Worktree
	if rs[0].Status != schedule.StatusComplete || rs[0].Gated != 1 || w == nil || !w.Kept {
		t.Fatalf("result %s, gated %d, worktree %+v", rs[0], rs[0].Gated, w)
	}
	if diff := cmp.Diff([]string{"part1.txt", "part2.txt"}, strings.Fields(gitOut(t, repo, "ls-tree", "-r", "--name-only", w.Branch))); diff != "" {
		t.Errorf("the job's branch (-want +got):\n%s", diff)
	}
}
