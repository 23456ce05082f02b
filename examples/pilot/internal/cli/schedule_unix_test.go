//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot/pilottest"
)

// Two pilots on one graph and one state dir: while the first runs the
// shared job, the second does not start it, and exits 3 (the group is not
// over); the shared job ran once. Real processes, a real FIFO for the
// worker to say it runs.
func TestScheduleTwoPilotsShareAJobOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "running.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	release := filepath.Join(dir, "release")
	f := newFixture(t, map[string][]string{
		"held": {"session=" + fifo, `sess={"running":true}`, "await=" + release, "out=done"},
	})
	graph := f.writeGraph(t, gjob("shared", "held", f))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	first := exec.Command(exe, f.scheduleArgs(graph)...)
	first.Env = append(os.Environ(), envRunMain+"=1")
	var firstOut, firstErr bytes.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if first.ProcessState == nil {
			first.Process.Kill()
			first.Wait()
		}
	}()
	// The worker writes to the FIFO once it runs: reading it waits for that.
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if !strings.Contains(line, "running") {
		t.Fatalf("the worker said %q", line)
	}

	second := exec.Command(exe, f.scheduleArgs(graph)...)
	second.Env = append(os.Environ(), envRunMain+"=1")
	out, err := second.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second pilot: %v, want exit 3\n%s", err, out)
	}
	if !strings.Contains(string(out), `"status":"external-active"`) {
		t.Errorf("second pilot's verdicts: %s", out)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first pilot: %v\n%s\n%s", err, firstOut.String(), firstErr.String())
	}
	if !strings.Contains(firstOut.String(), `"status":"complete"`) {
		t.Errorf("first pilot's verdicts: %s", firstOut.String())
	}
	if runs, _ := os.ReadDir(f.runDir); len(runs) != 1 {
		t.Errorf("%d run dirs, want 1: the shared job ran once", len(runs))
	}
}

// TestScheduleInterrupted is Ctrl-C: a real SIGINT to a running
// "pilot schedule" process once its first job runs. With one slot, a
// runs, c waits for the slot and never gets it, and b waits on a. Both a
// and c are interrupted, as fanout says (status and summary), and b says
// it waits on a because a was interrupted; stderr a pipe (the JSON), then
// a terminal (the summary).
func TestScheduleInterrupted(t *testing.T) {
	for _, onTerminal := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipe", true: "terminal"}[onTerminal], func(t *testing.T) {
			f := newFixture(t, map[string][]string{"w": {"out=x", "block"}})
			graph := f.writeGraph(t, gjob("a", "w", f), gjob("b", "w", f, "a"), gjob("c", "w", f))
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe, f.scheduleArgs(graph, "--max-parallel", "1", "--timeout", "120")...)
			cmd.Env = append(os.Environ(), envRunMain+"=1", "TERM=xterm", "NO_COLOR=1")
			var out bytes.Buffer
			cmd.Stdout = &out
			var term *terminal
			var stderr io.Reader
			var pts *os.File
			if onTerminal {
				var ptm *os.File
				ptm, pts = openPTY(t, 150, 40)
				defer ptm.Close()
				term = readTerminal(ptm)
				cmd.Stderr = pts
			} else if stderr, err = cmd.StderrPipe(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan struct{})
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					cmd.Wait()
				}
			}()
			// a runs: its started line says so, or its row.
			var rest bytes.Buffer
			if onTerminal {
				term.waitFor(t, regexp.MustCompile(`a +w:code +running .*\r\n.*\r\n3 +c +w:code +waiting +- +- +waiting for a slot \(--max-parallel 1\)\r\n`), ended)
			} else {
				sc := bufio.NewScanner(stderr)
				for !strings.Contains(rest.String(), `"type":"worker_runner.started"`) && sc.Scan() {
					rest.WriteString(sc.Text() + "\n")
				}
				if !strings.Contains(rest.String(), `"type":"worker_runner.started"`) {
					t.Fatalf("stderr ended before a started:\n%s", rest.String())
				}
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if stderr != nil {
				io.Copy(&rest, stderr)
			}
			err = cmd.Wait()
			close(ended)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("pilot schedule after SIGINT: %v, want exit status 1 (stderr %q)", err, rest.String())
			}
			var vs []map[string]any
			if err := json.Unmarshal(out.Bytes(), &vs); err != nil || len(vs) != 3 {
				t.Fatalf("stdout: %v\n%s", err, out.String())
			}
			type row struct{ ID, Status, Class, Why string }
			var got []row
			for _, v := range vs {
				class, _ := v["failure_class"].(string)
				why, _ := v["waiting_reason"].(string)
				if v["status"] == "interrupted" && v["interrupted"] != true {
					t.Errorf("job %v: interrupted without interrupted: true: %v", v["id"], v)
				}
				got = append(got, row{v["id"].(string), v["status"].(string), class, why})
			}
			want := []row{
				{"a", "interrupted", "cancelled", ""},
				{"b", "waiting", "", "waiting on a because a was interrupted"},
				{"c", "interrupted", "cancelled", ""},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
			if id, _ := vs[0]["run_id"].(string); id == "" {
				t.Errorf("a never ran: %v", vs[0])
			} else if left := pilottest.Alive(id); len(left) > 0 {
				t.Errorf("run %s: processes %v still alive", id, left)
			}
			if !onTerminal {
				return
			}
			pts.Close()
			<-term.done
			screen := strings.Join(screenOf(t, term.String()), "\n")
			screen = regexp.MustCompile(`\b\d+(m\d\d)?s\b`).ReplaceAllString(screen, "Ns")
			wantScreen := `pilot schedule: 3 job(s) in Ns: 0 succeeded, 0 failed, 2 interrupted, 1 waiting
#  JOB  WORKER  VERDICT             TIME  WORKTREE
1  a    w:code  error (cancelled)     Ns  -
   ↳ interrupted
2  b    w:code  waiting                -  -
   ↳ waiting on a because a was interrupted
3  c    w:code  error (cancelled)      -  -
   ↳ interrupted`
			if diff := cmp.Diff(wantScreen, screen); diff != "" {
				t.Errorf("the screen at the end (-want +got):\n%s\nraw: %q", diff, term.String())
			}
		})
	}
}
