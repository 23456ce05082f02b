package atomicfile_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot/internal/atomicfile"
)

// entry is what snapshot records of one file or directory.
type entry struct {
	Mode fs.FileMode
	Data string
}

// snapshot returns every file and directory below root, by path relative
// to root, with its mode and (for files) content.
func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == root {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{Mode: info.Mode()}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			e.Data = string(data)
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name string
		old  *entry // nil: no file before
		data string
		perm fs.FileMode
	}{
		{name: "create", data: "hello\n", perm: 0o644},
		{name: "create empty", data: "", perm: 0o600},
		{name: "create read-only", data: "ro", perm: 0o400},
		{name: "create executable", data: "#!/bin/sh\n", perm: 0o755},
		{name: "replace", old: &entry{Mode: 0o644, Data: "old content that is longer"}, data: "new", perm: 0o644},
		{name: "replace changes perm", old: &entry{Mode: 0o644, Data: "old"}, data: "new", perm: 0o600},
		{name: "replace read-only file", old: &entry{Mode: 0o400, Data: "old"}, data: "new", perm: 0o640},
		{name: "replace with empty", old: &entry{Mode: 0o600, Data: "old"}, data: "", perm: 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if tt.old != nil {
				if err := os.WriteFile(path, []byte(tt.old.Data), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.old.Mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := atomicfile.WriteFile(path, []byte(tt.data), tt.perm); err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			// The perm is the file's mode exactly (the umask does not
			// apply), and nothing else is left in the directory.
			want := map[string]entry{
				"state.json": {Mode: tt.perm, Data: tt.data},
			}
			if diff := cmp.Diff(want, snapshot(t, dir)); diff != "" {
				t.Errorf("directory mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteFileErrors(t *testing.T) {
	tests := []struct {
		name string
		// setup fills dir and returns the path to write.
		setup  func(t *testing.T, dir string) string
		wantIs error // nil: any error
	}{
		{
			name: "directory does not exist",
			setup: func(t *testing.T, dir string) string {
				return filepath.Join(dir, "missing", "state.json")
			},
			wantIs: fs.ErrNotExist,
		},
		{
			name: "path is an existing directory",
			setup: func(t *testing.T, dir string) string {
				sub := filepath.Join(dir, "state.json")
				if err := os.Mkdir(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(sub, "inside"), []byte("keep me"), 0o644); err != nil {
					t.Fatal(err)
				}
				return sub
			},
		},
		{
			name: "path is an existing empty directory",
			setup: func(t *testing.T, dir string) string {
				sub := filepath.Join(dir, "state.json")
				if err := os.Mkdir(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				return sub
			},
		},
		{
			name: "parent is a file",
			setup: func(t *testing.T, dir string) string {
				if err := os.WriteFile(filepath.Join(dir, "file"), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "file", "state.json")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// A neighbour that must survive untouched.
			if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte("old neighbour"), 0o640); err != nil {
				t.Fatal(err)
			}
			path := tt.setup(t, dir)
			before := snapshot(t, dir)

			err := atomicfile.WriteFile(path, []byte("new content"), 0o644)
			if err == nil {
				t.Fatalf("WriteFile(%s) = nil; want an error", path)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("WriteFile(%s) = %v; want an error matching %v", path, err, tt.wantIs)
			}
			if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
				t.Errorf("a failed WriteFile changed the directory (-before +after):\n%s", diff)
			}
		})
	}
}

// TestWriteFileReaders checks that a reader racing with writers sees one
// whole version or another, never a mix or an empty file.
func TestWriteFileReaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	versions := [][]byte{
		bytes.Repeat([]byte("a"), 64<<10),
		bytes.Repeat([]byte("b"), 100<<10),
		bytes.Repeat([]byte("c"), 1),
	}
	if err := atomicfile.WriteFile(path, versions[0], 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := atomicfile.WriteFile(path, versions[i%len(versions)], 0o644); err != nil {
				t.Errorf("WriteFile: %v", err)
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)
	for range 500 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		whole := false
		for _, v := range versions {
			whole = whole || bytes.Equal(data, v)
		}
		if !whole {
			t.Fatalf("reader saw %d bytes that are no whole version", len(data))
		}
	}
}

func TestWriteFileSync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, tt := range []struct {
		data string
		perm fs.FileMode
	}{{"first", 0o600}, {"second, longer", 0o644}, {"", 0o600}} {
		if err := atomicfile.WriteFileSync(path, []byte(tt.data), tt.perm); err != nil {
			t.Fatal(err)
		}
		want := map[string]entry{"state.json": {Mode: tt.perm, Data: tt.data}}
		if diff := cmp.Diff(want, snapshot(t, dir)); diff != "" {
			t.Errorf("after writing %q (-want +got):\n%s", tt.data, diff)
		}
	}
	// A directory that does not exist: an error, and nothing left.
	if err := atomicfile.WriteFileSync(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing directory: %v", err)
	}
}
