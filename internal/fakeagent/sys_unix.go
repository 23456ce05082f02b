//go:build unix

package fakeagent

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func closeOnExec(fd int) { syscall.CloseOnExec(fd) }

func setsid(attr *syscall.SysProcAttr) error {
	attr.Setsid = true
	return nil
}

// InheritedFDs lists, in order, this process's open descriptors that are
// not close-on-exec. At a program's start those are exactly the ones it
// inherited: the kernel closed the others at exec, and what the Go runtime
// opens itself (the cgroup files it reads for GOMAXPROCS, the poller) is
// close-on-exec. It reads /proc/self/fd (/dev/fd elsewhere) through bare
// system calls, which open nothing but the directory.
func InheritedFDs() ([]int, error) {
	dir := "/dev/fd"
	if runtime.GOOS == "linux" {
		dir = "/proc/self/fd"
	}
	d, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(d)
	var names []string
	buf := make([]byte, 8<<10)
	for {
		n, err := syscall.ReadDirent(d, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
	var fds []int
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || fd == d {
			continue
		}
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno == 0 && flags&syscall.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	return fds, nil
}

// fdsLine is the fds step's line: "fds 0 1 2", each descriptor from 3 up
// followed by what it is ("fds 0 1 2 10=pipe:[123]").
func fdsLine(fds []int) string {
	var b strings.Builder
	b.WriteString("fds")
	for _, fd := range fds {
		fmt.Fprintf(&b, " %d", fd)
		if fd >= 3 {
			buf := make([]byte, 256)
			if n, err := syscall.Readlink("/proc/self/fd/"+strconv.Itoa(fd), buf); err == nil {
				b.WriteString("=" + string(buf[:n]))
			}
		}
	}
	return b.String()
}

func fdList(fds []int) string {
	if len(fds) == 0 {
		return "-"
	}
	s := make([]string, len(fds))
	for i, fd := range fds {
		s[i] = strconv.Itoa(fd)
	}
	return strings.Join(s, ",")
}

// killParent is the killparent step: SIGKILL to the parent process (a
// worker's is pilot's supervisor), then to the parent's process group. It
// returns the line to print: "killparent ppid P pgid G parent ERR group
// ERR", ERR being "ok" or the errno's name (EPERM, ESRCH).
func killParent() string {
	ppid := syscall.Getppid()
	pgid, err := syscall.Getpgid(ppid)
	if err != nil {
		pgid = ppid
	}
	parent := syscall.Kill(ppid, syscall.SIGKILL)
	group := syscall.Kill(-pgid, syscall.SIGKILL)
	return fmt.Sprintf("killparent ppid %d pgid %d parent %s group %s", ppid, pgid, errName(parent), errName(group))
}

func errName(err error) string {
	switch err {
	case nil:
		return "ok"
	case syscall.EPERM:
		return "EPERM"
	case syscall.ESRCH:
		return "ESRCH"
	}
	return err.Error()
}

// passFDs sends descriptors 1 and 2 over a connection to the Unix socket
// path, and waits for the listener to close it (it has them by then).
func passFDs(path string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return err
	}
	if err := syscall.Sendmsg(fd, []byte("fds"), syscall.UnixRights(1, 2), nil, 0); err != nil {
		return err
	}
	var b [1]byte
	_, err = syscall.Read(fd, b[:]) // 0 once the listener closes
	return err
}
