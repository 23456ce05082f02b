package fakeagent

import (
	"bytes"
	"strings"
	"testing"
)

// TestPaced checks a paced replay's lines: the first, rate×duration of
// the middle ones in turn, the last.
func TestPaced(t *testing.T) {
	var buf bytes.Buffer
	if err := paced(&buf, []byte("head\na\nb\nlast\n"), "1000", "5ms"); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "head\na\nb\na\nb\na\nlast\n"; got != want {
		t.Errorf("paced wrote %q, want %q", got, want)
	}
	for _, bad := range [][2]string{{"0", "1s"}, {"x", "1s"}, {"10", "soon"}} {
		if err := paced(&buf, []byte("h\nm\nl\n"), bad[0], bad[1]); err == nil {
			t.Errorf("paced(rate %q, for %q): no error", bad[0], bad[1])
		}
	}
	if err := paced(&buf, []byte("h\nl\n"), "10", "1s"); err == nil || !strings.Contains(err.Error(), "middle lines") {
		t.Errorf("paced of two lines: %v, want an error naming the middle lines", err)
	}
}
