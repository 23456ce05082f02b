package measure

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestClaudeStream checks the P3 input: valid stream-json lines, from
// 100 B to 1 MiB long plus the one big line, an init first and a
// successful result last, and the size it reports.
func TestClaudeStream(t *testing.T) {
	var buf bytes.Buffer
	const size, big = 8 << 20, 2 << 20
	n, err := ClaudeStream(&buf, size, big, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) || n < size {
		t.Fatalf("reported %d bytes, wrote %d, want at least %d", n, buf.Len(), size)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	bigs := 0
	for i, l := range lines {
		var ev struct{ Type, Subtype string }
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("line %d (%d bytes) is not JSON: %v", i, len(l), err)
		}
		switch {
		case i == 0 && (ev.Type != "system" || ev.Subtype != "init"):
			t.Errorf("first line is %s/%s, want system/init", ev.Type, ev.Subtype)
		case i == len(lines)-1 && (ev.Type != "result" || ev.Subtype != "success"):
			t.Errorf("last line is %s/%s, want result/success", ev.Type, ev.Subtype)
		case i > 0 && i < len(lines)-1 && len(l)+1 == big:
			bigs++
		case i > 0 && i < len(lines)-1 && (len(l)+1 < 100 || len(l)+1 > 1<<20):
			t.Errorf("line %d is %d bytes, want 100 B to 1 MiB", i, len(l)+1)
		}
	}
	if bigs != 1 {
		t.Errorf("%d lines of %d bytes, want 1", bigs, big)
	}
}
