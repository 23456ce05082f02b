package main

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("FAKEAGENT_TEST_MAIN") != "" {
		main()
	}
	os.Exit(m.Run())
}

// The command runs its script: output on both streams, then the exit status.
func TestScript(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "out=hello", "err=warning", "exit=3")
	cmd.Env = append(os.Environ(), "FAKEAGENT_TEST_MAIN=1")
	var stderr []byte
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		stderr = ee.Stderr
	}
	if string(out) != "hello\n" || string(stderr) != "warning\n" || ee == nil || ee.ExitCode() != 3 {
		t.Errorf("stdout %q, stderr %q, %v; want hello, warning and exit status 3", out, stderr, err)
	}
}
