package schedule_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot/schedule"
)

// FuzzStoreFile: any bytes in a store file are refused or read, never a
// panic; a file that is read takes a job's claim and completion.
func FuzzStoreFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"jobs":{"a":{"status":"running","pid":1,"updated_at":"2026-12-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"version":1,"jobs":{}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{broken`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), schedule.StoreFileName)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := schedule.OpenStore(path, false)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		d, ran := recordingDispatch()
		if _, err := (&schedule.Scheduler{Dispatcher: d, Store: s}).Run(t.Context(), schedule.Graph{Jobs: []schedule.Job{job("fuzz-job")}}); err != nil {
			t.Fatal(err)
		}
		if len(ran()) != 1 {
			t.Errorf("the job ran %d times", len(ran()))
		}
	})
}

// FuzzWriteSet: any path is normalized into the workspace or makes the write
// set unknown, with a reason; never a panic.
func FuzzWriteSet(f *testing.F) {
	for _, p := range []string{"src/a.go", "./a/../b", "/etc/passwd", "../x", "*.go", "", ".", "a/", "a//b", "\x00"} {
		f.Add(p)
	}
	ws := f.TempDir()
	root, _ := filepath.EvalSymlinks(ws)
	f.Fuzz(func(t *testing.T, p string) {
		set, known, why := schedule.WriteSet(ws, []string{p})
		if !known {
			if why == "" || set != nil {
				t.Errorf("unknown without a reason, or with files: %q %q", set, why)
			}
			return
		}
		for _, file := range set {
			if !filepath.IsAbs(file) || !strings.HasPrefix(file, root+string(filepath.Separator)) {
				t.Errorf("WriteSet(%q) = %q: outside the workspace %s", p, file, root)
			}
		}
	})
}
