package size_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot/size"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want size.Bytes
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
		got, err := size.Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "2GG", "2 gigs", "1e9", "1.2.3M", "99999999999TiB", "9223372036854775808"} {
		if got, err := size.Parse(in); err == nil || !strings.HasPrefix(err.Error(), "size ") {
			t.Errorf("Parse(%q) = %d, %v; want an error that names the size", in, got, err)
		}
	}
}

// String is exact, and Parse reads it back.
func TestBytesString(t *testing.T) {
	for _, tt := range []struct {
		b    size.Bytes
		want string
	}{
		{0, "0B"},
		{100, "100B"},
		{2 << 30, "2GiB"},
		{3 << 29, "1536MiB"},
		{1<<20 + 1, "1048577B"},
		{12 * size.GiB, "12GiB"},
	} {
		if got := tt.b.String(); got != tt.want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(tt.b), got, tt.want)
		}
		if back, err := size.Parse(tt.b.String()); err != nil || back != tt.b {
			t.Errorf("Parse(%q) = %d, %v; want %d back", tt.b.String(), back, err, int64(tt.b))
		}
	}
}

// In JSON a size is a number of bytes or a string with a unit; it is
// written as the string.
func TestBytesJSON(t *testing.T) {
	var v struct {
		A, B size.Bytes
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

func ExampleParse() {
	b, err := size.Parse("1.5GiB")
	fmt.Println(int64(b), b, err)
	// Output: 1610612736 1536MiB <nil>
}

// FuzzParse: Parse never panics, never gives a negative size, and what
// it gives writes itself back (String, and JSON) as the same size.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "2GiB", " 1.5 gib ", "300M", "12MB", "7B", "9223372036854775807", "8EiB", "-1", "1e3K", ".5K", "K", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		b, err := size.Parse(in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "size ") {
				t.Errorf("Parse(%q): error %q does not start by naming the size", in, err)
			}
			return
		}
		if b < 0 {
			t.Fatalf("Parse(%q) = %d, negative", in, b)
		}
		if back, err := size.Parse(b.String()); err != nil || back != b {
			t.Errorf("Parse(%q) = %d; its String %q reads back as %d, %v", in, b, b.String(), back, err)
		}
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var got size.Bytes
		if err := json.Unmarshal(data, &got); err != nil || got != b {
			t.Errorf("Parse(%q) = %d; its JSON %s reads back as %d, %v", in, b, data, got, err)
		}
	})
}
