// Package rundir closes out the runs whose pilot died: their records, leftover processes and temporary files.
package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/filelock"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// Record statuses.
const (
	// Running is a record's status while its dispatch goes on.
	Running = "running"
	// Abandoned is the status Reconcile gives a record whose dispatch
	// ended without closing it out: its pilot died.
	Abandoned = "abandoned"
)

// EvidenceSource is the failure_evidence_source of an abandoned record; its
// failure_evidence_excerpt says how the pilot was found gone.
const EvidenceSource = "pilot:reconcile"

// lockName is the lock file Reconcile holds, in the run directory, while it
// closes out runs. It is never removed: removing it would let two
// reconcilers lock two different files.
const lockName = ".reconcile.lock"

// Report is what Reconcile did.
type Report struct {
	// Runs are the runs it marked abandoned, in run id order.
	Runs []Run `json:"runs"`
}

// Run is what Reconcile did to one run.
type Run struct {
	RunID  string `json:"run_id"`
	Record string `json:"record"`
	// Evidence says how the run's pilot was found gone, and by which
	// proof; it is also in the record (failure_evidence_excerpt).
	Evidence string `json:"evidence"`
	// Killed lists the processes of the run it sent SIGKILL; Survivors
	// those still alive after it waited for them.
	Killed    []int `json:"killed,omitempty"`
	Survivors []int `json:"survivors,omitempty"`
	// Removed lists the temporary files of pilot's it removed from the
	// run's directory.
	Removed []string `json:"removed,omitempty"`
	// Note says what this system could not check (no /proc: the run's
	// processes are not looked for).
	Note string `json:"note,omitempty"`
}

// Record is what Reconcile reads of a run's record.json: fields of
// pilot.Record's JSON (this package is below pilot, which calls it).
type Record struct {
	RunID         string    `json:"run_id"`
	Status        string    `json:"status"`
	Pid           int       `json:"pid,omitempty"`
	Pgid          int       `json:"pgid,omitempty"`
	StartedAt     time.Time `json:"started_at"`
	DispatcherPid int       `json:"dispatcher_pid"`
	// The dispatcher's identity (pilot.Provenance): its start in clock
	// ticks after boot, the boot, pid namespace and host it ran in. A
	// record from before pilot wrote them has none.
	DispatcherStart uint64 `json:"dispatcher_start_ticks,omitempty"`
	BootID          string `json:"dispatcher_boot_id,omitempty"`
	PidNamespace    string `json:"dispatcher_pid_namespace,omitempty"`
	Host            string `json:"dispatcher_host,omitempty"`
}

// envRunID is pilot.EnvRunID: every worker and its descendants carry
// PILOT_RUN_ID=<run id> (a test checks the two agree).
const envRunID = "PILOT_RUN_ID"

// Reconcile closes out the runs in the run directory dir (one run
// directory per subdirectory, as pilot.Dispatcher makes them) whose record
// still says "running" although their pilot is gone (see Owner). For each
// it
//
//   - sends SIGKILL to every process it can prove belongs to the run: those
//     whose environment holds PILOT_RUN_ID=<run id>, as every worker and its
//     descendants do, and the worker's process group (the record's pgid)
//     while one of them is in it (Linux; other systems have no /proc to
//     prove it, and Run.Note says so), and waits (at most 5 s) for them to
//     die;
//   - removes pilot's temporary files from the run's directory (atomic
//     writes' ".NAME.tmp-N", and ".line-spill-N"), and no other file;
//   - rewrites record.json atomically with status "abandoned", ended_at,
//     and the evidence (failure_evidence_source "pilot:reconcile",
//     failure_evidence_excerpt) and run_dir_bytes (the run directory's
//     size after that), keeping every other field, even ones it does not
//     know.
//
// A run whose pilot is alive is left alone, and so is a directory with no
// record.json. A missing dir is an empty report.
//
// Reconcile is cheap when there is nothing to do (it reads each record,
// parses only those that say "running") and safe to call at once from
// several processes on one dir: runs are closed out under an advisory lock
// on dir/.reconcile.lock, each record read again under it, so a run is
// closed out once. The error joins what went wrong; the runs it could close
// out are in the report all the same.
func Reconcile(dir string) (Report, error) {
	var rep Report
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("rundir: %w", err)
	}
	var errs []error
	var orphans []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name(), "record.json")
		rec, _, running, err := readRunning(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !running {
			continue
		}
		if alive, _ := Owner(rec); !alive {
			orphans = append(orphans, path)
		}
	}
	if len(orphans) == 0 {
		return rep, errors.Join(errs...)
	}

	l, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("rundir: %w", err))...)
	}
	defer l.Close()
	if err := filelock.Lock(l); err != nil {
		return rep, errors.Join(append(errs, fmt.Errorf("rundir: locking %s: %w", l.Name(), err))...)
	}
	for _, path := range orphans {
		run, ok, err := closeOut(path)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			rep.Runs = append(rep.Runs, run)
		}
	}
	return rep, errors.Join(errs...)
}

// readRunning reads the record at path, and reports whether it says
// "running". A missing record is not an error: the run's pilot may not
// have written it yet, or the run was just pruned.
func readRunning(path string) (rec Record, data []byte, running bool, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil, false, nil
	}
	if err != nil {
		return rec, nil, false, fmt.Errorf("rundir: %w", err)
	}
	// Most records are over: do not parse them.
	if !bytes.Contains(data, []byte(`"`+Running+`"`)) {
		return rec, data, false, nil
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, data, false, fmt.Errorf("rundir: %s: %w", path, err)
	}
	return rec, data, rec.Status == Running, nil
}

// closeOut closes out the run of the record at path, with the lock held:
// it reads the record again, and acts only if it still says "running" and
// its pilot is still gone.
func closeOut(path string) (Run, bool, error) {
	rec, data, running, err := readRunning(path)
	if err != nil || !running {
		return Run{}, false, err
	}
	alive, evidence := Owner(rec)
	if alive {
		return Run{}, false, nil
	}
	run := Run{RunID: rec.RunID, Record: path, Evidence: evidence}
	if run.RunID == "" {
		run.RunID = filepath.Base(filepath.Dir(path))
	}
	run.Killed, run.Survivors, run.Note = killRun(run.RunID, rec.Pgid)
	dir := filepath.Dir(path)
	var errs []error
	run.Removed, err = removeTemps(dir)
	if err != nil {
		errs = append(errs, err)
	}
	excerpt := evidence
	if n := len(run.Killed); n > 0 {
		excerpt += fmt.Sprintf("; killed %d leftover process(es) of the run", n)
	}
	if n := len(run.Survivors); n > 0 {
		excerpt += fmt.Sprintf("; %d still alive after SIGKILL: %v", n, run.Survivors)
	}
	size, _ := Size(dir) // a lower bound if part cannot be read
	out, err := abandon(data, excerpt, time.Now().UTC(), size)
	if err == nil {
		perm := os.FileMode(0o600)
		if st, serr := os.Stat(path); serr == nil {
			perm = st.Mode().Perm()
		}
		err = atomicfile.WriteFile(path, out, perm)
	}
	if err != nil {
		return run, false, errors.Join(append(errs, fmt.Errorf("rundir: marking %s abandoned: %w", path, err))...)
	}
	return run, true, errors.Join(errs...)
}

// abandon returns the record data with status "abandoned", ended_at now,
// the evidence and run_dir_bytes size, keeping every other field as it was.
func abandon(data []byte, evidence string, now time.Time, size int64) ([]byte, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	set := func(k string, v any) error {
		b, err := json.Marshal(v)
		raw[k] = b
		return err
	}
	if err := errors.Join(set("status", Abandoned), set("ended_at", now), set("failure_evidence_source", EvidenceSource),
		set("failure_evidence_excerpt", evidence), set("run_dir_bytes", size)); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// isTemp reports whether name is one of pilot's temporary files: an atomic
// write's ".NAME.tmp-N" (os.CreateTemp's N is digits) or a long line's
// ".line-spill-N".
func isTemp(name string) bool {
	if rest, ok := strings.CutPrefix(name, ".line-spill-"); ok && digits(rest) {
		return true
	}
	i := strings.LastIndex(name, ".tmp-")
	return strings.HasPrefix(name, ".") && i > 1 && digits(name[i+len(".tmp-"):])
}

// digits reports whether s is a non-empty string of ASCII digits.
func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// removeTemps removes pilot's temporary files from dir (not below it), and
// returns their paths.
func removeTemps(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("rundir: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !isTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("rundir: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// Owner reports whether the pilot that dispatched rec (its Provenance pid,
// "dispatcher_pid") still runs, and the evidence, which names its proof:
//
//   - no process with that pid: gone;
//   - a process with that pid that started after the run did (its start
//     time from /proc on Linux, from the system elsewhere where it gives
//     one): another process reused the pid, so the pilot is gone. The
//     record keeps no start time of its pilot, so the run's started_at is
//     the best proof, with a margin for the clock;
//   - a process with that pid that started before the run, or whose start
//     time this system does not give: alive.
//
// A record with no dispatcher pid counts as owned while a process of its
// run (its worker pid, or on Linux any process carrying its run id) is
// alive. Owner says nothing of whether rec is still running: that is its
// Status.
func Owner(rec Record) (alive bool, evidence string) {
	pid := rec.DispatcherPid
	if pid <= 0 {
		if rec.Pid > 0 && lookProc(rec.Pid).exists {
			return true, fmt.Sprintf("the record names no pilot pid; its worker pid %d is alive", rec.Pid)
		}
		if rec.RunID != "" && runHasProcesses(rec.RunID) {
			return true, "the record names no pilot pid; processes of the run are alive"
		}
		return false, "the record names no pilot pid, and no process of the run is left"
	}
	here := procfs.Self()
	switch {
	case rec.PidNamespace != "" && here.PidNamespace != "" && rec.PidNamespace != here.PidNamespace,
		rec.Host != "" && here.Host != "" && rec.Host != here.Host:
		// Its pid names a process this system cannot see: not known dead.
		return true, fmt.Sprintf("pilot pid %d ran in pid namespace %s on host %q, not this one's (%s on %q): not known dead, so left alone",
			pid, rec.PidNamespace, rec.Host, here.PidNamespace, here.Host)
	case rec.BootID != "" && here.BootID != "" && rec.BootID != here.BootID:
		return false, fmt.Sprintf("pilot pid %d ran before this system booted (boot id %s, now %s)", pid, rec.BootID, here.BootID)
	}
	p := lookProc(pid)
	if !p.exists {
		return false, fmt.Sprintf("pilot pid %d is gone (%s)", pid, p.proof)
	}
	if rec.DispatcherStart != 0 {
		// Exact, and blind to the wall clock: the start in ticks after
		// boot the record keeps against the process's now.
		if ticks, ok := procfs.StartTime(pid); ok {
			if ticks != rec.DispatcherStart {
				return false, fmt.Sprintf("pilot pid %d is alive but is another process: it started %d ticks after boot, the run's pilot %d (the pid was reused)",
					pid, ticks, rec.DispatcherStart)
			}
			return true, fmt.Sprintf("pilot pid %d is alive: its start, %d ticks after boot, is the one the record keeps", pid, ticks)
		}
	}
	if p.start.IsZero() {
		return true, fmt.Sprintf("pilot pid %d is alive (%s); this system gives no start time to tell a reused pid", pid, p.proof)
	}
	if p.start.After(rec.StartedAt.Add(procfs.ClockMargin(rec.StartedAt))) {
		return false, fmt.Sprintf("pilot pid %d is alive but started at %s, after the run started at %s: the pid was reused "+
			"(proof: the process's start time, from %s, against the record's started_at; the record keeps no start time of its pilot)",
			pid, p.start.UTC().Format(time.RFC3339), rec.StartedAt.UTC().Format(time.RFC3339), p.proof)
	}
	return true, fmt.Sprintf("pilot pid %d is alive and started at %s, before the run (proof: its start time, from %s, against the record's started_at)",
		pid, p.start.UTC().Format(time.RFC3339), p.proof)
}

// proc is what this system tells of a process.
type proc struct {
	exists bool
	start  time.Time // zero when the system does not give it
	proof  string    // how it was found out
}
