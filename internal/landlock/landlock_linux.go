package landlock

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"
)

// The Landlock system calls have the same numbers on every architecture.
const (
	sysCreateRuleset = 444
	sysAddRule       = 445
	sysRestrictSelf  = 446

	createRulesetVersion = 1
	rulePathBeneath      = 1
	ruleNetPort          = 2

	prSetNoNewPrivs = 38
	oPath           = 0x200000 // O_PATH, which package syscall does not name
)

type rulesetAttr struct {
	fs, net, scoped uint64
}

type pathBeneathAttr struct {
	access   uint64
	parentFd int32
	_        [4]byte // the kernel's struct is packed: it reads 12 bytes
}

type netPortAttr struct {
	access, port uint64
}

var abi = sync.OnceValues(func() (int, error) {
	v, _, errno := syscall.Syscall(sysCreateRuleset, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
})

// ABI returns the Landlock ABI version this kernel offers, and why it offers
// none (ENOSYS: not built in; EOPNOTSUPP: not enabled at boot).
func ABI() (int, error) { return abi() }

// Restrict applies r to the calling thread, for good: that thread, and every
// process it forks from then on, is confined to r. The caller must have
// locked its goroutine to the thread (runtime.LockOSThread) and must never
// unlock it: the thread then ends with its goroutine. Restrict also sets
// no_new_privs on the thread, which Landlock requires of an unprivileged
// thread. A path that does not exist is skipped: nothing beneath it can be
// reached.
func Restrict(r *Ruleset) error {
	attr := rulesetAttr{fs: r.FS, net: r.Net, scoped: r.Scope}
	fd, _, errno := syscall.Syscall(sysCreateRuleset, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("landlock: creating the ruleset: %w", errno)
	}
	defer syscall.Close(int(fd))
	for _, p := range r.Paths {
		if err := addPath(int(fd), p, r.FS); err != nil {
			return err
		}
	}
	for _, port := range r.Ports {
		a := netPortAttr{access: NetConnectTCP & r.Net, port: uint64(port)}
		if a.access == 0 {
			continue
		}
		if _, _, errno := syscall.Syscall6(sysAddRule, fd, ruleNetPort, uintptr(unsafe.Pointer(&a)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock: allowing TCP port %d: %w", port, errno)
		}
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: setting no_new_privs: %w", errno)
	}
	if _, _, errno := syscall.Syscall(sysRestrictSelf, fd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock: restricting the thread: %w", errno)
	}
	return nil
}

func addPath(ruleset int, p PathRule, handled uint64) error {
	// O_NOFOLLOW: a planned path is never a link (Plan resolves them); one
	// swapped in since gets a rule on the link itself, which grants
	// nothing beyond it.
	fd, err := syscall.Open(string(p.Path), oPath|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: opening %s: %w", p.Path, err)
	}
	defer syscall.Close(fd)
	access := p.Access & handled
	if p.File {
		access &= FSFile
	}
	a := pathBeneathAttr{access: access, parentFd: int32(fd)}
	_, _, errno := syscall.Syscall6(sysAddRule, uintptr(ruleset), rulePathBeneath, uintptr(unsafe.Pointer(&a)), 0, 0, 0)
	if errno == syscall.EINVAL && access&^FSFile != 0 {
		// The directory planned became a file: a file's rights only.
		a.access &= FSFile
		_, _, errno = syscall.Syscall6(sysAddRule, uintptr(ruleset), rulePathBeneath, uintptr(unsafe.Pointer(&a)), 0, 0, 0)
	}
	if errno != 0 && a.access != 0 {
		return fmt.Errorf("landlock: granting %s: %w", p.Path, errno)
	}
	return nil
}
