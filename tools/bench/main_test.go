package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestInterleave checks that each round starts with the next measurement
// and that an error stops the run.
func TestInterleave(t *testing.T) {
	var got []string
	f := func(s string) func() error { return func() error { got = append(got, s); return nil } }
	if err := interleave(3, f("a"), f("b"), f("c")); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	boom := errors.New("boom")
	n := 0
	err := interleave(5, func() error { n++; return boom })
	if !errors.Is(err, boom) || n != 1 {
		t.Errorf("interleave after an error: %v after %d calls, want boom after 1", err, n)
	}
}

// summary gives each row's spread over the runs and how often it met its
// goal; a skipped row counts in no run, a file that is not bench's JSON
// is named.
func TestSummary(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.json", `[{"id":"P1","pilot":2.5,"baseline":2,"unit":"ms/job","ratio":1.25,"goal":"<= 1.15","pass":false},{"id":"P9","pilot":1.03,"unit":"× bound","goal":"<= 1.15","pass":true}]`)
	b := write("b.json", `[{"id":"P1","pilot":2.2,"baseline":2,"unit":"ms/job","ratio":1.1,"goal":"<= 1.15","pass":true},{"id":"P9","skipped":true}]`)
	c := write("c.json", `[{"id":"P1","pilot":2.3,"baseline":2,"unit":"ms/job","ratio":1.15,"goal":"<= 1.15","pass":true}]`)
	var out strings.Builder
	if err := summarize(&out, []string{a, b, c}); err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(strings.ReplaceAll(out.String(), "\n", " | "))
	want := strings.Fields("row unit pilot min / median / max ratio min / median / max goal met | " +
		"P1 ms/job 2.20 / 2.30 / 2.50 1.10 / 1.15 / 1.25 <= 1.15 2 of 3 | " +
		"P9 × bound 1.03 / 1.03 / 1.03 - <= 1.15 1 of 1 |")
	if !slices.Equal(got, want) {
		t.Errorf("summary:\n%s\nwant the fields %q", out.String(), want)
	}
	if err := summarize(&out, []string{write("bad.json", "row pilot\n")}); err == nil || !strings.Contains(err.Error(), "bad.json: not the output of bench -json") {
		t.Errorf("a table instead of JSON: %v", err)
	}
}
