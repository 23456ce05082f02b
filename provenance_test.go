package pilot_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/procfs"
)

const envProvenanceChild = "PILOT_TEST_PROVENANCE_CHILD"

// provenanceChild prints its provenance as JSON, waits for a line on
// stdin, and prints it again.
func provenanceChild() int {
	enc := json.NewEncoder(os.Stdout)
	enc.Encode(pilot.CurrentProvenance())
	bufio.NewReader(os.Stdin).ReadString('\n')
	enc.Encode(pilot.CurrentProvenance())
	return 0
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// The seed's test_dispatcher_source_provenance_detects_hot_edit: a binary
// replaced on disk while it runs is noticed, and the provenance keeps the
// hash of the code that actually ran.
func TestDispatcherSourceProvenanceDetectsHotEdit(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "dispatcher")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(copyPath, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	src.Close()
	dst.Close()
	loadedSum := fileSHA256(t, copyPath)

	cmd := exec.Command(copyPath)
	cmd.Env = append(os.Environ(), envProvenanceChild+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	dec := json.NewDecoder(stdout)
	var before, after pilot.Provenance
	if err := dec.Decode(&before); err != nil {
		t.Fatal(err)
	}
	// Its identity: its start in ticks after boot, and this system's
	// boot, pid namespace and host, which it shares.
	id := procfs.Self()
	ticks, _ := procfs.StartTime(cmd.Process.Pid)
	want := pilot.Provenance{
		Pid:                 cmd.Process.Pid,
		Start:               ticks,
		BootID:              id.BootID,
		PidNamespace:        id.PidNamespace,
		Host:                id.Host,
		SourcePath:          copyPath,
		SourceSHA256:        loadedSum,
		CurrentSHA256:       loadedSum,
		SourceMatchesLoaded: true,
	}
	ignoreBuild := func(p pilot.Provenance) pilot.Provenance {
		p.Module, p.Version, p.PilotVersion, p.VCSRevision, p.VCSModified = "", "", "", "", false
		return p
	}
	if diff := cmp.Diff(want, ignoreBuild(before)); diff != "" {
		t.Errorf("provenance before the replacement (-want +got):\n%s", diff)
	}

	// Replace the file at the path, as a rebuild or an upgrade would.
	next := filepath.Join(dir, "next")
	if err := os.WriteFile(next, []byte("#!/bin/sh\necho a newer build\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, copyPath); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin)
	if err := dec.Decode(&after); err != nil {
		t.Fatal(err)
	}
	want.CurrentSHA256 = fileSHA256(t, copyPath)
	want.SourceMatchesLoaded = false
	if diff := cmp.Diff(want, ignoreBuild(after)); diff != "" {
		t.Errorf("provenance after the replacement (-want +got):\n%s", diff)
	}
}

func TestRecordCarriesProvenance(t *testing.T) {
	d := testDispatcher(t, fakeProvider(t, "fake", "out=hi"))
	rec := readRecord(t, dispatch(t, d, task("fake")))
	exe, _ := os.Executable()
	if rec.Provenance.Pid != os.Getpid() || rec.SourcePath != exe || !rec.SourceMatchesLoaded || rec.SourceSHA256 != fileSHA256(t, exe) {
		t.Errorf("record provenance = %+v", rec.Provenance)
	}
}
