package pilot_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
)

func TestParseBytes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want pilot.Bytes
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"2GiB", 2 << 30},
		{"2gib", 2 << 30},
		{"2G", 2 << 30},
		{"2 GiB", 2 << 30},
		{" 512MiB ", 512 << 20},
		{"1.5GiB", 3 << 29},
		{"300M", 300 << 20},
		{"64K", 64 << 10},
		{"1TiB", 1 << 40},
		{"2GB", 2e9},
		{"12MB", 12e6},
		{"7B", 7},
	} {
		got, err := pilot.ParseBytes(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "2GG", "2 gigs", "1e9", "1.2.3M", "99999999999TiB", "9223372036854775808"} {
		if got, err := pilot.ParseBytes(in); err == nil || !strings.HasPrefix(err.Error(), "pilot: size") {
			t.Errorf("ParseBytes(%q) = %d, %v; want an error that names the size", in, got, err)
		}
	}
}

// String is exact, and ParseBytes reads it back.
func TestBytesString(t *testing.T) {
	for _, tt := range []struct {
		b    pilot.Bytes
		want string
	}{
		{0, "0B"},
		{100, "100B"},
		{2 << 30, "2GiB"},
		{3 << 29, "1536MiB"},
		{1<<20 + 1, "1048577B"},
		{12 * pilot.GiB, "12GiB"},
	} {
		if got := tt.b.String(); got != tt.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(tt.b), got, tt.want)
		}
		if back, err := pilot.ParseBytes(tt.b.String()); err != nil || back != tt.b {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d back", tt.b.String(), back, err, int64(tt.b))
		}
	}
}

// In JSON a size is a number of bytes or a string with a unit; it is
// written as the string.
func TestBytesJSON(t *testing.T) {
	var v struct {
		A, B pilot.Bytes
	}
	if err := json.Unmarshal([]byte(`{"A": "2GiB", "B": 4096}`), &v); err != nil || v.A != 2<<30 || v.B != 4096 {
		t.Fatalf("Unmarshal = %+v, %v", v, err)
	}
	data, err := json.Marshal(v)
	if err != nil || string(data) != `{"A":"2GiB","B":"4KiB"}` {
		t.Errorf("Marshal = %s, %v", data, err)
	}
	for _, in := range []string{`{"A": "lots"}`, `{"A": -1}`, `{"A": true}`, `{"A": 1.5}`} {
		if err := json.Unmarshal([]byte(in), &v); err == nil || !strings.Contains(err.Error(), "like \"2GiB\"") {
			t.Errorf("Unmarshal(%s) = %v; want an error that shows a size", in, err)
		}
	}
}

func ExampleParseBytes() {
	b, err := pilot.ParseBytes("1.5GiB")
	fmt.Println(int64(b), b, err)
	// Output: 1610612736 1536MiB <nil>
}
