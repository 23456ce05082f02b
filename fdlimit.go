package pilot

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/pilotworkers/pilot/internal/supervise"
)

// fdsPerJob is about how many file descriptors pilot holds for one running
// worker: its stdout and stderr pipes, stream.log, the events log, and a
// file or two opened for a moment (a record being written, a session
// file being read), with its share of the supervisor's (a pidfd, and the
// worker's three stdio descriptors while it starts).
const fdsPerJob = 8

// A fileLimitError is a Fanout that would run out of file descriptors at
// its parallelism: Fanout.Run returns it before starting any job. It
// unwraps to syscall.EMFILE, and its text names the limit and the fix.
type fileLimitError struct {
	Parallel int    // the jobs that would run at once
	Need     int    // about how many descriptors they need
	Open     int    // how many this process has open already
	Limit    uint64 // RLIMIT_NOFILE's soft limit (ulimit -n)
	Hard     uint64 // its hard limit, the most ulimit -n can raise it to
}

func (e *fileLimitError) Error() string {
	fit := max(int(e.Limit)-e.Open, 0) / fdsPerJob
	fix := fmt.Sprintf("run at most %d jobs at once", max(fit, 1))
	if need := uint64(e.Open + e.Need); need <= e.Hard {
		fix = fmt.Sprintf("raise it (ulimit -n %d, or the hard limit %d), or %s", need, e.Hard, fix)
	} else {
		fix = fmt.Sprintf("raise the hard limit (%d; the service's LimitNOFILE or limits.conf), or %s", e.Hard, fix)
	}
	return fmt.Sprintf("pilot: %d jobs at once need about %d file descriptors (%d each) and this process has %d open, "+
		"over its limit RLIMIT_NOFILE of %d (ulimit -n): %s", e.Parallel, e.Need, fdsPerJob, e.Open, e.Limit, fix)
}

func (e *fileLimitError) Unwrap() error { return syscall.EMFILE }

// checkFileLimit returns a *fileLimitError when parallel running workers
// would not fit in this process's open-file limit. It says nothing where
// the limit or the open descriptors cannot be read.
func checkFileLimit(parallel int) error {
	soft, hard, ok := fileLimits()
	if !ok || soft >= 1<<62 { // RLIM_INFINITY, as each system spells it
		return nil
	}
	open, ok := openFiles()
	if !ok {
		return nil
	}
	need := parallel * fdsPerJob
	if uint64(open+need) <= soft {
		return nil
	}
	return &fileLimitError{Parallel: parallel, Need: need, Open: open, Limit: soft, Hard: hard}
}

// fdLimit adds to err, when this process or the system ran out of file
// descriptors, the limit and what to do: each running worker holds
// several (its pipes, its run's logs), so many workers at once need a
// higher limit.
func fdLimit(err error) error {
	switch {
	case errors.Is(err, syscall.ENFILE):
		return fmt.Errorf("%w (the system's table of open files is full, not this process's limit: close programs, or raise fs.file-max)", err)
	case !errors.Is(err, syscall.EMFILE) || errors.As(err, new(*fileLimitError)):
		return err
	}
	limit := openFileLimit()
	if _, hard, ok := fileLimits(); ok && errors.As(err, new(*supervise.StartError)) {
		// A Go program's soft limit starts at its hard one.
		return fmt.Errorf("%w (pilot's supervisor process is out of file descriptors: its limit is the hard RLIMIT_NOFILE, %d; each running worker holds one or two there: raise the hard limit, or run fewer workers at once)", err, hard)
	}
	if limit == "" {
		return fmt.Errorf("%w (this process is out of file descriptors: raise its limit, or run fewer workers at once)", err)
	}
	return fmt.Errorf("%w (this process is out of file descriptors: its limit is %s (RLIMIT_NOFILE, ulimit -n); each running worker holds about %d: raise the limit, or run fewer workers at once)", err, limit, fdsPerJob)
}
