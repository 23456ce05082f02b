package schedule_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/internal/procfs"
	"github.com/pilotworkers/pilot/schedule"
)

// A caller that runs its jobs itself claims them as a Scheduler does: a
// job another live process owns is refused with who owns it, a dead
// owner's is taken over, and Release either records the job complete or
// lets another claim it.
func TestClaimStartedRelease(t *testing.T) {
	live := liveProcess(t)
	liveStart, _ := procfs.StartTime(live)
	gone := goneProcess(t)
	path := filepath.Join(t.TempDir(), schedule.StoreFileName)
	writeStore(t, path, map[string]record{
		"theirs": {Status: "running", Pid: live, Start: liveStart},
		"dead":   {Status: "running", Pid: gone},
	})
	store, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	claimed, holder, err := store.Claim("theirs", now)
	if err != nil || claimed || !strings.Contains(holder, "pilot pid") {
		t.Errorf("Claim(theirs) = %v, %q, %v; want refused, naming the live owner", claimed, holder, err)
	}
	if rec := readStore(t, path)["theirs"]; rec.Pid != live {
		t.Errorf("the live owner's record changed: %+v", rec)
	}

	claimed, _, err = store.Claim("dead", now)
	if err != nil || !claimed {
		t.Fatalf("Claim(dead) = %v, %v; want taken over", claimed, err)
	}
	if rec := readStore(t, path)["dead"]; rec.Pid != os.Getpid() || !strings.Contains(rec.Reason, "took over") {
		t.Errorf("taken-over record %+v; want this process's, saying it took over", rec)
	}

	stream := filepath.Join(t.TempDir(), "stream.log")
	if err := store.Started("dead", live, stream, now); err != nil {
		t.Fatal(err)
	}
	if rec := readStore(t, path)["dead"]; rec.AgentPid != live || rec.AgentStart != liveStart || rec.StreamLog != stream {
		t.Errorf("after Started: %+v; want the worker's pid, start time and stream log", rec)
	}
	if err := store.Release("dead", false, now); err != nil {
		t.Fatal(err)
	}
	if rec, ok := readStore(t, path)["dead"]; ok {
		t.Errorf("released without completing, the record stays: %+v", rec)
	}

	if claimed, _, err := store.Claim("mine", now); err != nil || !claimed {
		t.Fatalf("Claim(mine) = %v, %v", claimed, err)
	}
	if err := store.Release("mine", true, now); err != nil {
		t.Fatal(err)
	}
	if rec := readStore(t, path)["mine"]; rec.Status != "complete" {
		t.Errorf("released complete: %+v", rec)
	}

	// Another's job is not this process's to release.
	if err := store.Release("theirs", false, now); err != nil {
		t.Fatal(err)
	}
	if rec := readStore(t, path)["theirs"]; rec.Pid != live || rec.Status != "running" {
		t.Errorf("Release of another's job changed it: %+v", rec)
	}
}

// A writer killed mid-write leaves its temporary file beside the state
// file; the next change, under the lock every writer takes, removes it.
func TestStoreRemovesAKilledWritersTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, schedule.StoreFileName)
	orphan := filepath.Join(dir, "."+schedule.StoreFileName+".tmp-12345")
	if err := os.WriteFile(orphan, []byte(`{"version": 1, "jobs": {"half`), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.tmp-1") // not a temporary of the store's
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := schedule.OpenStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := st.Claim("a", time.Now()); !ok || err != nil {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphaned temporary file is still there (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another file was removed: %v", err)
	}
}
