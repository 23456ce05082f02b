// Package atomicfile writes files so that readers see the old content or
// the new, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path and renames it over
// path. On error path is unchanged and no temporary file is left.
//
// The file is not synced: a crash of the writing process cannot leave a
// half-written file, but a crash of the machine may lose the latest write.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
