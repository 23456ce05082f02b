//go:build unix

package measure

import (
	"syscall"
	"time"
)

// selfCPU is this process's user + system time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fileLimit returns this process's soft RLIMIT_NOFILE.
func fileLimit() (uint64, error) {
	var l syscall.Rlimit
	err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur, err
}

// RaiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard
// limit (Go does so itself at start since 1.19; this makes sure) and
// returns both.
func RaiseFileLimit() (soft, hard uint64, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, 0, err
		}
	}
	return l.Cur, l.Max, nil
}
