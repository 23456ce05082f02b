package temporal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

func TestJobsOfAGraph(t *testing.T) {
	task := func(p string) pilot.Task {
		return pilot.Task{Provider: p, Mode: pilot.ModeCode, Prompt: "do " + p, Label: "l", Timeout: time.Minute}
	}
	g := schedule.Graph{Workdir: "/w", Jobs: []schedule.Job{
		{ID: "a", Task: task("pa"), WriteSet: []string{"x.go", "/w/docs/y.md"}},
		{ID: "b", Deps: []string{"a"}, Task: task("pb"), WriteSet: []string{"x.go"}, Worktree: true},
	}}
	jobs, err := JobsOf(g, "git://127.0.0.1:1/r.git")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Name: "a", Repo: "git://127.0.0.1:1/r.git", Provider: "pa", Mode: pilot.ModeCode, Prompt: "do pa", Label: "l", Timeout: time.Minute, Writes: []string{"x.go", "docs/y.md"}},
		{Name: "b", Repo: "git://127.0.0.1:1/r.git", Deps: []string{"a"}, Provider: "pb", Mode: pilot.ModeCode, Prompt: "do pb", Label: "l", Timeout: time.Minute},
	}
	if diff := cmp.Diff(want, jobs); diff != "" {
		t.Errorf("JobsOf (-want +got):\n%s", diff)
	}

	g.Jobs[0].Hold = "review first"
	g.Jobs[1].Worktree = false
	g.Jobs[1].WriteSet = []string{"/elsewhere/z"}
	_, err = JobsOf(g, "/repo")
	if err == nil || !strings.Contains(err.Error(), "job a is held (review first)") || !strings.Contains(err.Error(), "job b writes /elsewhere/z, outside") {
		t.Errorf("JobsOf of a held job and a write outside: %v; want both named", err)
	}
}

// RunJobs picks a graph's jobs by schedule's own rules: with one slot,
// both start the ready job with the longest remaining path first (graph
// order breaking ties), so they start a graph's jobs in the same order.
func TestRunJobsPicksAGraphsJobsAsTheSchedulerDoes(t *testing.T) {
	task := pilot.Task{Provider: "p", Mode: pilot.ModeCode, Prompt: "do it", Timeout: time.Minute}
	const m = time.Minute
	for _, tc := range []struct {
		name string
		jobs []schedule.Job
		want []string
	}{
		{"no estimates", []schedule.Job{
			{ID: "a", Deps: []string{"c"}, Task: task},
			{ID: "b", Task: task},
			{ID: "c", Task: task},
			{ID: "d", Deps: []string{"b"}, Task: task},
			{ID: "e", Deps: []string{"a", "d"}, Task: task},
			{ID: "f", Deps: []string{"c"}, Task: task},
		}, []string{"b", "c", "a", "d", "e", "f"}},
		// f is long: c, which it waits on, starts before b and its
		// chain; then f before a.
		{"estimates", []schedule.Job{
			{ID: "a", Deps: []string{"c"}, Task: task, Estimate: m},
			{ID: "b", Task: task, Estimate: m},
			{ID: "c", Task: task, Estimate: m},
			{ID: "d", Deps: []string{"b"}, Task: task, Estimate: m},
			{ID: "e", Deps: []string{"a", "d"}, Task: task, Estimate: m},
			{ID: "f", Deps: []string{"c"}, Task: task, Estimate: 30 * m},
		}, []string{"c", "f", "b", "a", "d", "e"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := schedule.Graph{Workdir: "/w", Jobs: tc.jobs}
			var mu sync.Mutex
			var scheduled []string
			s := schedule.Scheduler{MaxParallel: 1, Dispatcher: pilottest.DispatchFunc(func(_ context.Context, tk pilot.Task) (pilot.Verdict, error) {
				mu.Lock()
				scheduled = append(scheduled, tk.Label)
				mu.Unlock()
				return pilot.Verdict{Type: event.Verdict, Verdict: pilot.Completed}, nil
			})}
			for i := range g.Jobs {
				g.Jobs[i].Task.Label = g.Jobs[i].ID
			}
			if _, err := s.Run(context.Background(), g); err != nil {
				t.Fatal(err)
			}
			jobs, err := JobsOf(g, "/repo")
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeJobs{}
			env := workflowEnv(t, f)
			env.ExecuteWorkflow(WorkflowName, Input{Jobs: jobs, Limit: 1})
			workflowResults(t, env)
			if diff := cmp.Diff(tc.want, scheduled); diff != "" {
				t.Errorf("the scheduler's order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(scheduled, f.calls); diff != "" {
				t.Errorf("RunJobs's order against the scheduler's (-scheduler +RunJobs):\n%s", diff)
			}
		})
	}
}
