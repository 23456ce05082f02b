package rundir

import (
	"errors"
	"strconv"
	"syscall"
	"time"
)

const (
	processQueryLimitedInformation = 0x1000
	stillActive                    = 259
	errorInvalidParameter          = syscall.Errno(87)
)

func lookProc(pid int) proc {
	call := "OpenProcess(" + strconv.Itoa(pid) + ")"
	h, err := syscall.OpenProcess(processQueryLimitedInformation, false, uint32(pid))
	switch {
	case errors.Is(err, errorInvalidParameter):
		return proc{proof: call + ": no such process"}
	case err != nil:
		return proc{exists: true, proof: call + ": " + err.Error()}
	}
	defer syscall.CloseHandle(h)
	var code uint32
	if err := syscall.GetExitCodeProcess(h, &code); err == nil && code != stillActive {
		return proc{proof: call + ": exited with status " + strconv.FormatUint(uint64(code), 10)}
	}
	p := proc{exists: true, proof: "GetProcessTimes"}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err == nil {
		p.start = time.Unix(0, created.Nanoseconds())
	}
	return p
}

// runHasProcesses cannot tell: Windows gives no other process's
// environment.
func runHasProcesses(string) bool { return false }

// killRun kills nothing: no process can be proven the run's here.
func killRun(string, int) (killed, survivors []int, note string) {
	return nil, nil, "the run's processes were not looked for: this system gives no other process's environment to prove which are the run's"
}
