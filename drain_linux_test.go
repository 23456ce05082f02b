package pilot_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// A worker prints its last lines and exits while pilot's reader is far
// behind, as on a machine too busy to run it: what waits in the pipes is
// output the tree wrote, and pilot reads it whole however late it gets to
// it. (Before, pilot read for at most the wait delay after the tree was
// gone and judged what it had: a result line still in the pipe was lost,
// and a finished run was judged incomplete.)
func TestOutputLeftInThePipesIsReadBehindASlowReader(t *testing.T) {
	release := filepath.Join(t.TempDir(), "go")
	p := fakeProvider(t, "slow", "out=first", "await="+release, "out=last line", "err=last on stderr")
	d := testDispatcher(t, p)
	d.WaitDelay = 50 * time.Millisecond
	pids := make(chan int, 1)
	d.Observer = func(e pilot.Event) {
		if e.Started != nil {
			pids <- e.Started.Pid
		}
	}
	d.OnLine = onLine("first", func(string) {
		// The stdout reader stops here, on the worker's first line,
		// until the worker has printed the rest and exited and many
		// wait delays have passed.
		pid := <-pids
		if err := os.WriteFile(release, nil, 0o600); err != nil {
			t.Error(err)
		}
		if left := waitGone(t, []int{pid}, time.Minute); len(left) > 0 {
			t.Errorf("worker %d still runs", pid)
		}
		time.Sleep(10 * d.WaitDelay) // the lag itself, not a wait for a process
	})
	v, err := d.Dispatch(context.Background(), task("slow"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != pilot.Completed || v.OutputIncomplete {
		t.Errorf("verdict %s, output incomplete %v; want completed with the output whole", v.Verdict, v.OutputIncomplete)
	}
	stream, err := os.ReadFile(readRecord(t, v).StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"out first\n", "out last line\n", "err last on stderr\n"} {
		if !strings.Contains(string(stream), want) {
			t.Errorf("stream.log lacks %q:\n%s", want, stream)
		}
	}
}

// heldOutput listens on a Unix socket for a worker's passfds step and
// returns its path and the worker's stdout and stderr once handed over.
func heldOutput(t *testing.T) (path string, held <-chan []*os.File) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "fds.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []*os.File, 1)
	go func() {
		defer close(ch)
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close() // the worker goes on once this closes
		buf, oob := make([]byte, 8), make([]byte, 64)
		_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Error(err)
			return
		}
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			t.Errorf("control messages %v: %v", msgs, err)
			return
		}
		fds, err := syscall.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 2 {
			t.Errorf("descriptors %v: %v", fds, err)
			return
		}
		files := []*os.File{os.NewFile(uintptr(fds[0]), "held stdout"), os.NewFile(uintptr(fds[1]), "held stderr")}
		t.Cleanup(func() {
			for _, f := range files {
				f.Close()
			}
		})
		ch <- files
	}()
	return path, ch
}

// A hostile worker hands its output pipes to a process outside its tree,
// which pilot cannot kill, and exits. Pilot reads what the worker wrote,
// waits the wait delay on the quiet pipes, stops reading them, and says
// the output is incomplete: the pipes are closed on pilot's side.
func TestAPipeHeldOpenOutsideTheTreeIsCutOff(t *testing.T) {
	sock, held := heldOutput(t)
	p := fakeProvider(t, "holder", "out=before", "passfds="+sock, "out=after")
	d := testDispatcher(t, p)
	d.WaitDelay = 50 * time.Millisecond
	v, err := d.Dispatch(context.Background(), task("holder"))
	if err != nil {
		t.Fatal(err)
	}
	files := <-held
	if files == nil {
		t.Fatal("the worker handed over no descriptors")
	}
	if v.Verdict != pilot.Completed || !v.OutputIncomplete {
		t.Errorf("verdict %s, output incomplete %v; want completed, output incomplete", v.Verdict, v.OutputIncomplete)
	}
	if _, err := files[0].Write([]byte("late\n")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("writing the held stdout after the verdict: %v, want EPIPE (pilot closed its end)", err)
	}
	stream, err := os.ReadFile(readRecord(t, v).StreamLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stream), "out before\n") || !strings.Contains(string(stream), "out after\n") {
		t.Errorf("stream.log lacks the worker's lines:\n%s", stream)
	}
}

// The same, but the process outside the tree writes without pause: pilot
// does not read it forever. It stops at 15 wait delays after the tree is
// gone and says the output is incomplete.
func TestAPipeWrittenOutsideTheTreeIsReadForABoundedTime(t *testing.T) {
	sock, held := heldOutput(t)
	p := fakeProvider(t, "writer", "out=before", "passfds="+sock)
	d := testDispatcher(t, p)
	d.WaitDelay = 20 * time.Millisecond
	stop := make(chan struct{})
	wrote := make(chan int)
	go func() {
		n := 0
		defer func() { wrote <- n }()
		files := <-held
		if files == nil {
			return
		}
		line := []byte("noise from outside the tree\n")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := files[0].Write(line); err != nil {
				return // EPIPE: pilot closed its end
			}
			n++
		}
	}()
	v, err := d.Dispatch(context.Background(), task("writer"))
	close(stop)
	n := <-wrote
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != pilot.Completed || !v.OutputIncomplete {
		t.Errorf("verdict %s, output incomplete %v; want completed, output incomplete", v.Verdict, v.OutputIncomplete)
	}
	if n == 0 {
		t.Error("the outside writer wrote nothing")
	}
}
