package schedule_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/schedule"
)

func TestMain(m *testing.M) {
	if os.Getenv("SCHEDULE_TEST_BLOCK") != "" {
		os.Stdout.WriteString("ready\n")
		select {} // a live owner until killed
	}
	pilottest.Main(m)
}

// liveProcess starts a child that stays alive until the test ends, and
// returns its pid once it runs.
func liveProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SCHEDULE_TEST_BLOCK=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil { // it says "ready"
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// goneProcess is the pid of a process that has exited.
func goneProcess(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

type record struct {
	Status     string    `json:"status"`
	Pid        int       `json:"pid"`
	Start      uint64    `json:"start,omitempty"`
	AgentPid   int       `json:"agent_pid,omitempty"`
	AgentStart uint64    `json:"agent_start,omitempty"`
	StreamLog  string    `json:"stream_log,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	Reason     string    `json:"reason,omitempty"`
	Def        string    `json:"def,omitempty"`
}

func writeStore(t *testing.T, path string, jobs map[string]record) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"version": 1, "jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readStore(t *testing.T, path string) map[string]record {
	t.Helper()
	var doc struct{ Jobs map[string]record }
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Jobs
}

// recordingDispatch completes every job and records which ran.
func recordingDispatch() (pilot.TaskDispatcher, func() []string) {
	var mu sync.Mutex
	var ran []string
	return pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
			mu.Lock()
			ran = append(ran, tk.Label)
			mu.Unlock()
			return ok(ctx, tk)
		}), func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), ran...)
		}
}

// The seed's test_external_active_task_returns_non_terminal_exit_three: a
// job another live pilot owns (its pid and start time name a running
// process) is not started; what depends on it waits; the group is not over.
func TestAJobALivePilotOwnsIsNeverStartedTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	pid := liveProcess(t)
	start, _ := procfs.StartTime(pid)
	writeStore(t, path, map[string]record{"shared": {Status: "running", Pid: pid, Start: start}})
	store, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	d, ran := recordingDispatch()
	s := &schedule.Scheduler{Dispatcher: d, Store: store}
	rs := run(t, s, schedule.Graph{Jobs: []schedule.Job{job("shared"), job("after", "shared"), job("mine")}})
	if got := ran(); !cmp.Equal(got, []string{"mine"}) {
		t.Errorf("ran %q, want only mine", got)
	}
	if rs[0].Status != schedule.StatusExternalActive || !strings.Contains(rs[0].BlockedReason, "agent pid") && !strings.Contains(rs[0].BlockedReason, "pilot pid") {
		t.Errorf("shared: %v; want external-active naming the live owner", rs[0])
	}
	if rs[1].Status != schedule.StatusWaiting || schedule.GroupStatus(rs) != "non-terminal" {
		t.Errorf("after: %v, group %s; want waiting, non-terminal", rs[1], schedule.GroupStatus(rs))
	}
	if got := readStore(t, path); got["shared"].Pid != pid || got["mine"].Status != "complete" {
		t.Errorf("store %+v: the live owner's record must stand, mine must be complete", got)
	}
}

// Liveness is the owner's pid with its start time (a reused pid is another
// process), or its stream log moving within the stall window; a stale
// record is taken over and marked so. Two cases are the seed's
// OrchestrationPersistenceTest tests, named after them.
func TestOwnerLiveness(t *testing.T) {
	live := liveProcess(t)
	liveStart, _ := procfs.StartTime(live)
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh-stream.log")
	old := filepath.Join(dir, "old-stream.log")
	heartbeat := filepath.Join(dir, "events.log")
	for _, f := range []string{fresh, old, heartbeat} {
		if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stale := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, stale, stale); err != nil {
		t.Fatal(err)
	}
	gone := goneProcess(t)
	for _, tt := range []struct {
		name     string
		rec      record
		external bool
		why      string // what the blocked reason of an external job names
	}{
		{"live pilot", record{Status: "running", Pid: live, Start: liveStart}, true, "pilot pid"},
		// The seed's test_external_liveness_keeps_silent_live_agent_process:
		// the agent has been silent past the stall window, its process
		// runs.
		{"ExternalLivenessKeepsSilentLiveAgentProcess", record{Status: "running", Pid: gone, AgentPid: live, AgentStart: liveStart, StreamLog: old}, true, "agent pid"},
		{"reused pid: another start time", record{Status: "running", Pid: live, Start: liveStart + 1}, false, ""},
		// The second half of the seed's heartbeat test below: the stream
		// log itself moving does count.
		{"gone pilot, stream moving", record{Status: "running", Pid: gone, StreamLog: fresh}, true, "stream log moved"},
		// The seed's test_external_liveness_ignores_heartbeat_mtime: the
		// events log (pilot's heartbeat) beside the still stream was just
		// written; it does not count.
		{"ExternalLivenessIgnoresHeartbeatMtime", record{Status: "running", Pid: gone, StreamLog: old}, false, ""},
		{"complete in an earlier run", record{Status: "complete", Pid: gone, Def: schedule.Definition(job("j"))}, false, ""},
		// A completion of another definition: the job changed since.
		{"complete as another definition", record{Status: "complete", Pid: gone, Def: "0123456789abcdef01234567"}, false, ""},
		// A record that keeps no start time (a pilot before start times
		// were kept): its pid, alive now, is its owner's while that
		// process started before the record was written, and another
		// process's (the pid was reused) when it started after.
		{"no start time, pid alive since before the record", record{Status: "running", Pid: live, UpdatedAt: time.Now()}, true, "pilot pid"},
		{"no start time, pid reused after the record", record{Status: "running", Pid: live, UpdatedAt: stale}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), schedule.StoreFileName)
			writeStore(t, path, map[string]record{"j": tt.rec})
			store, err := schedule.OpenStore(path, false)
			if err != nil {
				t.Fatal(err)
			}
			d, ran := recordingDispatch()
			rs := run(t, &schedule.Scheduler{Dispatcher: d, Store: store}, schedule.Graph{Jobs: []schedule.Job{job("j")}})
			switch {
			case tt.external:
				if rs[0].Status != schedule.StatusExternalActive || len(ran()) != 0 || !strings.Contains(rs[0].BlockedReason, tt.why) {
					t.Errorf("%v, ran %q; want external-active for its %s, not run", rs[0], ran(), tt.why)
				}
			case tt.rec.Status == "complete" && tt.rec.Def == schedule.Definition(job("j")):
				if rs[0].Status != schedule.StatusComplete || len(ran()) != 0 {
					t.Errorf("%v, ran %q; want complete without running again", rs[0], ran())
				}
			default:
				if rs[0].Status != schedule.StatusComplete || len(ran()) != 1 {
					t.Errorf("%v, ran %q; want taken over and run once", rs[0], ran())
				}
				if rec := readStore(t, path)["j"]; rec.Status != "complete" || rec.Pid != os.Getpid() {
					t.Errorf("record %+v; want complete, owned by this process", rec)
				}
			}
		})
	}
}

// A store file that is not one fails closed, naming the file and the fix;
// a dry-run store writes nothing.
func TestStoreFailsClosedAndDryRunWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.OpenStore(path, false); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("OpenStore(corrupt) = %v; want an error naming the file and the fix", err)
	}
	dry := filepath.Join(t.TempDir(), "state", schedule.StoreFileName)
	store, err := schedule.OpenStore(dry, true)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := recordingDispatch()
	run(t, &schedule.Scheduler{Dispatcher: d, Store: store}, schedule.Graph{Jobs: []schedule.Job{job("a")}})
	if _, err := os.Stat(filepath.Dir(dry)); !os.IsNotExist(err) {
		t.Errorf("a dry run created %s (%v)", filepath.Dir(dry), err)
	}
}
