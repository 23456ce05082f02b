//go:build unix

package temporal

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
)

// agentProcess starts the test binary as a process of a group of its
// own that lives until its stdin closes or it is signalled (a worker).
func agentProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envBlockOnStdin+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return cmd
}

// An owner of this host that lives but renews nothing (a stopped
// process) loses the job once its lease runs out: its agent is ended
// first, and only once that is gone does the new generation launch.
func TestRunJobEndsAStoppedOwnersAgentBeforeItLaunches(t *testing.T) {
	repo := pilottest.GitRepo(t)
	owner := helperProcess(t)
	agent := agentProcess(t)
	ownStart, ok1 := pidStart(owner.Process.Pid)
	agentStart, ok2 := pidStart(agent.Process.Pid)
	if !ok1 || !ok2 {
		t.Skip("no process start times here")
	}
	host, _ := os.Hostname()
	f := fence{repo: repo, job: "stopped"}
	own := Owner{Job: "stopped", Generation: 1, State: stateRunning, Host: host, Pid: owner.Process.Pid, PidStart: ownStart, AgentPid: agent.Process.Pid, AgentStart: agentStart, LeaseMS: 300}
	if _, err := f.swap(context.Background(), "", own); err != nil {
		t.Fatal(err)
	}
	calls := new(atomic.Int32)
	a := &Activities{Heartbeat: 100 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		calls.Add(1)
		if alive(agent.Process.Pid, agentStart) {
			t.Error("generation 2 launched while generation 1's agent lives")
		}
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})}
	ch := make(chan outcome, 1)
	go func() {
		res, err := runJob(t, activityEnv(t, a), testJob(repo, "stopped"))
		ch <- outcome{res, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.res.Generation != 2 || calls.Load() != 1 {
			t.Errorf("RunJob = %+v after %d launches; want generation 2, once", o.res, calls.Load())
		}
	case <-time.After(20 * time.Second):
		// A guard, not a wait for a child: attaching to the stopped
		// owner would wait for as long as it lives.
		t.Fatal("RunJob still waits on an owner that renews nothing, 20 s on")
	}
	if !alive(owner.Process.Pid, ownStart) {
		t.Error("the owner itself was ended; only its agent is the job's")
	}
}

// A run lives while any process of its tree does: an owner and a worker
// both gone, with a descendant of the worker that left its group
// (setsid'd) still alive with the run's id, is attached to, not taken
// over, until that descendant is gone.
func TestRunJobWaitsForARunsStrayDescendant(t *testing.T) {
	repo := pilottest.GitRepo(t)
	if _, ok := pidStart(os.Getpid()); !ok {
		t.Skip("no process start times here")
	}
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stray := exec.Command(os.Args[0], "-test.run=^$")
	stray.Env = append(os.Environ(), envBlockOnStdin+"=1", pilot.EnvRunID+"=run-with-a-stray")
	stray.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := stray.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		stray.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		<-exited
	})
	if len(runProcs("run-with-a-stray")) == 0 {
		t.Skip("no process environments to read here")
	}
	host, _ := os.Hostname()
	f := fence{repo: repo, job: "stray"}
	own := Owner{Job: "stray", Generation: 1, State: stateRunning, Host: host, Boot: bootID(),
		Pid: dead.Process.Pid, PidStart: 1, AgentPid: dead.Process.Pid, AgentStart: 1,
		RunID: "run-with-a-stray", LeaseMS: time.Hour.Milliseconds()}
	if _, err := f.swap(context.Background(), "", own); err != nil {
		t.Fatal(err)
	}
	calls := new(atomic.Int32)
	a := &Activities{Heartbeat: 100 * time.Millisecond, Dispatcher: pilottest.DispatchFunc(func(ctx context.Context, task pilot.Task) (pilot.Verdict, error) {
		calls.Add(1)
		select {
		case <-exited:
		default:
			t.Error("generation 2 launched while a process of generation 1's run lives")
		}
		return verdict(task, pilot.Completed, ""), commitIn(task)
	})}
	env := activityEnv(t, a)
	attached := make(chan struct{}, 1)
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p Progress
		if d.Get(&p) == nil && p.Phase == "attached" {
			select {
			case attached <- struct{}{}:
			default:
			}
		}
	})
	ch := make(chan outcome, 1)
	go func() {
		res, err := runJob(t, env, testJob(repo, "stray"))
		ch <- outcome{res, err}
	}()
	var o outcome
	select {
	case <-attached:
		stdin.Close() // the stray finishes
		o = <-ch
	case o = <-ch:
		t.Fatalf("RunJob = %+v, %v without attaching to the run whose stray lives", o.res, o.err)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.Generation != 2 || calls.Load() != 1 {
		t.Errorf("RunJob = %+v after %d launches; want generation 2, once", o.res, calls.Load())
	}
}
