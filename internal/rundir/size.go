package rundir

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// Size is the sum of the sizes of the regular files beneath dir (as ls -l
// counts them, not disk blocks), symbolic links not followed. A file that
// goes while it walks is left out; err is the first other entry it could
// not read (n counts the rest), or dir's own error.
func Size(dir string) (n int64, err error) {
	walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, e error) error {
		if e == nil && d.Type().IsRegular() {
			var info fs.FileInfo
			if info, e = d.Info(); e == nil {
				n += info.Size()
			}
		}
		switch {
		case e == nil, errors.Is(e, fs.ErrNotExist) && path != dir:
		case path == dir:
			return e
		case err == nil:
			err = e
		}
		return nil
	})
	if walkErr != nil {
		return 0, walkErr
	}
	return n, err
}
