//go:build unix

package fakeagent

import "syscall"

func closeOnExec(fd int) { syscall.CloseOnExec(fd) }

func setsid(attr *syscall.SysProcAttr) error {
	attr.Setsid = true
	return nil
}
