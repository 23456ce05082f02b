package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
)

// CompleteLog marks an archived task complete, in its archive directory.
const CompleteLog = "complete.log"

// archiveRoot is where completed tasks go: agent-task/archive/YYYY/MM/...
func archiveRoot(workspace string) string {
	return filepath.Join(workspace, "agent-task", "archive")
}

// archiveDirs lists every directory under the archive root, relative to
// agent-task/, sorted.
func archiveDirs(workspace string) ([]string, error) {
	root := archiveRoot(workspace)
	base := filepath.Dir(root)
	out := []string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == root {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			rel, _ := filepath.Rel(base, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// archiveNameOf matches an archive directory's name to a task's directory
// name: the same, or with a "_N" suffix added to keep it apart from an
// earlier archive of that name.
func archiveNameOf(archive, task string) bool {
	rest, ok := strings.CutPrefix(archive, task)
	return ok && (rest == "" || reArchiveSuffix.MatchString(rest))
}

var reArchiveSuffix = regexp.MustCompile(`^_\d+$`)

// newArchive finds task name's archive that is not in baseline and holds a
// complete.log: the newest, when there are several.
func newArchive(workspace, name string, baseline []string) (string, bool, error) {
	dirs, err := archiveDirs(workspace)
	if err != nil {
		return "", false, err
	}
	base := filepath.Base(filepath.FromSlash(name))
	best, bestTime := "", time.Time{}
	for _, d := range dirs {
		if slices.Contains(baseline, d) || !archiveNameOf(filepath.Base(filepath.FromSlash(d)), base) {
			continue
		}
		abs := filepath.Join(workspace, "agent-task", filepath.FromSlash(d))
		st, err := os.Stat(filepath.Join(abs, CompleteLog))
		if err != nil {
			continue
		}
		if best == "" || st.ModTime().After(bestTime) {
			best, bestTime = abs, st.ModTime()
		}
	}
	return best, best != "", nil
}

// archive marks task t complete (a complete.log saying why) and moves its
// directory to agent-task/archive/YYYY/MM/<task name>, with a "_N" suffix
// when that exists already. It returns the archive directory.
func archive(workspace string, t taskfile.Task, now time.Time, note string) (string, error) {
	if err := writeFileAtomic(filepath.Join(t.Dir, CompleteLog), []byte(note)); err != nil {
		return "", fmt.Errorf("taskloop: writing %s of %s: %w", CompleteLog, t.Name, err)
	}
	dest := filepath.Join(archiveRoot(workspace), now.Format("2006"), now.Format("01"), filepath.FromSlash(t.Name))
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", err
	}
	target := dest
	for n := 1; ; n++ {
		if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			break
		}
		target = fmt.Sprintf("%s_%d", dest, n)
	}
	if err := os.Rename(t.Dir, target); err != nil {
		return "", fmt.Errorf("taskloop: archiving %s: %w", t.Name, err)
	}
	return target, nil
}

// CleanupTaskRecords removes the run directories under runDir of the
// attempts of task (their record's retry key is the task's name) and
// returns how many it removed; other runs are left alone. A completed
// task's story stays in its archived work log.
func CleanupTaskRecords(runDir, task string) (int, error) {
	entries, err := os.ReadDir(runDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(runDir, e.Name())
		rec, err := pilot.ReadRecord(filepath.Join(dir, "record.json"))
		if err != nil || rec.RetryKey != task || rec.Status == "running" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
