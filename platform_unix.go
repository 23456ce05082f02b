//go:build unix

package pilot

import (
	"os"
	"strconv"
	"syscall"
)

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// devIno returns the device and inode numbers of fi.
func devIno(fi os.FileInfo) (dev, ino uint64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0
	}
	return uint64(st.Dev), uint64(st.Ino)
}

// openFileLimit is this process's limit on open files (ulimit -n), as
// text; "" when it cannot be read.
func openFileLimit() string {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return ""
	}
	return strconv.FormatUint(l.Cur, 10)
}

// fileLimits returns this process's RLIMIT_NOFILE, soft and hard.
func fileLimits() (soft, hard uint64, ok bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, false
	}
	return l.Cur, l.Max, true
}

// openFiles counts the descriptors this process has open, from /dev/fd
// (which Linux and darwin both have).
func openFiles() (int, bool) {
	es, err := os.ReadDir("/dev/fd")
	if err != nil {
		return 0, false
	}
	return len(es) - 1, true // the directory ReadDir opened is gone again
}
