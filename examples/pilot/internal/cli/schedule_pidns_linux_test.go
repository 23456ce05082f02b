package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/worktrees"
)

// Two pilots, each in a pid namespace of its own (a container each, as
// `unshare -rpf --mount-proc` makes them: both are pid 1 there), share
// one graph, one state dir and one run dir. While the first runs a
// worktree job, held, the second runs what else it may and waits for
// held (its owner is not known dead: a pid of another namespace means
// nothing here); a reconcile and a prune from a third namespace (this
// test's) leave held's run, its worker and its worktree alone. At the
// end every job ran once. (Before, each pilot judged the other's pid 1
// by its own /proc: they ran every job twice, and a reconcile killed the
// other's worker.)
func TestScheduleTwoPilotsInTwoPidNamespaces(t *testing.T) {
	if out, err := exec.Command("unshare", "-rpf", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("no pid namespace can be made here (unshare -rpf --mount-proc: %v %s)", err, out)
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "running.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	release := filepath.Join(dir, "release")
	f := newFixture(t, nil)
	f.workdir = pilottest.GitRepo(t)
	provs := map[string]map[string]any{
		"held": fakeProvider(t, `append=log.txt=run\n`, "append="+filepath.Join(f.workdir, "ran", "held")+"=x",
			"session="+fifo, `sess={"running":true}`, "await="+release, "out=done"),
	}
	held := gjob("held", "held", f)
	held["worktree"] = true
	jobs := []map[string]any{held}
	for i, ws := range []string{"a.txt", "b.txt", "a.txt", "c.txt", "b.txt"} {
		id := fmt.Sprintf("j%d", i)
		provs[id] = fakeProvider(t, "lock="+filepath.Join(f.workdir, ws), "append="+filepath.Join(f.workdir, "ran", id)+"=x",
			"sleep=100ms", "out=done")
		j := gjob(id, id, f)
		j["write_set"] = []string{ws}
		jobs = append(jobs, j)
	}
	writeProviders(t, f.providers, provs)
	graph := f.writeGraph(t, jobs...)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type pilotCmd struct {
		cmd         *exec.Cmd
		out, errOut bytes.Buffer
	}
	start := func() *pilotCmd {
		p := &pilotCmd{cmd: exec.Command("unshare", append([]string{"-rpf", "--mount-proc", exe}, f.scheduleArgs(graph, "--max-parallel", "3")...)...)}
		p.cmd.Env = append(os.Environ(), envRunMain+"=1")
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				for _, k := range childrenOf(p.cmd.Process.Pid) {
					syscall.Kill(k, syscall.SIGKILL) // the namespace's init: its whole namespace dies
				}
				p.cmd.Wait()
			}
		})
		return p
	}
	wait := func(name string, p *pilotCmd) {
		t.Helper()
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3) {
			t.Errorf("%s: %v, want exit 0 or 3\n%s", name, err, p.errOut.String())
		}
		var vs []struct{ ID, Status string }
		if err := json.Unmarshal(p.out.Bytes(), &vs); err != nil {
			t.Errorf("%s's stdout is not its verdicts: %v\n%s", name, err, p.out.String())
		}
		for _, v := range vs {
			if v.Status == "failed" {
				t.Errorf("%s: job %s failed (a worker found a file of its write set locked by another?)\n%s", name, v.ID, p.errOut.String())
			}
		}
	}

	first := start()
	awaitRunning(t, fifo) // held runs
	second := start()

	// held's run and worktree, as this namespace sees them.
	// Its worker may run before its pilot has written the record that
	// says so; nothing signals that: look until it has.
	var heldRun string
	var workers []int
	for deadline := time.Now().Add(time.Minute); heldRun == "" || len(workers) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("held's run %q, its processes %v: want it running", heldRun, workers)
		}
		runs, _ := os.ReadDir(f.runDir)
		for _, e := range runs {
			rec, err := pilot.ReadRecord(filepath.Join(f.runDir, e.Name(), "record.json"))
			if err == nil && rec.Label == "held" && rec.Status == "running" {
				heldRun = rec.RunID
			}
		}
		workers = pilottest.Alive(heldRun)
	}
	entries, err := worktrees.List(f.runDir)
	if err != nil || len(entries) != 1 || entries[0].State != "active" {
		t.Fatalf("worktrees: %+v, %v; want held's, active", entries, err)
	}
	if code, out, errOut := runCLI("runs", "--reconcile", "--run-dir", f.runDir, "--json"); code != 0 {
		t.Errorf("runs --reconcile: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("worktrees", "prune", "--run-dir", f.runDir); code != 0 {
		t.Errorf("worktrees prune: exit %d\n%s\n%s", code, out, errOut)
	}
	if rec, err := pilot.ReadRecord(filepath.Join(f.runDir, heldRun, "record.json")); err != nil || rec.Status != "running" {
		t.Errorf("held's record after a reconcile from another namespace: %s, %v; want running", rec.Status, err)
	}
	if left := pilottest.Alive(heldRun); !slices.Equal(left, workers) {
		t.Errorf("held's processes: %v before the reconcile and prune, %v after", workers, left)
	}
	if _, err := os.Stat(entries[0].Path); err != nil {
		t.Errorf("held's worktree after a prune from another namespace: %v", err)
	}
	if after, err := worktrees.List(f.runDir); err != nil || len(after) != 1 || after[0].State != "active" {
		t.Errorf("worktrees after a prune from another namespace: %+v, %v; want held's as it was, active", after, err)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wait("the first pilot", first)
	wait("the second pilot", second)
	if code, out, errOut := runCLI(f.scheduleArgs(graph)...); code != 0 {
		t.Errorf("a pilot after them: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, j := range jobs {
		id := j["id"].(string)
		if data, err := os.ReadFile(filepath.Join(f.workdir, "ran", id)); err != nil || string(data) != "x" {
			t.Errorf("job %s ran %d times (%v), want once", id, len(data), err)
		}
	}
}

// childrenOf lists pid's child processes.
func childrenOf(pid int) []int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		var k int
		fmt.Sscan(f, &k)
		out = append(out, k)
	}
	return out
}
