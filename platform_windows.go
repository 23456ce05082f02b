package pilot

import (
	"os"
	"syscall"
)

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM",
	syscall.SIGTERM: "SIGTERM",
}

// devIno returns zeros: os.FileInfo carries no inode numbers here, and size
// and modification time alone tell a changed file.
func devIno(os.FileInfo) (dev, ino uint64) { return 0, 0 }

// openFileLimit is "": Windows has no ulimit -n to name.
func openFileLimit() string { return "" }

// fileLimits is not ok: Windows has no RLIMIT_NOFILE.
func fileLimits() (soft, hard uint64, ok bool) { return 0, 0, false }

// openFiles is not ok: Windows has no /dev/fd.
func openFiles() (int, bool) { return 0, false }
