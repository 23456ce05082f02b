package pilot

import (
	"os"
	"syscall"
)

// credentialOpenFlags: Windows has no O_NOFOLLOW; the file's mode is still
// checked once it is open.
const credentialOpenFlags = 0

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
