package temporal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pilotworkers/pilot/schedule"
)

// JobsOf returns the jobs of g for RunJobs, each in repository repo (a
// path or a git URL): a job's ID is its Name, its Task's provider, mode,
// prompt, task file, label and timeouts are the Job's, its Deps stay, and
// so do the rules a schedule.Scheduler keeps on one machine: its WriteSet,
// relative to g.Workdir, becomes Writes (unused for a Worktree job, whose
// writes overlap nobody's, as in schedule), and RunJobs starts each job
// from its dependencies' work. A job with a Hold, or a WriteSet outside
// g.Workdir, is refused: the error names every job that cannot go.
func JobsOf(g schedule.Graph, repo string) ([]Job, error) {
	if err := g.Check(); err != nil {
		return nil, err
	}
	root := g.Workdir
	if root == "" {
		root = "."
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	var errs []string
	for _, sj := range g.Jobs {
		t := sj.Task
		j := Job{
			Name: sj.ID, Repo: repo, Deps: sj.Deps,
			Provider: t.Provider, Mode: t.Mode, Prompt: t.Prompt, TaskFile: t.TaskFile, Label: t.Label,
			Timeout: t.Timeout, IdleTimeout: t.IdleTimeout, Estimate: sj.Estimate,
		}
		if sj.Hold != "" {
			errs = append(errs, fmt.Sprintf("job %s is held (%s): RunJobs has no holds; run it once the hold is lifted", sj.ID, sj.Hold))
			continue
		}
		if !sj.Worktree {
			for _, w := range sj.WriteSet {
				if filepath.IsAbs(w) {
					rel, err := filepath.Rel(root, w)
					if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
						errs = append(errs, fmt.Sprintf("job %s writes %s, outside the graph's workdir %s", sj.ID, w, root))
						continue
					}
					w = rel
				}
				j.Writes = append(j.Writes, filepath.ToSlash(w))
			}
		}
		jobs = append(jobs, j)
	}
	if len(errs) > 0 {
		return nil, errors.New("temporal: " + strings.Join(errs, "; "))
	}
	if err := CheckJobs(jobs); err != nil {
		return nil, err
	}
	return jobs, nil
}
