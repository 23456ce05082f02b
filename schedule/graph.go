// Package schedule runs a graph of pilot tasks over any pilot.TaskDispatcher:
// every job whose dependencies are complete starts, bounded only by the
// parallelism, unless a running job writes the same files; a blocked job
// holds back only what depends on it; a provider's rate limit holds back its
// queued jobs until the reset, and its used-up quota blocks them, while other
// providers' jobs drain.
package schedule

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
)

// A Job is one node of a Graph.
type Job struct {
	// ID names the job in the graph; Deps are the IDs of the jobs that
	// must be complete before it starts.
	ID   string
	Deps []string
	// WriteSet lists the files the job may change, relative to the
	// Graph's Workdir or absolute. Jobs whose write sets overlap never run
	// at once. A directory, a glob, the workspace itself or a path outside
	// it makes the write set unknown (see WriteSet): such a job never runs
	// beside a job that writes. An empty WriteSet writes nothing.
	WriteSet []string
	// Task is what the job dispatches. Task.Provider also names the
	// provider gate the job waits behind.
	Task pilot.Task
	// Hold, when set, is a stop the caller reports before the job runs (a
	// review a person must do first, say): the job is blocked with Hold as
	// its reason, and only what depends on it waits.
	Hold string
	// Worktree runs the job in a git worktree of its own, which
	// Scheduler.Worktrees makes in the repository of Task.Workdir, on a
	// branch that starts at the graph's base commit (that repository's
	// HEAD when Run starts) with the work of every dependency, direct or
	// not, merged in, in graph order. Its WriteSet is not used: its writes
	// overlap nobody's.
	Worktree bool
	// Rerun runs the job even when the Store says an earlier run
	// completed it.
	Rerun bool
	// Estimate is how long the job is expected to run; zero is unknown
	// (then Scheduler.Estimate's, if set). Of the jobs ready at once,
	// Run starts the one with the longest remaining path of estimates
	// first, unless graph order finishes the graph sooner by them
	// (NewReadyPlanned): the job the group's end waits on longest is not
	// left for last. It changes no rule, only the order.
	Estimate time.Duration
}

// A Graph is a group of jobs and the workspace they write in.
type Graph struct {
	// Workdir is the workspace the write sets are relative to and must
	// stay in; empty means the current directory.
	Workdir string
	Jobs    []Job
}

// A GraphError lists what is wrong with a graph, job by job; nothing ran.
type GraphError struct {
	Problems []string
}

func (e *GraphError) Error() string {
	return "schedule: the graph is not valid: " + strings.Join(e.Problems, "; ")
}

// Check reports whether g can run: every job has an ID of its own, every
// dependency names a job of the graph other than itself, and the
// dependencies have no cycle. The error is a *GraphError that names each
// problem (the cycle's jobs in order).
func (g Graph) Check() error {
	var problems []string
	index := map[string]int{}
	for i, j := range g.Jobs {
		switch _, dup := index[j.ID]; {
		case j.ID == "":
			problems = append(problems, fmt.Sprintf("job %d has no id: give every job an \"id\"", i+1))
		case dup:
			problems = append(problems, fmt.Sprintf("job id %q is used twice: ids must be unique", j.ID))
		default:
			index[j.ID] = i
		}
	}
	for _, j := range g.Jobs {
		for _, d := range j.Deps {
			switch _, ok := index[d]; {
			case d == j.ID:
				problems = append(problems, fmt.Sprintf("job %q depends on itself", j.ID))
			case !ok:
				problems = append(problems, fmt.Sprintf("job %q depends on %q, which is not a job of the graph", j.ID, d))
			}
		}
	}
	if len(problems) == 0 {
		if cycle := g.cycle(index); cycle != nil {
			problems = append(problems, "the dependencies have a cycle: "+strings.Join(cycle, " -> "))
		}
	}
	if problems != nil {
		return &GraphError{Problems: problems}
	}
	return nil
}

// cycle returns one dependency cycle (its first job repeated at the end), or
// nil. index maps ids to positions; every dependency is known.
func (g Graph) cycle(index map[string]int) []string {
	const (
		unseen = iota
		open
		closed
	)
	state := make([]int, len(g.Jobs))
	var path []int
	var found []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = open
		path = append(path, i)
		for _, d := range g.Jobs[i].Deps {
			k := index[d]
			switch state[k] {
			case open:
				start := slices.Index(path, k)
				for _, p := range path[start:] {
					found = append(found, g.Jobs[p].ID)
				}
				found = append(found, g.Jobs[k].ID)
				return true
			case unseen:
				if visit(k) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = closed
		return false
	}
	for i := range g.Jobs {
		if state[i] == unseen && visit(i) {
			return found
		}
	}
	return nil
}

// ErrOutsideWorkspace and the other write-set reasons are what WriteSet says
// of a path that makes a write set unknown.
var (
	errBroad   = errors.New("is a directory or the workspace itself")
	errGlob    = errors.New("is a pattern, not a file")
	errOutside = errors.New("is outside the workspace")
)

// WriteSet normalizes paths, relative to workspace or absolute, to the set
// of absolute, clean file paths they name, with symbolic links resolved
// where the path (or a parent of it) exists: "./x", "a/../x" and the
// absolute path of x are one file. known is false, and the set empty, when
// any path is a directory (an existing one, or one written with a trailing
// slash), a glob, the workspace itself, or outside the workspace; why says
// which path and why.
func WriteSet(workspace string, paths []string) (set []string, known bool, why string) {
	n, err := newNormalizer(workspace)
	if err != nil {
		return nil, false, err.Error()
	}
	return n.writeSet(paths)
}

// normalizer normalizes write sets in one workspace, remembering the
// directories it resolved.
type normalizer struct {
	root string
	dirs map[string]string // directory -> with symbolic links resolved
}

func newNormalizer(workspace string) (*normalizer, error) {
	root, err := filepath.Abs(workspace)
	if err != nil {
		return nil, err
	}
	n := &normalizer{dirs: map[string]string{}}
	n.root = n.resolve(root)
	return n, nil
}

func (n *normalizer) writeSet(paths []string) (set []string, known bool, why string) {
	seen := map[string]bool{}
	for _, p := range paths {
		f, err := n.normalize(p)
		if err != nil {
			return nil, false, fmt.Sprintf("%q %v", p, err)
		}
		if !seen[f] {
			seen[f] = true
			set = append(set, f)
		}
	}
	sort.Strings(set)
	return set, true, ""
}

func (n *normalizer) normalize(p string) (string, error) {
	if strings.ContainsAny(p, "*?[") {
		return "", errGlob
	}
	if p == "" || strings.HasSuffix(p, "/") || strings.HasSuffix(p, string(filepath.Separator)) {
		return "", errBroad
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(n.root, p)
	}
	p = filepath.Clean(p)
	if p == n.root {
		return "", errBroad
	}
	// The file itself may be a link, or a directory; its directory is
	// resolved once per workspace.
	f := filepath.Join(n.resolve(filepath.Dir(p)), filepath.Base(p))
	st, err := os.Lstat(f)
	if err == nil && st.Mode()&os.ModeSymlink != 0 {
		f = n.resolve(f)
		st, err = os.Stat(f)
	}
	if f == n.root {
		return "", errBroad
	}
	rel, rerr := filepath.Rel(n.root, f)
	if rerr != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", errOutside
	}
	if err == nil && st.IsDir() {
		return "", errBroad
	}
	return f, nil
}

// resolve is p with symbolic links resolved in its longest existing prefix.
func (n *normalizer) resolve(p string) string {
	if r, ok := n.dirs[p]; ok {
		return r
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		dir, base := filepath.Split(p)
		dir = filepath.Clean(dir)
		if dir == p || base == "" {
			r = p
		} else {
			r = filepath.Join(n.resolve(dir), base)
		}
	}
	n.dirs[p] = r
	return r
}
