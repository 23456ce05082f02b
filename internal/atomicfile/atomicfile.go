// Package atomicfile writes files so that readers see the old content or
// the new, never a part.
package atomicfile

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteFile writes data to a temporary file beside path and renames it over
// path. On error path is unchanged and no temporary file is left.
//
// The file is not synced: a crash of the writing process cannot leave a
// half-written file, but a crash of the machine may lose the latest write.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	p, err := Prepare(path)
	if err != nil {
		return err
	}
	return p.Commit(data, perm)
}

// Pending is a write prepared ahead of time: its temporary file exists, so
// Commit costs a write and a rename but no file creation.
type Pending struct {
	f    *os.File
	path string
}

// Prepare creates the temporary file for a later write of path.
func Prepare(path string) (*Pending, error) {
	// os.CreateTemp's naming (".NAME.tmp-" and digits, which
	// internal/rundir recognizes), opened through OpenFile.
	prefix := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	for try := 0; ; try++ {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		f, err := OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &Pending{f: f, path: path}, nil
	}
}

// Commit writes data with permissions perm and renames it over the path.
// On error the path is unchanged and the temporary file is removed. A
// Pending is used once.
func (p *Pending) Commit(data []byte, perm os.FileMode) (err error) {
	defer func() {
		if err != nil {
			p.Abort()
		}
	}()
	if _, err = p.f.Write(data); err != nil {
		return err
	}
	if perm != 0o600 { // CreateTemp makes 0600 files
		if err = p.f.Chmod(perm); err != nil {
			return err
		}
	}
	if err = p.f.Close(); err != nil {
		return err
	}
	return os.Rename(p.f.Name(), p.path)
}

// Abort removes the temporary file. It is safe after Commit, and twice.
func (p *Pending) Abort() {
	p.f.Close()
	os.Remove(p.f.Name())
}

// WriteFileSync is WriteFile made durable: the data is synced before the
// rename and the directory after it, so that once it returns the new
// content survives a crash of the machine.
func WriteFileSync(path string, data []byte, perm os.FileMode) (err error) {
	p, err := Prepare(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.Abort()
		}
	}()
	if _, err = p.f.Write(data); err != nil {
		return err
	}
	if perm != 0o600 {
		if err = p.f.Chmod(perm); err != nil {
			return err
		}
	}
	if err = p.f.Sync(); err != nil {
		return err
	}
	if err = p.f.Close(); err != nil {
		return err
	}
	if err = os.Rename(p.f.Name(), p.path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// RemoveOrphans removes the temporary files that writes of path cut short
// left (a process killed while it wrote). Call it only while holding the
// lock every writer of path takes: then no temporary file there is a
// write in progress.
func RemoveOrphans(path string) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + filepath.Base(path) + ".tmp-"
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
