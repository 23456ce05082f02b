package worktree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/filelock"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// inventory is the inventory file's content.
type inventory struct {
	Entries []Entry `json:"entries"`
}

// find returns the index of the entry named name, or -1.
func (inv *inventory) find(name string) int {
	for i := range inv.Entries {
		if inv.Entries[i].Name == name {
			return i
		}
	}
	return -1
}

// readInventory reads the inventory file at path; a missing or empty file is
// an empty inventory.
func readInventory(path string) (*inventory, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &inventory{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the worktree inventory: %w", err)
	}
	inv := &inventory{}
	if len(bytes.TrimSpace(data)) == 0 {
		return inv, nil
	}
	if err := json.Unmarshal(data, inv); err != nil {
		return nil, fmt.Errorf("worktree inventory %s is not valid JSON (%v): move it aside and pilot starts a new one; "+
			"git worktree list in each repository shows the worktrees it recorded", path, err)
	}
	return inv, nil
}

// lock takes the inventory's advisory lock, "<inventoryPath>.lock". The
// lock file is never removed: removing it would let two holders lock two
// different files.
func lock(inventoryPath string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(inventoryPath), 0o700); err != nil {
		return nil, fmt.Errorf("creating the worktree inventory's directory: %w", err)
	}
	return lockFile(inventoryPath + ".lock")
}

// lockFile takes an exclusive lock (flock on Unix) on path, creating the
// file if need be, and blocks until it has it; the caller releases it by
// closing the file. The locks belong to the open file, so goroutines of one
// process exclude each other as processes do.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := filelock.Lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// update applies fn to the inventory under its lock and writes the result
// atomically, unless fn fails.
func (m *Manager) update(fn func(inv *inventory) error) error {
	path, err := m.inventoryPath()
	if err != nil {
		return err
	}
	l, err := lock(path)
	if err != nil {
		return err
	}
	defer l.Close()
	inv, err := readInventory(path)
	if err != nil {
		return err
	}
	if err := fn(inv); err != nil {
		return err
	}
	return writeInventory(path, inv)
}

func writeInventory(path string, inv *inventory) error {
	if inv.Entries == nil {
		inv.Entries = []Entry{}
	}
	data, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the worktree inventory: %w", err)
	}
	return nil
}

// procStart returns the start time of process pid, and false when there is
// no such process or it is a zombie (procfs.StartTime).
func procStart(pid int) (uint64, bool) { return procfs.StartTime(pid) }

// ownerAlive reports whether the process that recorded pid and start is
// still running: a live process with that pid but another start time is a
// different process that reused the pid.
func ownerAlive(pid int, start uint64) bool {
	got, ok := procStart(pid)
	return ok && got == start
}

// ownerAlive reports whether e's owner may still run: one of another pid
// namespace or host is not known dead (this system's pids do not name
// it), one of an earlier boot is dead, and otherwise its pid and start
// decide (ownerAlive).
func (e Entry) ownerAlive() bool {
	here := procfs.Self()
	switch {
	case e.OwnerPidNamespace != "" && here.PidNamespace != "" && e.OwnerPidNamespace != here.PidNamespace,
		e.OwnerHost != "" && here.Host != "" && e.OwnerHost != here.Host:
		return true
	case e.OwnerBoot != "" && here.BootID != "" && e.OwnerBoot != here.BootID:
		return false
	}
	return ownerAlive(e.OwnerPID, e.OwnerStart)
}

// owner identifies a process across pid reuse, and the system it runs in.
type owner struct {
	pid   int
	start uint64
	id    procfs.Identity
}

// self is this process.
var self = sync.OnceValues(func() (owner, error) {
	pid := os.Getpid()
	start, ok := procStart(pid)
	if !ok {
		return owner{}, fmt.Errorf("cannot read /proc/%d/stat: worktree jobs need Linux's /proc to record which process owns a worktree", pid)
	}
	return owner{pid, start, procfs.Self()}, nil
})
