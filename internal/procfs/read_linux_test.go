package procfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestReadFileReadsItWhole(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("0123456789abcdef"), 10<<10) // past any first buffer
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, buf := range [][]byte{nil, make([]byte, 0, 8), []byte("kept:")} {
		prefix := slices.Clone(buf)
		got, err := readFile(path, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(prefix, want...)) {
			t.Errorf("readFile with a buffer of cap %d: %d bytes, not the file's %d after %q", cap(buf), len(got), len(want), prefix)
		}
	}
	if _, err := readFile(filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readFile of a missing file: %v, want not-exist", err)
	}
	// A /proc file, whose size stat does not tell.
	got, err := readFile("/proc/self/stat", nil)
	if err != nil || !bytes.HasPrefix(got, []byte(strconv.Itoa(os.Getpid())+" (")) {
		t.Errorf("readFile(/proc/self/stat) = %q, %v", got, err)
	}
}

func TestReadDirNamesListsEntries(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 { // more than one getdents buffer
		name := "entry-with-a-long-name-" + strconv.Itoa(i) + "-" + string(bytes.Repeat([]byte("x"), 40))
		want = append(want, name)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	want = append(want, "sub")
	got, err := readDirNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("readDirNames: %d names, want %d (no . nor ..)", len(got), len(want))
	}
	if _, err := readDirNames(filepath.Join(dir, want[0])); err == nil {
		t.Error("readDirNames of a file: no error")
	}
}

// BenchmarkSample is what a memory sample of a one-process tree reads:
// the process's children, over its threads, and its resident memory.
func BenchmarkSample(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		Children(pid)
		if _, _, ok := RSS(pid); !ok {
			b.Fatal("no RSS")
		}
	}
}
