package landlock

import "syscall"

// stampOf stamps the directory at path, following links.
func stampOf(path string) (dirStamp, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return dirStamp{}, err
	}
	return dirStamp{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim.Nano()}, nil
}
