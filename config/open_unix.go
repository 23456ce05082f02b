//go:build unix

package config

import "syscall"

// credentialOpenFlags open a credential file without following a symbolic
// link and without blocking on a FIFO.
const credentialOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
