//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot/sandbox"
)

// --- hostile workers ---

// hostileExit is how a hostile worker exits once its attack is over: its
// verdict is then error, with this exit code.
const hostileExit = 23

// siblingEnds are how a hostile worker's siblings end, each with the
// verdict it must get (exit -1: no exit code, a signal ended it).
var siblingEnds = []struct {
	steps []string
	want  string
	exit  int
}{
	{[]string{"out=fine"}, "completed", 0},
	{[]string{"err=failing", "exit=3"}, "error/generic-error", 3},
	{[]string{"out=about to crash", "signal=11"}, "error/process-terminated/SIGSEGV", -1},
}

// runHostile: a child pilot runs a fanout of one hostile worker and one to
// three siblings. The child holds a stray inheritable pipe at fd 10, as a
// pilot started from a shell may (its supervisor inherits it; no worker
// may). Each sibling says it runs (a file in the run directory) and waits;
// the hostile worker waits for them all, runs the attack step, lets them
// go on and exits hostileExit. Every sibling must get the verdict its own
// ending gives, the hostile one error with exit hostileExit, its attack's
// line must pass judge (which says what is wrong, or ""), and nothing may
// reach the stray pipe. The jobs run in the default sandbox or with it off,
// drawn.
func runHostile(c *runCtx, attack string, judge func(line string) string) {
	n := 1 + c.rng.IntN(3)
	const shared = "{run_dir}/.." // the child's run directory
	var scripts []script
	var ends []int
	hostile := []string{}
	for i := range n {
		end := c.rng.IntN(len(siblingEnds))
		ends = append(ends, end)
		running := shared + "/running-" + strconv.Itoa(i)
		steps := []string{"write=" + running + "=", "await=" + shared + "/go"}
		scripts = append(scripts, script{steps: append(steps, siblingEnds[end].steps...)})
		hostile = append(hostile, "await="+running)
	}
	hostile = append(hostile, attack, "write="+shared+"/go=", "exit="+strconv.Itoa(hostileExit))
	at := c.rng.IntN(n + 1) // the hostile job's place in the fanout
	scripts = append(scripts[:at], append([]script{{steps: hostile}}, scripts[at:]...)...)
	for i := range scripts {
		// A backstop: a worker that never gets to go on fails its
		// verdict rather than hanging the run.
		scripts[i].timeout = 30 * time.Second
	}
	spec := c.childSpec(scripts...)
	if c.rng.IntN(2) == 0 {
		spec.Sandbox = sandbox.Off
	}

	r, w, err := os.Pipe()
	if err != nil {
		c.problem("pipe: %v", err)
		return
	}
	defer r.Close()
	extra := make([]*os.File, 8) // fd 10 in the child; 3 to 9 closed
	extra[7] = w
	ch, err := c.startChild(spec, extra...)
	w.Close()
	if err != nil {
		c.problem("starting the child pilot: %v", err)
		return
	}
	c.jobs = len(scripts)
	// A pilot whose supervisor's socket took junk can hang (its client
	// waiting for a frame the junk's first bytes announced): ended and
	// reported, not waited for.
	hung := time.AfterFunc(2*time.Minute, func() {
		c.problem("the child pilot hung: SIGKILLed after 2 minutes")
		ch.cmd.Process.Kill()
	})
	defer hung.Stop()
	name, _, _ := strings.Cut(attack, "=")
	var attackLine string
	vs := c.follow(ch, func(l string) bool {
		if s, ok := strings.CutPrefix(l, "line "); ok && strings.HasPrefix(s, name+" ") {
			attackLine = s
		}
		return false
	})
	if err := ch.cmd.Wait(); err != nil {
		c.problem("child pilot: %v", err)
	}
	c.verdicts = vs
	if len(vs) != len(scripts) {
		return // counted as missing verdicts
	}

	wrong := func(format string, a ...any) {
		c.wrong++
		c.problem("(sandbox %q) "+format, append([]any{spec.Sandbox}, a...)...)
	}
	for i, v := range vs {
		want, exit := "error/generic-error", hostileExit
		who := "the hostile worker"
		if i != at {
			sib := i
			if i > at {
				sib--
			}
			want, exit = siblingEnds[ends[sib]].want, siblingEnds[ends[sib]].exit
			who = "sibling " + strconv.Itoa(sib)
		}
		code := -1
		if v.ExitCode != nil {
			code = *v.ExitCode
		}
		if got := outcome(v.Verdict); got != want || code != exit {
			wrong("%s: verdict %s exit %d, want %s exit %d (stderr tail %q)", who, got, code, want, exit, v.StderrTail)
		}
	}
	if attackLine == "" {
		wrong("the hostile worker printed no %s line", name)
	} else if why := judge(attackLine); why != "" {
		wrong("the hostile worker: %s (%q)", why, attackLine)
	}
	r.SetReadDeadline(time.Now()) // what reached it is there by now
	if n, _ := r.Read(make([]byte, 1)); n > 0 {
		wrong("a worker wrote to the stray descriptor the child pilot inherited at fd 10")
	}
}

// runJunkFDs: the hostile worker writes 4 KiB of junk to every descriptor
// from 3 to 1023 and reads from each. It must have inherited only 0, 1
// and 2 (the supervisor's control socket and the child pilot's stray pipe
// are close-on-exec in the supervisor), so that the junk reaches nothing
// of pilot's.
func runJunkFDs(c *runCtx) {
	runHostile(c, "junkfds", func(line string) string {
		if f := strings.Fields(line); len(f) < 3 || f[1] != "inherited" || f[2] != "0,1,2" {
			return "it inherited more than fds 0, 1 and 2"
		}
		return ""
	})
}

// runKillParent: the hostile worker SIGKILLs its parent, the shared
// supervisor, and then the supervisor's process group. Both must fail
// with EPERM: the worker is Landlock-scoped (LANDLOCK_SCOPE_SIGNAL), so it
// cannot signal a process outside its own tree.
func runKillParent(c *runCtx) {
	runHostile(c, "killparent", func(line string) string {
		if !strings.HasSuffix(line, " parent EPERM group EPERM") {
			return "its kills did not both fail with EPERM"
		}
		return ""
	})
}

// needSignalScope says why worker-kills-its-parent cannot run here: without
// Landlock's signal scoping (sandbox.ScopeABI) pilot cannot keep a worker
// from killing the shared supervisor, and every sibling dies with it.
func needSignalScope() string {
	abi, err := sandbox.LandlockABI()
	switch {
	case err != nil:
		return fmt.Sprintf("needs Landlock signal scoping (ABI %d): %v", sandbox.ScopeABI, err)
	case abi < sandbox.ScopeABI:
		return fmt.Sprintf("needs Landlock signal scoping (ABI %d); this kernel offers ABI %d", sandbox.ScopeABI, abi)
	}
	return ""
}
