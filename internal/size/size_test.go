package size

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"100B", 100},
		{"1KiB", 1 << 10},
		{"5GiB", 5 << 30},
		{"5 GiB", 5 << 30},
		{" 5gib ", 5 << 30},
		{"512MiB", 512 << 20},
		{"2TiB", 2 << 40},
		{"1KB", 1000},
		{"512MB", 512e6},
		{"5GB", 5e9},
		{"1TB", 1e12},
		{"1.5GiB", 3 << 29},
		{".5KiB", 512},
		{"2.KB", 2000},
		{"9223372036854775807", 1<<63 - 1},
	} {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ in, says string }{
		{"", "want a size like 5GiB"},
		{"GiB", "want a size like 5GiB"},
		{"-1GiB", "is negative"},
		{"5G", "say 5GiB (powers of 1024) or 5GB (of 1000)"},
		{"5m", "say 5MiB (powers of 1024) or 5MB (of 1000)"},
		{"5 parsecs", `unknown unit "parsecs"`},
		{"5GiBs", `unknown unit "GiBs"`},
		{"1.5", "a number of bytes is whole"},
		{"1.5B", "a number of bytes is whole"},
		{"1.2.3GiB", "want a size like 5GiB"},
		{"1e3", `unknown unit "e3"`},
		{"0x10", `unknown unit "x10"`},
		{"9223372036854775808", "too large"},
		{"8EiB", "unknown unit"},
		{"8589934592GiB", "too large"},
		{"9999999999.5GiB", "too large"},
	} {
		_, err := Parse(tt.in)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("Parse(%q): %v; want ErrSyntax saying %q", tt.in, err, tt.says)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB",
		5 << 30: "5.0 GiB", 3 << 29: "1.5 GiB", 1<<63 - 1: "8.0 EiB", -2048: "-2.0 KiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatParses(t *testing.T) {
	for _, n := range []int64{0, 1, 1 << 10, 5 << 30, 3 << 29} {
		s := strings.ReplaceAll(Format(n), " ", "")
		if got, err := Parse(s); err != nil || got != n {
			t.Errorf("Parse(Format(%d)) = %d, %v", n, got, err)
		}
	}
}
