package pilot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// deniedByWords is denied as four searches, one per word: the reference.
func deniedByWords(line []byte) bool {
	for _, w := range denialWords {
		if bytes.Contains(line, w) {
			return true
		}
	}
	return false
}

var denialLines = []struct {
	line string
	want bool
}{
	{"cat: /root/.pi/agent/auth.json: Permission denied", true},
	{"open /home/u/.codex/auth.json: permission denied", true},
	{"rm: cannot remove 'x': Operation not permitted", true},
	{`{"type":"tool_result","content":"Error: EACCES: permission denied, open '/k'"}`, true},
	{"Error: EPERM, operation not permitted", true},
	{"EACCES", true},
	{"EPERM", true},
	{"ermission denied", true},
	{"not permitted", true},
	{"mm not permitted", true},
	{"Permission granted", false},
	{"not permitte", false},
	{"EACCE", false},
	{"EPER", false},
	{"", false},
	{"m", false},
	{"E", false},
	{"Permision denied", false},
	{"ermissiondenied", false},
	{`{"type":"message","text":"emmm EEE permitted not"}`, false},
}

func TestDeniedFindsTheDenialWords(t *testing.T) {
	for _, c := range denialLines {
		if got := denied([]byte(c.line)); got != c.want {
			t.Errorf("denied(%q) = %v, want %v", c.line, got, c.want)
		}
	}
}

// TestDeniedAgreesOnRecordedStreams runs both on every recorded stream
// line, so that a change to either list is caught.
func TestDeniedAgreesOnRecordedStreams(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/stream/*")
	more, _ := filepath.Glob("agents/testdata/*/stream/*")
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no recorded streams under testdata/*/stream or agents/testdata/*/stream")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if got, want := denied(l), deniedByWords(l); got != want {
				t.Errorf("%s: denied(%q) = %v, the four searches say %v", f, l, got, want)
			}
		}
	}
}

func FuzzDenied(f *testing.F) {
	for _, c := range denialLines {
		f.Add([]byte(c.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if got, want := denied(line), deniedByWords(line); got != want {
			t.Errorf("denied(%q) = %v, the four searches say %v", line, got, want)
		}
	})
}

func benchmarkDenial(b *testing.B, find func([]byte) bool) {
	data, err := os.ReadFile("testdata/pi/stream/tool-use-gen-a.stdout")
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(data, []byte("\n"))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		for _, l := range lines {
			find(l)
		}
	}
}

// BenchmarkDenied and BenchmarkDeniedByWords compare denied with the four
// searches it replaced, on pi's recorded stream.
func BenchmarkDenied(b *testing.B)        { benchmarkDenial(b, denied) }
func BenchmarkDeniedByWords(b *testing.B) { benchmarkDenial(b, deniedByWords) }
