// Package procfs reads the Linux process table: which processes are alive,
// their children, their resident memory, and which carry a given
// environment entry.
package procfs

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	f, ok := statFields(pid)
	return ok && f[0][0] != 'Z' && f[0][0] != 'X'
}

// statFields returns the fields of /proc/PID/stat after the command name
// (which is in parentheses and may itself hold spaces and ')'): f[0] is
// field 3, the state. ok is false when there is no such process, or no
// /proc.
func statFields(pid int) (f [][]byte, ok bool) {
	if pid <= 0 {
		return nil, false
	}
	data, err := readFile("/proc/"+strconv.Itoa(pid)+"/stat", make([]byte, 0, 512))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	f = bytes.Fields(data[i+1:])
	return f, len(f) > 0
}

// Pgrp returns pid's process group (field 5 of /proc/PID/stat).
func Pgrp(pid int) (int, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 3 {
		return 0, false
	}
	g, err := strconv.Atoi(string(f[2]))
	return g, err == nil
}

// Children lists pid's children, from /proc/PID/task/*/children.
func Children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := readDirNames(dir)
	if err != nil {
		return nil
	}
	var (
		out []int
		buf [256]byte
	)
	for _, t := range tasks {
		data, err := readFile(dir+"/"+t+"/children", buf[:0])
		if err != nil {
			continue
		}
		for _, f := range bytes.Fields(data) {
			if n, err := strconv.Atoi(string(f)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// ThreadChildren lists the children of process pid's thread tid, from
// /proc/PID/task/TID/children; ok is false when that cannot be read.
func ThreadChildren(pid, tid int) (out []int, ok bool) {
	data, err := readFile("/proc/"+strconv.Itoa(pid)+"/task/"+strconv.Itoa(tid)+"/children", nil)
	if err != nil {
		return nil, false
	}
	for _, f := range bytes.Fields(data) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out, true
}

// Environ returns pid's environment block (NUL-separated entries).
func Environ(pid int) ([]byte, error) {
	return readFile("/proc/"+strconv.Itoa(pid)+"/environ", nil)
}

// HasEntry reports whether the environment block environ holds entry
// ("NAME=value") exactly.
func HasEntry(environ, entry []byte) bool {
	if len(entry) == 0 {
		return false
	}
	for len(environ) > 0 {
		e := environ
		if i := bytes.IndexByte(environ, 0); i >= 0 {
			e, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if bytes.Equal(e, entry) {
			return true
		}
	}
	return false
}

// WithEnv lists the live processes whose environment holds entry. Only
// processes whose environment this process may read are seen.
func WithEnv(entry string) []int {
	names, err := readDirNames("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		env, err := Environ(pid)
		if err == nil && HasEntry(env, []byte(entry)) && Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// StartTime returns pid's start time in clock ticks since boot (field 22 of
// /proc/PID/stat), which with the pid names one process even after the pid
// is reused; ok is false when the process is gone, a zombie, or there is no
// /proc.
func StartTime(pid int) (ticks uint64, ok bool) {
	// Field 22 is fields[19].
	f, ok := statFields(pid)
	if !ok || len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, false
	}
	t, err := strconv.ParseUint(string(f[19]), 10, 64)
	return t, err == nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time: 100 on
// every Linux architecture.
const clockTicks = 100

// StartedAt returns when pid started by this system's clock as it is now:
// the boot time (/proc/stat's btime, whole seconds) plus its start ticks.
// A clock step since boot moves it, so it is only for judging a record
// that keeps no start ticks; ok is false as for StartTime, or when there
// is no boot time.
func StartedAt(pid int) (time.Time, bool) {
	ticks, ok := StartTime(pid)
	if !ok {
		return time.Time{}, false
	}
	boot, ok := BootTime()
	if !ok {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), true
}

// ClockMargin is how much later than since a process may seem to have
// started (StartedAt) though it started before: a start time is read
// against the boot time, which is whole seconds, and the clock may have
// been slewed since (at most 500 ppm).
func ClockMargin(since time.Time) time.Duration {
	return 2*time.Second + max(time.Since(since), 0)/1000
}

// BootTime is the btime line of /proc/stat: when the system booted, in
// whole seconds of the clock as it is now.
func BootTime() (time.Time, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for line := range bytes.Lines(data) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return time.Unix(n, 0), err == nil
		}
	}
	return time.Time{}, false
}

// pageSize is the unit of /proc/PID/stat's rss.
var pageSize = int64(os.Getpagesize())

// RSS returns pid's resident memory in bytes (field 24 of /proc/PID/stat,
// the same count as VmRSS) and its command name (comm, at most 15 bytes);
// ok is false when the process is gone, a zombie, or there is no /proc.
func RSS(pid int) (rss int64, comm string, ok bool) {
	if pid <= 0 {
		return 0, "", false
	}
	var buf [512]byte
	data, err := readFile("/proc/"+strconv.Itoa(pid)+"/stat", buf[:0])
	if err != nil {
		return 0, "", false
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return 0, "", false
	}
	// Field 24 is f[21].
	f := bytes.Fields(data[end+1:])
	if len(f) < 22 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, "", false
	}
	pages, err := strconv.ParseInt(string(f[21]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	return pages * pageSize, string(data[open+1 : end]), true
}

// An Identity says which system a process runs in, so that a judge can
// tell a pid of its own from one that names another system's process: the
// kernel's boot (boot id), the pid namespace (the inode of /proc/self/ns/pid,
// as "pid:[N]"), and the host name. A field this system does not give is
// empty.
type Identity struct {
	BootID       string
	PidNamespace string
	Host         string
}

// Self returns this process's Identity.
func Self() Identity {
	var id Identity
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		id.BootID = string(bytes.TrimSpace(b))
	}
	id.PidNamespace, _ = os.Readlink("/proc/self/ns/pid")
	id.Host, _ = os.Hostname()
	return id
}
