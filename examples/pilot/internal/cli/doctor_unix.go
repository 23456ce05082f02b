//go:build unix

package cli

import "syscall"

// freeSpace is the space an unprivileged user may still write on the file
// system holding dir (or its nearest existing parent).
func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(existingParent(dir), &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
