//go:build !unix

package loop

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// lockLoop takes the task loop's lock at path where there is no flock: the
// file, created exclusively with this process's pid in it, removed by
// unlock. A file whose pid no process has (os.FindProcess fails, as it
// does on Windows) is stale, left by a loop that was killed, and is
// replaced; where FindProcess cannot tell, a killed loop's file stays
// until a person removes it. Another holder is errLoopHeld.
func lockLoop(path string) (unlock func() error, err error) {
	for range 2 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
			if err := errors.Join(werr, f.Close()); err != nil {
				os.Remove(path)
				return nil, err
			}
			return func() error { return os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pid <= 0 {
			return nil, errLoopHeld // its holder may not have written it yet
		}
		if p, err := os.FindProcess(pid); err == nil {
			p.Release()
			return nil, errLoopHeld
		}
		// Stale: take it over.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, errLoopHeld
}
