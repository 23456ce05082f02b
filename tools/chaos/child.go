//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakeagent"
	"github.com/pilotworkers/pilot/size"
)

// childMain is a pilot process of its own (envChild holds its childSpec):
// it runs a fanout and reports on stdout "pid N" for every worker and
// spawned process, "line TEXT" for every worker stdout line, and at the end
// "verdicts JSON" (or "error TEXT").
func childMain() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(envChild)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out.WriteString(s + "\n")
		out.Flush()
	}
	tk, tv, _ := strings.Cut(spec.Tag, "=")
	var ps []pilot.Provider
	var jobs []pilot.Job
	for i, j := range spec.Jobs {
		name := "c" + strconv.Itoa(i)
		ps = append(ps, pilot.Provider{
			Name:   name,
			Runner: "command",
			Argv:   append([]string{exe}, j.Steps...),
			Env:    map[string]string{fakeagent.EnvFakeAgent: "1", tk: tv, "GORACE": "atexit_sleep_ms=0"},
		})
		jobs = append(jobs, pilot.Job{Task: pilot.Task{
			Provider: name, Mode: pilot.ModeExplore, Prompt: "chaos", Workdir: spec.Workdir,
			Timeout:     time.Duration(j.TimeoutMS) * time.Millisecond,
			IdleTimeout: time.Duration(j.IdleMS) * time.Millisecond,
			MemoryLimit: size.Bytes(j.Memory),
		}})
	}
	var full sync.Once
	d, err := newDispatcher(spec.RunDir, ps, func(pid int) { say("pid " + strconv.Itoa(pid)) }, func(line string) {
		say("line " + line)
		if spec.FullOnReady && line == "ready" {
			full.Do(func() { fillDisk(spec.Trigger) })
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	d.Sandbox = spec.Sandbox
	f := &pilot.Fanout{Dispatcher: d}
	vs, err := f.Run(context.Background(), jobs)
	if err != nil {
		say("error " + err.Error())
		return 1
	}
	data, err := json.Marshal(vs)
	if err != nil {
		say("error " + err.Error())
		return 1
	}
	say("verdicts " + string(data))
	return 0
}

// fillDisk makes every later write that grows a file fail, as on a full
// disk: RLIMIT_FSIZE 0 for this process, with SIGXFSZ ignored so the write
// fails with EFBIG instead of killing the process. Creating an empty file
// still works: trigger is created so that the workers go on.
func fillDisk(trigger string) {
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child: setrlimit:", err)
	}
	if f, err := os.Create(trigger); err == nil {
		f.Close()
	}
}
