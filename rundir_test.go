package pilot_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// The first dispatch into a run directory closes out the runs a killed
// pilot left saying "running": they become "abandoned", with the proof.
func TestTheFirstDispatchClosesOutAKilledPilotsRuns(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "ok", "out=hi"))
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	dir := filepath.Join(d.RunDir, "20260101T000000.000000Z-ok-deadbeef")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := map[string]any{"run_id": filepath.Base(dir), "provider": "ok", "status": "running", "dispatcher_pid": gone.Process.Pid,
		"started_at": time.Now().Add(-time.Minute).UTC(), "mystery_field": 7}
	data, _ := json.Marshal(rec)
	path := filepath.Join(dir, "record.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, ".record.json.tmp-123")
	os.WriteFile(temp, []byte("{"), 0o600)
	dispatch(t, d, task("ok"))
	got, err := pilot.ReadRecord(path)
	if err != nil || got.Status != "abandoned" || got.EndedAt == nil || got.EvidenceExcerpt == "" {
		t.Errorf("the killed pilot's record: %+v, %v; want abandoned, ended, with the proof", got, err)
	}
	raw, _ := os.ReadFile(path)
	var m map[string]any
	json.Unmarshal(raw, &m)
	if m["mystery_field"] != 7.0 {
		t.Errorf("a field pilot does not know was lost: %s", raw)
	}
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Errorf("the killed pilot's temp file is still there: %v", err)
	}
}
