package rundir

import (
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/procfs"
)

func lookProc(pid int) proc {
	stat := "/proc/" + strconv.Itoa(pid) + "/stat"
	if _, err := os.Stat(stat); err != nil {
		return proc{proof: "no " + stat}
	}
	if _, ok := procfs.StartTime(pid); !ok {
		// Gone meanwhile, or a zombie: it has exited either way.
		return proc{proof: stat + " shows an exited process (or none)"}
	}
	p := proc{exists: true, proof: stat}
	p.start, _ = procfs.StartedAt(pid)
	return p
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, ok := procfs.Pgrp(pid); ok && g == pgid && procfs.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func runHasProcesses(runID string) bool {
	return len(procfs.WithEnv(envRunID+"="+runID)) > 0
}

// killWait bounds how long killRun waits for the processes it killed to
// die (a process in uninterruptible sleep dies only when it wakes).
const killWait = 5 * time.Second

// killRun sends SIGKILL to the processes of run runID, until none is left
// or killWait has passed: those whose environment holds PILOT_RUN_ID=runID,
// and the process group pgid once one of them is seen in it (then the
// group is the run's worker's, and its members that cleared their
// environment are the run's too). It never signals this process or its
// group.
func killRun(runID string, pgid int) (killed, survivors []int, note string) {
	entry := envRunID + "=" + runID
	self := os.Getpid()
	selfGroup, _ := procfs.Pgrp(self)
	seen := map[int]bool{}
	groupProven := false
	deadline := time.Now().Add(killWait)
	for {
		var pids []int
		for _, p := range procfs.WithEnv(entry) {
			if p == self {
				continue
			}
			pids = append(pids, p)
			if g, ok := procfs.Pgrp(p); ok && pgid > 0 && g == pgid {
				groupProven = true
			}
		}
		if groupProven && pgid != selfGroup {
			for _, p := range groupMembers(pgid) {
				if p != self && !slices.Contains(pids, p) {
					pids = append(pids, p)
				}
			}
		}
		if len(pids) == 0 {
			return killed, nil, ""
		}
		if time.Now().After(deadline) {
			return killed, pids, ""
		}
		if groupProven && pgid != selfGroup {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		for _, p := range pids {
			if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
				continue // gone already (ESRCH), or not ours to kill (EPERM)
			}
			if !seen[p] {
				seen[p] = true
				killed = append(killed, p)
			}
		}
		// The killed die asynchronously: look again shortly.
		time.Sleep(2 * time.Millisecond)
	}
}
