package pilottest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestFakeAgentWritesAndAppendsFiles(t *testing.T) {
	dir := t.TempDir()
	p := pilottest.FakeProvider(t, "fake",
		`write={workdir}/sub/notes.md=# Notes\nfirst`,
		`append={workdir}/sub/notes.md=\nsecond\n`,
		"move={workdir}/sub/notes.md={workdir}/moved/notes.md",
		"out=done")
	d := pilottest.Dispatcher(t, []pilot.Provider{p})
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "fake", Mode: pilot.ModeCode, Prompt: "x", Workdir: dir})
	if err != nil || !v.Verdict.Success() {
		t.Fatalf("verdict %s %s, %v (stderr %q)", v.Verdict, v.FailureClass, err, v.StderrTail)
	}
	data, err := os.ReadFile(filepath.Join(dir, "moved", "notes.md"))
	if err != nil || string(data) != "# Notes\nfirst\nsecond\n" {
		t.Errorf("notes.md = %q, %v", data, err)
	}
	bad := pilottest.FakeProvider(t, "bad", `write={workdir}/x=\q`)
	d = pilottest.Dispatcher(t, []pilot.Provider{bad})
	if v, _ := d.Dispatch(context.Background(), pilot.Task{Provider: "bad", Mode: pilot.ModeCode, Prompt: "x", Workdir: dir}); v.Verdict.Success() {
		t.Errorf("a step with a bad escape succeeded")
	}
}
