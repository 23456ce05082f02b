package main

import (
	"errors"
	"slices"
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
