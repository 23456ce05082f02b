package supervise

import "syscall"

// selfExe is the running executable: /proc/self/exe is the loaded file even
// when its path now holds another.
func selfExe() (string, error) { return "/proc/self/exe", nil }

// socketpair returns a connected pair of close-on-exec Unix stream sockets.
func socketpair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}
