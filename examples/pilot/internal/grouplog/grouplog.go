// Package grouplog is the log the pilot command keeps of each fanout and
// graph it runs: which jobs it has, their dependencies, and when each job
// waited, started and ended. It lives beside the run directories, in
// <run-dir>/.groups/<group id>.jsonl, one JSON object a line; each run's
// record names its group too (pilot.Record.Group, GroupJob). `pilot serve`
// reads it to draw a group's timeline.
package grouplog

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/internal/rundir"
)

// The entry types.
const (
	TypeGroup    = "group"    // the first line: the group, its kind and jobs
	TypeWaiting  = "waiting"  // a job waits, holding no slot: Why says for what
	TypeStarting = "starting" // a job has its slot
	TypeStarted  = "started"  // a job's worker started: RunID
	TypeVerdict  = "verdict"  // a job's attempt ended: RunID, Status, Class
	TypeEnded    = "ended"    // a job is over without a verdict of its own: Status
	TypeEnd      = "end"      // the group is over (the last line)
)

// Kinds of group.
const (
	KindFanout = "fanout"
	KindGraph  = "graph"
)

// Entry is one line of a group's log.
type Entry struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Job is the job's index in the group line's Jobs; -1 for the
	// group's own lines.
	Job    int    `json:"job"`
	RunID  string `json:"run_id,omitempty"`
	Why    string `json:"why,omitempty"`
	Status string `json:"status,omitempty"`
	Class  string `json:"class,omitempty"`

	// The group line's.
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Jobs  []Job  `json:"jobs,omitempty"`
	Pilot *Pilot `json:"pilot,omitempty"`
}

// Pilot is the pilot process that writes a group's log, as its group line
// keeps it: enough to tell, when the log has no end line, whether that
// pilot still runs (see rundir.Owner) or died before it could write one.
type Pilot struct {
	Pid          int    `json:"pid"`
	StartTicks   uint64 `json:"start_ticks,omitempty"`
	BootID       string `json:"boot_id,omitempty"`
	PidNamespace string `json:"pid_namespace,omitempty"`
	Host         string `json:"host,omitempty"`
}

// self is this process as a group line keeps it.
func self() *Pilot {
	id := procfs.Self()
	p := &Pilot{Pid: os.Getpid(), BootID: id.BootID, PidNamespace: id.PidNamespace, Host: id.Host}
	p.StartTicks, _ = procfs.StartTime(p.Pid)
	return p
}

// Job is one job of a group.
type Job struct {
	Name   string   `json:"name"`
	Worker string   `json:"worker"` // "provider:mode"
	Deps   []string `json:"deps,omitempty"`
}

// DirName is the directory of the group logs in a run directory; its dot
// keeps it out of the runs package's listing.
const DirName = ".groups"

// reID is what a group id is made of.
var reID = regexp.MustCompile(`^[a-z]+-[0-9TZ.]+-[0-9a-f]+$`)

// ValidID reports whether id is a group id NewID could have made: a
// file name, never a path.
func ValidID(id string) bool { return reID.MatchString(id) }

// NewID returns a new group id of kind: "fanout-<UTC time>-<random>".
func NewID(kind string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + now.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

// Log is a group's log. Its file is made when the first job's worker
// starts, with the group line and the entries before, so that a group
// that ran nothing (its jobs refused, or run by another pilot) leaves no
// file. Its methods are safe for concurrent use; a nil *Log does nothing.
type Log struct {
	mu      sync.Mutex
	path    string
	head    Entry   // the group line
	pending []Entry // the entries before the first start
	f       *os.File
	err     error // the first failure: the log stops, the runs go on
}

// maxPending bounds the entries kept before the first start.
const maxPending = 4096

// New returns the log of group id of kind in runDir, with its jobs; the
// file is made at the first job entry.
func New(runDir, id, kind string, jobs []Job, now time.Time) (*Log, error) {
	if !ValidID(id) {
		return nil, errors.New("grouplog: not a group id: " + id)
	}
	return &Log{path: filepath.Join(runDir, DirName, id+".jsonl"),
		head: Entry{Time: now.UTC(), Type: TypeGroup, Job: -1, Group: id, Kind: kind, Jobs: jobs, Pilot: self()}}, nil
}

// Add appends e, a whole line in one write.
func (l *Log) Add(e Entry) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && l.err == nil {
		if e.Type != TypeStarted {
			if e.Type != TypeEnd && len(l.pending) < maxPending {
				l.pending = append(l.pending, e)
			}
			return
		}
		if l.err = os.MkdirAll(filepath.Dir(l.path), 0o700); l.err != nil {
			return
		}
		if l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600); l.err != nil {
			return
		}
		l.write(l.head)
		for _, p := range l.pending {
			l.write(p)
		}
		l.pending = nil
	}
	l.write(e)
}

// write writes e's line; l.mu is held.
func (l *Log) write(e Entry) {
	data, err := json.Marshal(e)
	if l.err != nil || l.f == nil || err != nil {
		return
	}
	_, l.err = l.f.Write(append(data, '\n'))
}

// Close writes the end line, when the log was made, and closes it.
func (l *Log) Close(now time.Time) error {
	if l == nil {
		return nil
	}
	l.Add(Entry{Time: now.UTC(), Type: TypeEnd, Job: -1})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return l.err
	}
	err := l.f.Close()
	l.f = nil
	return errors.Join(l.err, err)
}

// Group is a group's log as read.
type Group struct {
	ID      string
	Kind    string
	Jobs    []Job
	Started time.Time
	// Ended is the end line's time; zero while the group goes on. A log
	// whose pilot died before it wrote its end line ends at its last
	// line, and Lost says how the pilot was found gone.
	Ended   time.Time
	Lost    string
	Entries []Entry // the job lines, in order
}

// Read reads the log of group id in runDir: a regular file only, never
// through a symlink. A missing log, or an id that is not one, wraps
// fs.ErrNotExist. A last line cut short (being written) is left out.
func Read(runDir, id string) (Group, error) {
	if !ValidID(id) {
		return Group{}, fs.ErrNotExist
	}
	path := filepath.Join(runDir, DirName, id+".jsonl")
	lst, err := os.Lstat(path)
	if err != nil {
		return Group{}, err
	}
	if !lst.Mode().IsRegular() {
		return Group{}, errors.New("grouplog: " + id + " is not a regular file (a symlink?)")
	}
	f, err := os.Open(path)
	if err != nil {
		return Group{}, err
	}
	defer f.Close()
	if fst, err := f.Stat(); err != nil || !os.SameFile(lst, fst) {
		return Group{}, errors.New("grouplog: " + id + " changed while it was opened")
	}
	g := Group{ID: id}
	br := bufio.NewReader(f)
	first := true
	var pilot *Pilot
	var last time.Time
	for {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			break // a line without its newline is not whole yet
		}
		if err != nil {
			return g, err
		}
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		last = e.Time
		switch {
		case first && e.Type == TypeGroup:
			g.Kind, g.Jobs, g.Started, pilot = e.Kind, e.Jobs, e.Time, e.Pilot
		case e.Type == TypeEnd:
			g.Ended = e.Time
		case e.Job >= 0 && e.Job < len(g.Jobs):
			g.Entries = append(g.Entries, e)
		}
		first = false
	}
	if g.Started.IsZero() {
		return g, errors.New("grouplog: " + id + " has no group line")
	}
	if g.Ended.IsZero() && pilot != nil {
		alive, evidence := rundir.Owner(rundir.Record{StartedAt: g.Started, DispatcherPid: pilot.Pid, DispatcherStart: pilot.StartTicks,
			BootID: pilot.BootID, PidNamespace: pilot.PidNamespace, Host: pilot.Host})
		if !alive {
			g.Ended, g.Lost = last, evidence
		}
	}
	return g, nil
}

// List returns the ids of runDir's group logs, newest first.
func List(runDir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(runDir, DirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && ValidID(id) && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	// The time after the kind sorts them.
	slices.SortFunc(ids, func(a, b string) int {
		return strings.Compare(b[strings.IndexByte(b, '-'):], a[strings.IndexByte(a, '-'):])
	})
	return ids, nil
}

// Prune removes the logs of runDir's groups that are over and whose runs
// are all gone: no directory in runDir, or named in gone (the runs a
// prune removes, or on a dry run would remove). With dryRun it removes
// nothing. It returns the ids of the logs removed (would be), newest
// first; a log it cannot read is left, and its error joined.
func Prune(runDir string, gone map[string]bool, dryRun bool) ([]string, error) {
	ids, err := List(runDir)
	if err != nil {
		return nil, err
	}
	var out []string
	var errs []error
	for _, id := range ids {
		g, err := Read(runDir, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if g.Ended.IsZero() || slices.ContainsFunc(g.Entries, func(e Entry) bool {
			return e.RunID != "" && !gone[e.RunID] && exists(filepath.Join(runDir, e.RunID))
		}) {
			continue
		}
		if !dryRun {
			if err := os.Remove(filepath.Join(runDir, DirName, id+".jsonl")); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		out = append(out, id)
	}
	return out, errors.Join(errs...)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
