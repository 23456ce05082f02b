package cli

import (
	"errors"
	"runtime"
	"syscall"
	"unsafe"
)

// denyLandlock makes this process a pilot on a kernel built without
// Landlock: a seccomp filter on every thread fails landlock_create_ruleset,
// the ABI probe, with ENOSYS. The processes it starts inherit the filter.
func denyLandlock() error {
	seccomp, ok := map[string]uintptr{"amd64": 317, "arm64": 277, "riscv64": 277, "loong64": 277}[runtime.GOARCH]
	if !ok {
		return errors.ErrUnsupported
	}
	type sockFilter struct {
		code   uint16
		jt, jf uint8
		k      uint32
	}
	const (
		ldAbsW   = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jeqK     = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		retK     = 0x06 // BPF_RET|BPF_K
		retErrno = 0x00050000
		retAllow = 0x7fff0000
	)
	filter := []sockFilter{
		{ldAbsW, 0, 0, 0}, // seccomp_data.nr
		{jeqK, 0, 1, 444}, // landlock_create_ruleset
		{retK, 0, 0, retErrno | uint32(syscall.ENOSYS)},
		{retK, 0, 0, retAllow},
	}
	prog := struct {
		len    uint16
		filter *sockFilter
	}{uint16(len(filter)), &filter[0]}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 38 /* PR_SET_NO_NEW_PRIVS */, 1, 0); errno != 0 {
		return errno
	}
	// SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC: every thread.
	if r, _, errno := syscall.RawSyscall(seccomp, 1, 1, uintptr(unsafe.Pointer(&prog))); errno != 0 || r != 0 {
		return errors.New("seccomp: cannot filter every thread")
	}
	return nil
}
