package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The lock belongs to the open file: a second open file of the same path
// cannot take it until the first is closed.
func TestTryLockExcludesAnotherOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, b := open(t, path), open(t, path)
	if err := TryLock(a); err != nil {
		t.Fatalf("TryLock(a) = %v", err)
	}
	if err := TryLock(b); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock(b) while a holds the lock = %v, want ErrLocked", err)
	}
	a.Close()
	if err := TryLock(b); err != nil {
		t.Fatalf("TryLock(b) after a was closed = %v", err)
	}
	c := open(t, path)
	done := make(chan error, 1)
	go func() { done <- Lock(c) }()
	b.Close()
	if err := <-done; err != nil {
		t.Fatalf("Lock(c) = %v", err)
	}
}
