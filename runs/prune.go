package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/size"
	"github.com/pilotworkers/pilot/worktrees"
)

// PruneOptions says which runs Prune removes. The zero value removes every
// run that is over and whose worktree holds no work.
type PruneOptions struct {
	// OlderThan is how long ago a run must have ended to be removed.
	OlderThan time.Duration
	// MaxSize, when positive, is the total size in bytes the run
	// directories may take: Prune removes only the oldest of the runs it
	// may remove, as many as it takes for the total (of every run, kept
	// ones too) to fit, and keeps the rest. Zero means no size limit.
	MaxSize int64
	// KeepFailed keeps the runs whose verdict is not completed.
	KeepFailed bool
	// DryRun decides as Prune would, and removes nothing.
	DryRun bool
	// Now is the time ages are measured from; zero means time.Now().
	Now time.Time
}

// Pruned is what Prune did, or on a dry run would do, with one run.
type Pruned struct {
	Run Run
	// Bytes is the size of the run's directory when Prune looked (see
	// [pilot.Record].RunDirBytes).
	Bytes int64
	// Kept says why the run was kept; "" means it was removed (on a dry
	// run: would be).
	Kept string
	// Err is why removing its directory failed.
	Err error
}

// Prune removes the directories of the runs in dir that ended longer ago
// than opt.OlderThan, and returns its decision for every run, oldest
// first. It keeps a run that is still going on, and one whose worktree
// (made by Fanout, see package worktrees) holds work that is nowhere else:
// uncommitted changes, or commits of its branch on no other branch,
// remote-tracking branch or tag. A record that still says StatusRunning
// after its pilot died is kept too: Reconcile first to make it prunable.
//
// With opt.MaxSize it removes, of those runs, the oldest first, and stops
// once the run directories left (kept runs counted) take at most MaxSize;
// when the runs it must keep take more, it removes every run it may. Sizes
// are measured as Prune starts (the sum of each directory's file sizes,
// symlinks not followed), not read from the records.
//
// Without the worktree inventory no run can be cleared of holding work:
// then Prune removes nothing and returns the error. Otherwise the error
// joins a [*RecordError] for each run whose record could not be read
// (those are left alone); failed removals are in Pruned.Err.
func Prune(ctx context.Context, dir string, opt PruneOptions) ([]Pruned, error) {
	dir = resolve(dir)
	runs, listErr := List(dir)
	var rerr *RecordError
	if listErr != nil && !errors.As(listErr, &rerr) {
		return nil, listErr
	}
	wts, err := worktrees.List(dir)
	if err != nil {
		return nil, fmt.Errorf("runs: reading the worktree inventory (%w): nothing removed; fix or remove it, then prune again", err)
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	out := make([]Pruned, 0, len(runs))
	var total int64
	slices.Reverse(runs) // oldest first
	for _, r := range runs {
		n, _ := rundir.Size(r.Dir) // a lower bound where part cannot be read
		out = append(out, Pruned{Run: r, Bytes: n})
		total += n
	}
	for i := range out {
		p := &out[i]
		p.Kept = opt.keep(ctx, p.Run, wts, total)
		if p.Kept != "" {
			continue
		}
		if !opt.DryRun {
			if err := os.RemoveAll(p.Run.Dir); err != nil {
				p.Err = fmt.Errorf("runs: removing run %s: %w", p.Run.ID, err)
				left, _ := rundir.Size(p.Run.Dir)
				total -= p.Bytes - left
				continue
			}
		}
		total -= p.Bytes
	}
	return out, listErr
}

// keep says why Prune keeps run r, or "" to remove it; total is what the
// runs not removed so far take.
func (opt PruneOptions) keep(ctx context.Context, r Run, wts []worktrees.Entry, total int64) string {
	rec := r.Record
	if rec.Status == StatusRunning {
		if alive, ev := r.Owner(); !alive {
			return "its record still says running, but " + ev + "; reconciling marks it " + StatusAbandoned
		}
		return "still running"
	}
	if rec.EndedAt == nil {
		return "its record has no ended_at"
	}
	if ago := opt.Now.Sub(*rec.EndedAt); ago <= opt.OlderThan {
		return fmt.Sprintf("ended %s ago, not longer than %s", Duration(ago), Duration(opt.OlderThan))
	}
	if opt.KeepFailed && rec.Verdict != pilot.Completed {
		v := string(rec.Verdict)
		if v == "" {
			v = rec.Status
		}
		return "its verdict is " + v + ", and failed runs are kept"
	}
	if opt.MaxSize > 0 && total <= opt.MaxSize {
		return fmt.Sprintf("the runs left take %s, within the size limit %s", size.Bytes(total).Approx(), size.Bytes(opt.MaxSize).Approx())
	}
	var matched bool
	for _, e := range wts {
		if !r.OwnsWorktree(e) {
			continue
		}
		matched = true
		if e.State == "removed" {
			continue
		}
		if why := unmerged(ctx, e.Repo, e.Path, e.Branch); why != "" {
			return why
		}
	}
	// A worktree of pilot's that the inventory does not list: in this run
	// dir's .worktrees (where pilot made them before), or in a
	// <repo>.pilot-worktrees directory beside a repository.
	if !matched && rec.Workdir != "" {
		parent := filepath.Dir(filepath.Clean(rec.Workdir))
		if parent == filepath.Join(filepath.Dir(r.Dir), ".worktrees") || strings.HasSuffix(parent, ".pilot-worktrees") {
			if _, err := os.Stat(rec.Workdir); err == nil {
				return unmerged(ctx, "", rec.Workdir, "")
			}
		}
	}
	return ""
}

// unmerged says how the worktree at path (of repository repo, on branch;
// either may be "" to be found from path) holds work that is nowhere else:
// uncommitted changes, or commits of its branch that no other branch,
// remote-tracking branch or tag holds. "" means it holds none.
func unmerged(ctx context.Context, repo, path, branch string) string {
	if _, err := os.Stat(path); err == nil {
		out, err := git(ctx, path, "status", "--porcelain", "--untracked-files=all")
		if err != nil {
			return fmt.Sprintf("its worktree %s cannot be checked: %v", path, err)
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Sprintf("its worktree %s has uncommitted changes", path)
		}
		if branch == "" {
			out, _ := git(ctx, path, "symbolic-ref", "-q", "--short", "HEAD")
			branch = strings.TrimSpace(out)
		}
		if repo == "" {
			repo = path // a worktree sees its repository's refs
		}
	}
	if branch == "" || repo == "" {
		return ""
	}
	if _, err := os.Stat(repo); err != nil {
		return "" // the repository, and its branch, are gone
	}
	ref := "refs/heads/" + branch
	if _, err := git(ctx, repo, "rev-parse", "-q", "--verify", ref+"^{commit}"); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "" // no such branch
		}
		return fmt.Sprintf("its branch %s cannot be checked: %v", branch, err)
	}
	out, err := git(ctx, repo, "rev-list", "--count", ref, "--not", "--exclude="+branch, "--branches", "--remotes", "--tags")
	if err != nil {
		return fmt.Sprintf("its branch %s cannot be checked: %v", branch, err)
	}
	if n := strings.TrimSpace(out); n != "0" {
		return fmt.Sprintf("its branch %s (worktree %s) has %s commit(s) on no other branch", branch, path, n)
	}
	return ""
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return string(out), fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return string(out), fmt.Errorf("git %s: %w", args[0], err)
	}
	return string(out), nil
}

// Duration is d as `pilot runs` prints ages and run times: "4.2s",
// "3m05s", "2h10m", "3d04h". A negative d is "0.0s".
func Duration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
