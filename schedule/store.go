package schedule

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/filelock"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// StoreFileName is the name of a Store's file in a state directory.
const StoreFileName = "schedule.json"

// A Store keeps who owns which job of a graph, and which jobs are complete,
// in a file that several pilots share: each change is made under the file's
// lock and written atomically, so that a job another live pilot owns is
// never started twice, and a restarted pilot picks up where the last one
// stopped. A file that is not a store is refused (it fails closed), with
// the fix. A dry-run store reads the file, if any, and never writes.
type Store struct {
	path   string
	dryRun bool
	// Stall is how long an owner's stream log may stay still while its
	// owner counts as live without a live pid; zero means 10 minutes.
	Stall time.Duration

	// leases are the leases of owners in another pid namespace or on
	// another host, as this process watched them (see leased).
	mu        sync.Mutex
	leases    map[string]lease
	leaseTime time.Duration    // zero: defaultLease
	clock     func() time.Time // the judge's monotonic clock; nil: time.Now
}

// A lease is an owner record's renewal as a judge watched it: the
// record's UpdatedAt, and when, by the judge's own monotonic clock, that
// value was first seen.
type lease struct {
	renewed time.Time
	seen    time.Time
}

// defaultLease is how long an owner this system cannot see (another pid
// namespace or host) stays alive to a judge that watches its record not
// renewed; a Run renews its records every leaseRenew.
const (
	defaultLease = time.Minute
	leaseRenew   = 15 * time.Second
)

// The statuses a store records for a job.
const (
	ownRunning  = "running"
	ownComplete = "complete"
	ownStale    = "stale" // its owner died while it ran
)

// ownerRecord is a store's record of one job.
type ownerRecord struct {
	Status string `json:"status"`
	// Pid and Start are the owning pilot's process id and start time;
	// AgentPid and AgentStart its worker's, once it runs; StreamLog the
	// worker's stream.log.
	Pid        int       `json:"pid"`
	Start      uint64    `json:"start,omitempty"`
	AgentPid   int       `json:"agent_pid,omitempty"`
	AgentStart uint64    `json:"agent_start,omitempty"`
	StreamLog  string    `json:"stream_log,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	Reason     string    `json:"reason,omitempty"`
	// Def is the job's definition when it completed (see Job.definition):
	// a job whose definition changed since is not complete any more.
	// Branch is a complete worktree job's branch, for its dependents and
	// the integration of a later run.
	Def    string `json:"def,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Writes and WritesUnknown are a running job's write set (Writes),
	// so that a pilot sharing the store keeps its own jobs' apart from
	// it.
	Writes        []string `json:"writes,omitempty"`
	WritesUnknown bool     `json:"writes_unknown,omitempty"`
	// Token names the Run of its pilot that claimed the job, so that two
	// Runs in one process never both take it.
	Token string `json:"token,omitempty"`
	// Boot, PidNS and Host say where the owning pilot runs
	// (procfs.Identity): its pid means nothing to a judge in another pid
	// namespace or on another host.
	Boot  string `json:"boot_id,omitempty"`
	PidNS string `json:"pid_namespace,omitempty"`
	Host  string `json:"host,omitempty"`
	// Worktree names a running worktree job's worktree, so that a pilot
	// that takes the job over from a dead owner builds on what that one
	// left there (see Scheduler's salvage).
	Worktree string `json:"worktree,omitempty"`
	// Previous is the completion a running rerun of the job replaces:
	// kept until the rerun completes, and back if it does not.
	Previous *ownerRecord `json:"previous,omitempty"`
}

// here is this process's identity.
var here = sync.OnceValue(procfs.Self)

// foreign reports whether rec's owner runs where this process cannot
// see its pids: another pid namespace or another host (a container, a
// machine sharing the state directory).
func (rec *ownerRecord) foreign() bool {
	h := here()
	return rec.PidNS != "" && h.PidNamespace != "" && rec.PidNS != h.PidNamespace ||
		rec.Host != "" && h.Host != "" && rec.Host != h.Host
}

// mine reports whether rec is this process's claim under token.
func (rec *ownerRecord) mine(token string) bool {
	return !rec.foreign() && rec.Pid == os.Getpid() && rec.Token == token
}

// thisProcess reports whether rec's owner is this process (any Run of it).
func (rec *ownerRecord) thisProcess() bool {
	return !rec.foreign() && rec.Pid == os.Getpid()
}

// sibling reports whether rec is a claim of another Run of this process,
// which is alive as long as this process is.
func (rec *ownerRecord) sibling(token string) bool {
	return !rec.foreign() && rec.Pid == os.Getpid() && rec.Token != token
}

// leased says whether the owner of rec, foreign to this process, is
// alive: not known dead until this process has watched its record go
// unrenewed for the lease's length by its own monotonic clock (never by
// comparing the owner's wall clock with this one's).
func (s *Store) leased(rec *ownerRecord) (bool, string) {
	where := fmt.Sprintf("pilot pid %d of pid namespace %s on host %q", rec.Pid, rec.PidNS, rec.Host)
	key := fmt.Sprint(rec.Host, rec.PidNS, rec.Pid, rec.Start, rec.Token)
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[key]
	if !ok || !l.renewed.Equal(rec.UpdatedAt) {
		if s.leases == nil {
			s.leases = map[string]lease{}
		}
		s.leases[key] = lease{renewed: rec.UpdatedAt, seen: s.monotonic()}
		l = s.leases[key]
	}
	length := cmp.Or(s.leaseTime, defaultLease)
	if s.monotonic().Sub(l.seen) < length {
		return true, fmt.Sprintf("%s (not this system's): not known dead until its lease goes %s unrenewed", where, length)
	}
	return false, fmt.Sprintf("%s (not this system's) left its lease unrenewed for %s", where, length)
}

// writeSet is the write set a running record keeps.
func (rec *ownerRecord) writeSet() Writes {
	return Writes{Files: rec.Writes, Unknown: rec.WritesUnknown, Why: "recorded unknown"}
}

type storeDoc struct {
	Version int                     `json:"version"`
	Jobs    map[string]*ownerRecord `json:"jobs"`
}

const storeVersion = 1

// OpenStore opens the store at path (a file, created with its directory on
// the first change); dryRun makes it read-only. It reads the file once to
// refuse one that is not a store.
func OpenStore(path string, dryRun bool) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("schedule: state file: %w", err)
	}
	s := &Store{path: abs, dryRun: dryRun}
	if _, err := s.read(); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

func (s *Store) read() (*storeDoc, error) {
	doc := &storeDoc{Version: storeVersion, Jobs: map[string]*ownerRecord{}}
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schedule: reading state file %s: %w", s.path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil || doc.Version != storeVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", doc.Version, storeVersion)
		}
		return nil, fmt.Errorf("schedule: state file %s is not a schedule store (%v): move it aside or give another --state directory", s.path, err)
	}
	if doc.Jobs == nil {
		doc.Jobs = map[string]*ownerRecord{}
	}
	return doc, nil
}

// change runs f on the store's document under its lock and writes the
// result atomically when f reports a change.
func (s *Store) change(f func(doc *storeDoc) bool) error {
	if s.dryRun {
		doc, err := s.read()
		if err != nil {
			return err
		}
		f(doc)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("schedule: state directory: %w", err)
	}
	lock, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return withFix(fmt.Errorf("schedule: state lock: %w", err))
	}
	defer lock.Close() // releases the lock
	if err := filelock.Lock(lock); err != nil {
		return withFix(fmt.Errorf("schedule: locking %s: %w", s.path, err))
	}
	// Every write is made under the lock: a temporary file now is one a
	// writer killed mid-write left.
	atomicfile.RemoveOrphans(s.path)
	doc, err := s.read()
	if err != nil {
		return err
	}
	if !f(doc) {
		return nil
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFileSync(s.path, append(data, '\n'), 0o600); err != nil {
		return withFix(fmt.Errorf("schedule: writing state file %s: %w", s.path, err))
	}
	return nil
}

// withFix adds to err, a failure of the state file's lock or write, what
// to do about it when its cause names that (filelock.Fix).
func withFix(err error) error {
	if f := filelock.Fix(err); f != "" {
		return fmt.Errorf("%w: %s", err, f)
	}
	return err
}

// zeroSignal asks whether a process exists without signalling it.
var zeroSignal = syscall.Signal(0)

// self is this process as an owner.
func self() ownerRecord {
	pid := os.Getpid()
	start, _ := procfs.StartTime(pid)
	h := here()
	return ownerRecord{Status: ownRunning, Pid: pid, Start: start, Boot: h.BootID, PidNS: h.PidNamespace, Host: h.Host}
}

// alive reports whether the process pid, started at start (when known), is
// still running: a reused pid is another process. A record that keeps no
// start (one written before start times were kept, or where /proc gave
// none) is judged by since, the record's last update: a process that
// started after it, by more than the clock's margin, cannot be the one
// the record names.
func alive(pid int, start uint64, since time.Time) bool {
	if pid <= 0 {
		return false
	}
	if st, ok := procfs.StartTime(pid); ok {
		if start != 0 {
			return st == start
		}
		at, ok := procfs.StartedAt(pid)
		return !ok || since.IsZero() || !at.After(since.Add(procfs.ClockMargin(since)))
	}
	// No /proc: ask the kernel whether the pid exists at all.
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(zeroSignal) == nil
}

// live says whether the owner of a running record is still at work, and
// how pilot knows: its worker's process, its own process, or, when the
// record names no worker process, its worker's stream log moving within
// the stall window. Never a heartbeat's or events log's mtime: those move
// while a worker is stuck.
func (s *Store) live(rec *ownerRecord, now time.Time) (bool, string) {
	if rec.foreign() {
		return s.leased(rec)
	}
	if h := here(); rec.Boot != "" && h.BootID != "" && rec.Boot != h.BootID {
		return false, fmt.Sprintf("pilot pid %d ran before this system booted", rec.Pid)
	}
	if alive(rec.AgentPid, rec.AgentStart, rec.UpdatedAt) {
		return true, fmt.Sprintf("agent pid %d is running", rec.AgentPid)
	}
	if rec.Pid != os.Getpid() && alive(rec.Pid, rec.Start, rec.UpdatedAt) {
		return true, fmt.Sprintf("pilot pid %d is running", rec.Pid)
	}
	stall := s.Stall
	if stall <= 0 {
		stall = 10 * time.Minute
	}
	// A stream log moving speaks for a worker the record names no
	// process of; one whose worker and pilot are both known gone has no
	// writer left (pilot writes it), whenever it last moved.
	if rec.StreamLog != "" && rec.AgentPid <= 0 {
		if st, err := os.Stat(rec.StreamLog); err == nil && now.Sub(st.ModTime()) < stall {
			return true, fmt.Sprintf("its stream log moved %s ago", now.Sub(st.ModTime()).Round(time.Second))
		}
	}
	return false, ""
}

// claim takes job id, of write set ws, for this process unless another
// live owner holds it: then claimed is false and holder says who. A record
// a dead owner left running is marked stale first. Unless rerun, a job
// another pilot completed since this one read the store, with the
// definition def (or none recorded), is not taken either: done is its
// record, and the job counts as complete. Nor is a job whose write set
// overlaps a running job's of another live pilot: wait says why, and the
// job may be claimed once that one ends.
func (s *Store) claim(id, token, def string, rerun bool, ws Writes, now time.Time) (c claimed, err error) {
	err = s.change(func(doc *storeDoc) bool {
		c = s.claimIn(doc, id, token, def, rerun, ws, now)
		return c.claimed
	})
	return c, err
}

// A claimed is what a claim came to: claimed, or done, holder or wait
// say why not (see claim); salvage names the worktree a dead owner's run
// of the job left, when the claim took the job over from one that
// recorded it.
type claimed struct {
	claimed      bool
	done         *ownerRecord
	holder, wait string
	salvage      string
}

// claimIn is claim's change of doc, which it changed when c.claimed.
func (s *Store) claimIn(doc *storeDoc, id, token, def string, rerun bool, ws Writes, now time.Time) claimed {
	rec := doc.Jobs[id]
	if rec != nil && rec.Status == ownComplete && !rerun && (rec.Def == "" || rec.Def == def) {
		c := *rec
		return claimed{done: &c}
	}
	if wait := s.foreignConflict(doc, id, token, ws, now); wait != "" {
		return claimed{wait: wait}
	}
	if rec != nil && rec.Status == ownRunning && rec.sibling(token) {
		return claimed{holder: fmt.Sprintf("owned by another run of this pilot (pid %d)", rec.Pid)}
	}
	if rec != nil && rec.Status == ownRunning && !rec.thisProcess() {
		if ok, why := s.live(rec, now); ok {
			if rec.foreign() {
				// Not known dead: wait for its lease.
				return claimed{wait: "owned by a pilot this system cannot see: " + why}
			}
			return claimed{holder: fmt.Sprintf("owned by a live pilot (pid %d): %s", rec.Pid, why)}
		}
	}
	c := claimed{claimed: true}
	me := self()
	me.UpdatedAt = now.UTC()
	if rec != nil && (rec.Status == ownRunning && !rec.thisProcess() || rec.Status == ownStale) {
		if rec.Status == ownRunning {
			me.Reason = fmt.Sprintf("took over from pilot pid %d, gone (its record marked stale)", rec.Pid)
		}
		// What the dead owner's run left in its worktree is the next
		// run's to build on.
		c.salvage = rec.Worktree
	}
	me.Writes, me.WritesUnknown, me.Token = ws.Files, ws.Unknown, token
	switch {
	case rec != nil && rec.Status == ownComplete:
		prev := *rec
		me.Previous = &prev
	case rec != nil:
		me.Previous = rec.Previous // a dead owner's rerun's
	}
	doc.Jobs[id] = &me
	return c
}

// foreignConflict says why a job of write set ws may not start beside the
// running jobs of other live pilots in doc ("" when it may): the rule
// Writers keeps within one pilot, across all of them.
func (s *Store) foreignConflict(doc *storeDoc, id, token string, ws Writes, now time.Time) string {
	if !ws.writes() {
		return ""
	}
	var others Writers
	var names []string
	ids := slices.Sorted(maps.Keys(doc.Jobs))
	for _, other := range ids {
		rec := doc.Jobs[other]
		if other == id || rec.Status != ownRunning || rec.mine(token) {
			continue
		}
		if ok, _ := s.live(rec, now); !ok && !rec.sibling(token) {
			continue
		}
		others.Start(len(names), rec.writeSet())
		names = append(names, fmt.Sprintf("%s (pilot pid %d)", other, rec.Pid))
	}
	_, why := others.Conflict(ws, func(k int) string { return names[k] })
	if why != "" {
		why += " (another pilot's)"
	}
	return why
}

// monotonic reads the judge's clock for leases (its monotonic reading).
func (s *Store) monotonic() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// renew renews the leases of the jobs this process's Run token runs:
// their records' UpdatedAt moves, which a judge that cannot see this
// process's pids watches (leased).
func (s *Store) renew(token string, now time.Time) error {
	return s.change(func(doc *storeDoc) bool {
		changed := false
		for _, rec := range doc.Jobs {
			if rec.Status == ownRunning && rec.mine(token) {
				rec.UpdatedAt = now.UTC()
				changed = true
			}
		}
		return changed
	})
}

// started records the worker of job id.
func (s *Store) started(id, token string, agentPid int, streamLog string, now time.Time) error {
	return s.change(func(doc *storeDoc) bool {
		rec := doc.Jobs[id]
		if rec == nil || !rec.mine(token) {
			return false
		}
		rec.AgentPid, rec.StreamLog, rec.UpdatedAt = agentPid, streamLog, now.UTC()
		rec.AgentStart, _ = procfs.StartTime(agentPid)
		return true
	})
}

// entered records the worktree job id's run works in.
func (s *Store) entered(id, token, worktree string, now time.Time) error {
	return s.change(func(doc *storeDoc) bool {
		rec := doc.Jobs[id]
		if rec == nil || !rec.mine(token) {
			return false
		}
		rec.Worktree, rec.UpdatedAt = worktree, now.UTC()
		return true
	})
}

// release records how job id ended: complete (with its definition def and
// its worktree's branch, if any), or released (its record removed) so that
// another pilot may run it again.
func (s *Store) release(id, token string, complete bool, def, branch string, now time.Time) error {
	return s.change(func(doc *storeDoc) bool {
		rec := doc.Jobs[id]
		if rec == nil || !rec.mine(token) {
			return false
		}
		switch {
		case complete:
			rec.Status, rec.UpdatedAt, rec.AgentPid, rec.AgentStart = ownComplete, now.UTC(), 0, 0
			rec.Def, rec.Branch, rec.Previous, rec.Worktree = def, branch, nil, ""
		case rec.Previous != nil:
			doc.Jobs[id] = rec.Previous // the rerun failed: the earlier completion stands
		default:
			delete(doc.Jobs, id)
		}
		return true
	})
}

// prepare reads the store at the start of a run: the records of the jobs
// complete, and marks stale every running record whose owner is gone.
func (s *Store) prepare(now time.Time) (complete map[string]ownerRecord, err error) {
	complete = map[string]ownerRecord{}
	err = s.change(func(doc *storeDoc) bool {
		changed := false
		for id, rec := range doc.Jobs {
			switch rec.Status {
			case ownComplete:
				complete[id] = *rec
			case ownRunning:
				if ok, _ := s.live(rec, now); !ok && !rec.thisProcess() {
					if prev := rec.Previous; prev != nil {
						// A rerun whose pilot died: the earlier
						// completion stands.
						doc.Jobs[id] = prev
						complete[id] = *prev
					} else {
						rec.Status, rec.Reason, rec.UpdatedAt = ownStale, fmt.Sprintf("pilot pid %d is gone", rec.Pid), now.UTC()
					}
					changed = true
				}
			}
		}
		return changed
	})
	return complete, err
}

// Reset clears the records of the jobs named in ids (every job when ids is
// nil), so that the next run starts them afresh, and returns the ids it
// cleared (in a dry-run store: would clear), sorted. A job a live pilot
// owns is never cleared: it is an error that names it and its owner, and
// nothing is cleared.
func (s *Store) Reset(ids []string) ([]string, error) {
	var cleared, live []string
	now := time.Now()
	err := s.change(func(doc *storeDoc) bool {
		cleared, live = nil, nil
		for id, rec := range doc.Jobs {
			if ids != nil && !slices.Contains(ids, id) {
				continue
			}
			if rec.Status == ownRunning {
				if ok, why := s.live(rec, now); ok {
					live = append(live, fmt.Sprintf("%s (pilot pid %d: %s)", id, rec.Pid, why))
					continue
				}
			}
			cleared = append(cleared, id)
		}
		if live != nil {
			return false
		}
		for _, id := range cleared {
			delete(doc.Jobs, id)
		}
		return len(cleared) > 0
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(live)
	if live != nil {
		return nil, fmt.Errorf("schedule: not resetting: a live pilot owns %s; wait for it, or stop it first", strings.Join(live, ", "))
	}
	sort.Strings(cleared)
	return cleared, nil
}
