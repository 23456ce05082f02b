package temporal

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
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
