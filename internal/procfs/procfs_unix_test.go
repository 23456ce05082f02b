//go:build unix

package procfs

import (
	"os"
	"syscall"
	"testing"
)

func TestPgrp(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if g, ok := Pgrp(os.Getpid()); !ok || g != syscall.Getpgrp() {
		t.Errorf("Pgrp(self) = %d, %v; want %d", g, ok, syscall.Getpgrp())
	}
	if _, ok := Pgrp(-1); ok {
		t.Error("Pgrp(-1): ok")
	}
}
