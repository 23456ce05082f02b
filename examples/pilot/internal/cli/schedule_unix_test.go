//go:build unix

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

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
	awaitRunning(t, fifo)

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
	// The run directories, the group logs' .groups aside.
	runs, _ := filepath.Glob(filepath.Join(f.runDir, "[^.]*"))
	if len(runs) != 1 {
		t.Errorf("%d run dirs (%q), want 1: the shared job ran once", len(runs), runs)
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

// Two real "pilot schedule" processes started at once on one random graph
// and one state dir, round after round, then a third to finish what the
// two left (a job one pilot saw the other run is external-active to it,
// so its dependents wait there): every job ran exactly once, and no two
// jobs whose write sets overlap ran at once — across the two pilots too.
// Each worker takes a lock on every file of its write set without waiting
// (a worker beside another that writes the same file fails, naming it),
// holds them a little while, and appends to ran/ID.
func TestScheduleTwoPilotsRandomGraphs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	files := []string{"a.txt", "b.txt", "c.txt"}
	for round := range 3 {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) {
			n := 5 + rng.IntN(5)
			scripts := map[string][]string{}
			var jobs []map[string]any
			f := newFixture(t, nil)
			for i := range n {
				id := fmt.Sprintf("j%d", i)
				var ws []string
				for _, file := range files {
					if rng.IntN(3) == 0 {
						ws = append(ws, file)
					}
				}
				if len(ws) == 0 {
					ws = []string{files[rng.IntN(len(files))]}
				}
				var deps []string
				for d := range i {
					if rng.IntN(4) == 0 {
						deps = append(deps, fmt.Sprintf("j%d", d))
					}
				}
				var script []string
				for _, file := range ws {
					script = append(script, "lock="+filepath.Join(f.workdir, file))
				}
				script = append(script, "append="+filepath.Join(f.workdir, "ran", id)+"=x", fmt.Sprintf("sleep=%dms", 150+rng.IntN(250)), "out=done")
				scripts[id] = script
				j := gjob(id, id, f, deps...)
				j["write_set"] = ws
				jobs = append(jobs, j)
			}
			provs := map[string]map[string]any{}
			for id, script := range scripts {
				provs[id] = fakeProvider(t, script...)
			}
			writeProviders(t, f.providers, provs)
			graph := f.writeGraph(t, jobs...)
			args := f.scheduleArgs(graph, "--max-parallel", "2")
			type result struct {
				code int
				out  string
			}
			type pilotCmd struct {
				cmd         *exec.Cmd
				out, errOut bytes.Buffer
			}
			start := func() *pilotCmd {
				p := &pilotCmd{cmd: exec.Command(exe, args...)}
				p.cmd.Env = append(os.Environ(), envRunMain+"=1")
				p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
				if err := p.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				return p
			}
			// wait returns how the pilot exited, and says so when any of
			// its jobs failed: a worker found a file of its write set
			// locked by another.
			wait := func(p *pilotCmd) result {
				err := p.cmd.Wait()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					t.Fatal(err)
				}
				var vs []struct{ ID, Status string }
				if err := json.Unmarshal(p.out.Bytes(), &vs); err != nil {
					t.Errorf("a pilot's stdout is not its verdicts: %v\n%s", err, p.out.String())
				}
				for _, v := range vs {
					if v.Status != "complete" && v.Status != "external-active" && v.Status != "waiting" {
						t.Errorf("job %s: %s, want complete, external-active or waiting: no worker may find its files locked by another\n%s", v.ID, v.Status, p.errOut.String())
					}
				}
				return result{p.cmd.ProcessState.ExitCode(), p.errOut.String()}
			}
			a, b := start(), start()
			for _, r := range []result{wait(a), wait(b)} {
				if r.code != 0 && r.code != 3 {
					t.Errorf("a pilot beside another exited %d, want 0 or 3 (complete, or another pilot's job still ran):\n%s", r.code, r.out)
				}
			}
			if r := wait(start()); r.code != 0 {
				t.Errorf("the pilot after them exited %d, want 0:\n%s", r.code, r.out)
			}
			for i := range n {
				id := fmt.Sprintf("j%d", i)
				data, err := os.ReadFile(filepath.Join(f.workdir, "ran", id))
				if err != nil || string(data) != "x" {
					t.Errorf("job %s ran %d times (%v), want once", id, len(data), err)
				}
			}
		})
	}
}

// A pilot SIGKILLed while its worktree job runs leaves the job's worktree
// active, with the worker's work uncommitted in it. The next pilot takes
// the job over: it commits what the dead run left on that worktree's
// branch, starts the job's new worktree from it, and the job's branch at
// the end holds both runs' work. (Before, the dead run's work stayed
// uncommitted in a worktree nobody owned.)
func TestScheduleTakesOverADeadPilotsWorktreeJob(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "running.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	release := filepath.Join(dir, "release")
	f := newFixture(t, map[string][]string{
		"w": {`append=log.txt=run\n`, "session=" + fifo, `sess={"running":true}`, "await=" + release, "out=done"},
	})
	f.workdir = pilottest.GitRepo(t)
	j := gjob("job", "w", f)
	j["worktree"] = true
	graph := f.writeGraph(t, j)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	first := exec.Command(exe, f.scheduleArgs(graph)...)
	first.Env = append(os.Environ(), envRunMain+"=1")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	awaitRunning(t, fifo)
	runs, _ := os.ReadDir(f.runDir)
	var runID string
	for _, e := range runs {
		if !strings.HasPrefix(e.Name(), ".") {
			runID = e.Name()
		}
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	// The dead pilot's supervisor ends its worker; nothing signals when,
	// so look until it is gone.
	for deadline := time.Now().Add(time.Minute); len(pilottest.Alive(runID)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("run %s: its worker outlived its pilot by a minute: %v", runID, pilottest.Alive(runID))
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(f.scheduleArgs(graph)...)
	var vs []scheduledVerdict
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 1 {
		t.Fatalf("the second pilot: exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	w := vs[0].Worktree
	if vs[0].Status != "complete" || w == nil || !w.Kept {
		t.Fatalf("the job: %+v; want complete, its worktree kept", vs[0])
	}
	if got := gitIn(t, f.workdir, "show", w.Branch+":log.txt"); got != "run\nrun" {
		t.Errorf("log.txt on the job's branch %s = %q, want both runs' lines: the second run started from the first's work", w.Branch, got)
	}
	branches := strings.Fields(strings.ReplaceAll(gitIn(t, f.workdir, "branch", "--format=%(refname:short)", "--list", "pilot/*"), "\n", " "))
	var dead string
	for _, b := range branches {
		if b != w.Branch {
			dead = b
		}
	}
	if dead == "" {
		t.Fatalf("branches %v: want the dead run's beside the job's", branches)
	}
	if got := gitIn(t, f.workdir, "show", dead+":log.txt"); got != "run" {
		t.Errorf("log.txt on the dead run's branch %s = %q, want its line, committed when the job was taken over", dead, got)
	}
	if msg := gitIn(t, f.workdir, "log", "-1", "--format=%s", dead); !strings.Contains(msg, "taken over from a dead pilot") {
		t.Errorf("the dead run's commit says %q", msg)
	}
}

// awaitRunning waits until a worker writes its "running" line to the FIFO
// fifo, as the scripts above do once they run: reading it waits for that.
// The FIFO is then replaced by a plain file, so that a later worker's
// write to it (another run of the job) never blocks on a FIFO nobody
// reads.
func awaitRunning(t *testing.T, fifo string) {
	t.Helper()
	r, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if !strings.Contains(line, "running") {
		t.Fatalf("the worker said %q", line)
	}
	os.Remove(fifo)
	if err := os.WriteFile(fifo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
