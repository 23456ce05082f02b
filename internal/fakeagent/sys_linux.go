package fakeagent

import (
	"syscall"
	"unsafe"
)

// junkFDs is the junkfds step: it writes 4 KiB of junk to every descriptor
// from 3 to 1023 and reads what each has to give, never waiting (a ppoll
// with a zero timeout first), and returns the line to print: "junkfds inherited
// LIST wrote LIST read LIST", each list the descriptors (comma separated,
// "-" for none) the process had inherited, a write went to and a read came
// from. The process's own descriptors take junk too: a hostile worker
// would not spare them.
func junkFDs() string {
	inherited, _ := InheritedFDs()
	junk := make([]byte, 4<<10)
	for i := range junk {
		junk[i] = byte(i*7 + 1)
	}
	var wrote, read []int
	buf := make([]byte, 4<<10)
	for fd := 3; fd < 1024; fd++ {
		if ready(fd, pollOut) {
			if n, err := syscall.Write(fd, junk); err == nil && n > 0 {
				wrote = append(wrote, fd)
			}
		}
		if ready(fd, pollIn) {
			if n, err := syscall.Read(fd, buf); err == nil && n > 0 {
				read = append(read, fd)
			}
		}
	}
	return "junkfds inherited " + fdList(inherited) + " wrote " + fdList(wrote) + " read " + fdList(read)
}

const (
	pollIn   = 0x1
	pollOut  = 0x4
	pollNval = 0x20
)

// ready reports whether fd is open and poll says it can be read or
// written (events) without waiting.
func ready(fd int, events int16) bool {
	p := struct {
		fd              int32
		events, revents int16
	}{int32(fd), events, 0}
	var zero syscall.Timespec
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		return errno == 0 && n == 1 && p.revents&pollNval == 0 && p.revents&events != 0
	}
}
