package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/taskloop/loop"
	"github.com/pilotworkers/pilot/examples/taskloop/taskfile"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// secondLoopEnv makes the test binary a task loop of its own (see
// secondLoop): its value is a secondLoopConfig as JSON.
const secondLoopEnv = "TASKLOOP_TEST_SECOND_LOOP"

type secondLoopConfig struct {
	Workspace, State, Group string
}

// secondLoopOutput is what the second loop prints on stdout.
type secondLoopOutput struct {
	Report loop.Report
	Calls  []call
}

// secondLoop runs a task loop over the fake stage dispatcher in this
// process, prints its report and the attempts it made as JSON, and
// returns the report's exit code (1 when it cannot run).
func secondLoop(cfg string) int {
	var c secondLoopConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintln(os.Stderr, "second loop:", err)
		return 1
	}
	st, err := loop.OpenState(c.State, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "second loop:", err)
		return 1
	}
	defer st.Close()
	d := newFake(nil, func(_ context.Context, c call, _ int, pt pilot.Task) pilot.Verdict {
		if err := play(c); err != nil {
			return failed(pt, pilot.FailureClass("test-"+err.Error()))
		}
		return ok(pt)
	})
	l := &loop.Loop{Workspace: c.Workspace, Seed: testSeed(), Dispatcher: d, State: st,
		Policy: retry.Policy{Sleep: (&clock{}).sleep}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := l.Run(ctx, c.Group)
	if err != nil {
		fmt.Fprintln(os.Stderr, "second loop:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(secondLoopOutput{Report: rep, Calls: d.all()}); err != nil {
		return 1
	}
	return rep.ExitCode()
}

// stages is the stages the calls ran, by task.
func stages(calls []call) map[string][]string {
	out := map[string][]string{}
	for _, c := range calls {
		out[c.Task] = append(out[c.Task], c.Stage)
	}
	return out
}

// Two task loops on one repository share a group: this test's loop owns
// 01 (its worker waits until the test lets it go) when a second loop, a
// process of its own, starts. The second finds 01 external-active, drains
// 02, and exits 3 while the first still owns 01, its last task; the first
// then finishes 01 and finds 02 archived. Each task ran once, in one loop.
func TestTwoTaskLoopsShareAGroup(t *testing.T) {
	ws := workspace(t)
	addTask(t, ws, "g/01_first", "src/first.go")
	addTask(t, ws, "g/02_second", "src/second.go")
	stateDir := filepath.Join(t.TempDir(), "state")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	owning, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	d := newFake(t, func(ctx context.Context, c call, _ int, _ pilot.Task) pilot.Verdict {
		if c.Task == "g/01_first" && c.Stage == taskfile.StageWorker {
			once.Do(func() { close(owning) }) // the first loop owns 01 now
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return pilot.Verdict{} // the default: play the stage
	})
	first := &loop.Loop{Workspace: ws, Seed: testSeed(), Dispatcher: d, State: openState(t, stateDir),
		MaxParallel: 1, Policy: retry.Policy{Sleep: (&clock{}).sleep}}
	type ran struct {
		rep loop.Report
		err error
	}
	done := make(chan ran, 1)
	go func() {
		rep, err := first.Run(ctx, "g")
		done <- ran{rep, err}
	}()
	defer func() { letGo(); <-done }() // the loop's goroutine ends before the test does
	select {
	case <-owning:
	case r := <-done:
		t.Fatalf("the first loop ended before its worker of 01 ran: %+v, %v", r.rep, r.err)
	}

	cfg, _ := json.Marshal(secondLoopConfig{Workspace: ws, State: stateDir, Group: "g"})
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), secondLoopEnv+"="+string(cfg))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("second loop: %v, want exit 3\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
	}
	var second secondLoopOutput
	if err := json.Unmarshal(stdout, &second); err != nil {
		t.Fatalf("second loop's output: %v\n%s", err, stdout)
	}
	if second.Report.Status != "non-terminal" {
		t.Errorf("second loop's report %+v; want non-terminal", second.Report)
	}
	if tr := taskReport(t, second.Report, "g/01_first"); tr.Status != "external-active" || !strings.Contains(tr.Reason, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("01 in the second loop: %+v; want external-active, naming the first loop's pid %d", tr, os.Getpid())
	}
	archived := taskReport(t, second.Report, "g/02_second")
	if archived.Status != "complete" {
		t.Errorf("02 in the second loop: %+v; want complete", archived)
	}
	all := []string{taskfile.StageWorker, taskfile.StageSelfcheck, taskfile.StageReview}
	if diff := cmp.Diff(map[string][]string{"g/02_second": all}, stages(second.Calls)); diff != "" {
		t.Errorf("the second loop's attempts (-want +got):\n%s", diff)
	}

	letGo()
	r := <-done
	done <- r // for the deferred wait
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Status != "complete" || r.rep.ExitCode() != 0 {
		t.Errorf("first loop's report %+v; want complete, exit 0", r.rep)
	}
	if tr := taskReport(t, r.rep, "g/02_second"); tr.Status != "complete" || tr.Archive != archived.Archive {
		t.Errorf("02 in the first loop: %+v; want complete in the second loop's archive %s", tr, archived.Archive)
	}
	if diff := cmp.Diff(map[string][]string{"g/01_first": all}, stages(d.all())); diff != "" {
		t.Errorf("the first loop's attempts (-want +got):\n%s", diff)
	}
	// Both loops released their tasks: no owner is left in the store.
	data, err := os.ReadFile(filepath.Join(stateDir, schedule.StoreFileName))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Jobs map[string]json.RawMessage }
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Jobs) != 0 {
		t.Errorf("the store after both loops: %s (%v); want no jobs", data, err)
	}
}
