package procfs

import (
	"slices"
	"syscall"
)

// readFile reads the /proc file path whole, appending to buf, with plain
// system calls: an open, the reads and a close. os.ReadFile costs about
// three times the calls on such a file (an fstat, then the runtime
// poller's fcntl and epoll_ctl tries, which a /proc file refuses), and a
// supervisor sampling a thousand workers' trees reads several files per
// tree.
func readFile(path string, buf []byte) ([]byte, error) {
	fd, err := open(path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, len(buf))) // a read a syscall: few and big
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readDirNames lists the names in the /proc directory path, without "."
// and "..", with plain system calls (see readFile).
func readDirNames(path string) ([]string, error) {
	fd, err := open(path, syscall.O_RDONLY|syscall.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var (
		buf   [8 << 10]byte
		names []string
	)
	for {
		n, err := syscall.ReadDirent(fd, buf[:])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case n <= 0:
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// open opens path close-on-exec, again when a signal interrupts it.
func open(path string, mode int) (int, error) {
	for {
		fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
