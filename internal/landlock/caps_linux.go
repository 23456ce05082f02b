package landlock

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Capabilities that let a process read /proc/PID/environ of a process
// outside its Landlock domain (Linux 6.18, measured: a confined root worker
// with either one reads its sibling's and pilot's environments; with
// neither it gets EACCES, as any confined non-root worker does).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

const (
	capVersion3    = 0x20080522
	prCapbsetRead  = 23
	prCapbsetDrop  = 24
	prCapAmbient   = 47
	prCapAmbLower  = 3
	capWordsV3     = 2
	capBitsPerWord = 32
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct {
	effective, permitted, inheritable uint32
}

// DropEnvironCaps removes CAP_SYS_ADMIN and CAP_PERFMON from the calling
// thread (effective, permitted, inheritable, ambient and bounding sets), so
// that no process it starts regains them, not even through a setuid root
// program or an exec as root. A thread that holds neither (any non-root
// user) is left as it is. Like Restrict, it is for a locked thread that is
// never unlocked. It returns whether anything was dropped.
func DropEnvironCaps() (bool, error) {
	hdr := capHeader{version: capVersion3}
	var data [capWordsV3]capData
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return false, fmt.Errorf("landlock: reading the thread's capabilities: %w", errno)
	}
	dropped := false
	for _, c := range []uint{capSysAdmin, capPerfmon} {
		w, bit := c/capBitsPerWord, uint32(1)<<(c%capBitsPerWord)
		if data[w].effective&bit != 0 || data[w].permitted&bit != 0 || data[w].inheritable&bit != 0 {
			data[w].effective &^= bit
			data[w].permitted &^= bit
			data[w].inheritable &^= bit
			dropped = true
		}
		// Ambient first (it must stay a subset of permitted and
		// inheritable), then the bounding set, which needs CAP_SETPCAP:
		// a thread without it cannot have the capability in its
		// permitted set either, and so never regains it but through a
		// setuid program, which no_new_privs (set by Restrict) disarms.
		syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbLower, uintptr(c), 0, 0, 0)
		if in, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetRead, uintptr(c), 0); errno == 0 && in == 1 {
			switch _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0); errno {
			case 0:
				dropped = true
			case syscall.EPERM: // no CAP_SETPCAP: see above
			default:
				return dropped, fmt.Errorf("landlock: dropping capability %d from the bounding set: %w", c, errno)
			}
		}
	}
	if !dropped {
		return false, nil
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return dropped, fmt.Errorf("landlock: dropping the thread's capabilities: %w", errno)
	}
	return true, nil
}
