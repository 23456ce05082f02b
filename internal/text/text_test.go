package text

import "testing"

func TestSafeName(t *testing.T) {
	if got := SafeName("a/b c:ü.d-e_f", '-'); got != "a-b-c--.d-e_f" {
		t.Errorf("SafeName = %q", got)
	}
}

func TestLastRunes(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "llo"},
		{"héllo wörld", 5, "wörld"},
		{"", 0, ""},
	} {
		if got := LastRunes(tt.s, tt.n); got != tt.want {
			t.Errorf("LastRunes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestFirstRunes(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{{"hello", 3, "hel"}, {"hé€x", 3, "hé€"}, {"ab", 5, "ab"}, {"", 2, ""}, {"abc", 0, ""}} {
		if got := FirstRunes(tt.s, tt.n); got != tt.want {
			t.Errorf("FirstRunes(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
