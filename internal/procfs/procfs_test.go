package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestHasEntry(t *testing.T) {
	env := []byte("A=1\x00PILOT_RUN_ID=r1\x00B=\x00")
	for _, tt := range []struct {
		entry string
		want  bool
	}{
		{"PILOT_RUN_ID=r1", true},
		{"A=1", true},
		{"B=", true},
		{"PILOT_RUN_ID=r", false},
		{"ILOT_RUN_ID=r1", false},
		{"", false},
	} {
		if got := HasEntry(env, []byte(tt.entry)); got != tt.want {
			t.Errorf("HasEntry(%q) = %v, want %v", tt.entry, got, tt.want)
		}
	}
}

func TestProcessTable(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read line")
	cmd.Env = []string{"PROCFS_TEST_MARK=" + t.Name()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Errorf("Alive(%d) = false for a running child", pid)
	}
	if kids := Children(os.Getpid()); !slices.Contains(kids, pid) {
		t.Errorf("Children(self) = %v, want it to hold %d", kids, pid)
	}
	if got := WithEnv("PROCFS_TEST_MARK=" + t.Name()); !slices.Equal(got, []int{pid}) {
		t.Errorf("WithEnv = %v, want [%d]", got, pid)
	}
	stdin.Close()
	cmd.Wait()
	if Alive(pid) {
		t.Errorf("Alive(%d) = true after it was reaped", pid)
	}
	if got := WithEnv("PROCFS_TEST_MARK=" + t.Name()); len(got) != 0 {
		t.Errorf("WithEnv after exit = %v, want none", got)
	}
}

// StartTime reads this process's start time, the same each time, and
// reports a gone process as gone.
func TestStartTime(t *testing.T) {
	a, ok := StartTime(os.Getpid())
	b, ok2 := StartTime(os.Getpid())
	if !ok || !ok2 || a == 0 || a != b {
		t.Fatalf("StartTime(self) = %d %v, %d %v", a, ok, b, ok2)
	}
	if _, ok := StartTime(1 << 30); ok {
		t.Error("StartTime of a pid that cannot exist reported a process")
	}
}

// RSS counts the pages this process touched and names it as comm does.
func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	const size = 64 << 20
	held := make([]byte, size)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	rss, comm, ok := RSS(os.Getpid())
	if !ok || rss < size {
		t.Errorf("RSS(self) = %d, %v; want at least the %d bytes touched", rss, ok, size)
	}
	want, _ := os.ReadFile("/proc/self/comm")
	if comm != strings.TrimSpace(string(want)) {
		t.Errorf("RSS(self) comm = %q, want %q", comm, want)
	}
	if _, _, ok := RSS(1 << 30); ok {
		t.Error("RSS of a pid that cannot exist reported a process")
	}
	runtime.KeepAlive(held)
}
