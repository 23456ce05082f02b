package lines_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot/internal/lines"
)

// delivered is what a test records of one delivered Line.
type delivered struct {
	Data      string
	Size      int64
	Truncated bool
	NoEOL     bool
	Spilled   bool   // Spill was set
	Full      string // the whole line, read from Spill during the callback
}

// collector records the lines a Splitter delivers and, when dir is set,
// checks during each callback that the spill file has no name in dir.
type collector struct {
	t     testing.TB
	dir   string
	lines []delivered
}

func (c *collector) onLine(l lines.Line) {
	c.t.Helper()
	g := delivered{Data: string(l.Data), Size: l.Size, Truncated: l.Truncated, NoEOL: l.NoEOL}
	if l.Spill != nil {
		g.Spilled = true
		data, err := io.ReadAll(l.Spill)
		if err != nil {
			c.t.Fatalf("reading Spill: %v", err)
		}
		g.Full = string(data)
		if c.dir != "" {
			assertEmptyDir(c.t, c.dir)
		}
	}
	c.lines = append(c.lines, g)
}

// assertEmptyDir fails the test unless dir exists and holds nothing.
func assertEmptyDir(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("spill directory holds %s; want it empty", e.Name())
	}
}

// chunk splits data at random points chosen by seed.
func chunk(data []byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out [][]byte
	for len(data) > 0 {
		n := 1 + rng.IntN(min(len(data), 8))
		if rng.IntN(8) == 0 {
			n = 1 + rng.IntN(len(data)) // now and then a big piece
		}
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}

// chunkings returns the ways a test feeds data to a Splitter.
func chunkings(data []byte) map[string][][]byte {
	bytewise := make([][]byte, len(data))
	for i := range data {
		bytewise[i] = data[i : i+1]
	}
	return map[string][][]byte{
		"all at once":     {data},
		"byte at a time":  bytewise,
		"random seed 1":   chunk(data, 1),
		"random seed 2":   chunk(data, 2),
		"random seed 3":   chunk(data, 3),
		"empty writes in": append([][]byte{{}}, append(chunk(data, 4), []byte{})...),
	}
}

// split feeds chunks to a fresh Splitter and returns what it delivered.
func split(t testing.TB, lineMax int, spillDir string, chunks [][]byte) []delivered {
	t.Helper()
	c := &collector{t: t, dir: spillDir}
	feed(t, &lines.Splitter{Max: lineMax, SpillDir: spillDir, OnLine: c.onLine}, chunks)
	return c.lines
}

// feed writes chunks to s and closes it.
func feed(t testing.TB, s *lines.Splitter, chunks [][]byte) {
	t.Helper()
	for _, p := range chunks {
		n, err := s.Write(p)
		if n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v; want %d, nil", len(p), n, err, len(p))
		}
	}
	s.Close()
}

func TestSplitter(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		input string
		want  []delivered
	}{
		{name: "empty", max: 8, input: "", want: nil},
		{name: "one line", max: 8, input: "hello\n", want: []delivered{{Data: "hello", Size: 5}}},
		{name: "two lines", max: 8, input: "a\nbc\n", want: []delivered{{Data: "a", Size: 1}, {Data: "bc", Size: 2}}},
		{name: "empty lines", max: 8, input: "\n\na\n\n", want: []delivered{{}, {}, {Data: "a", Size: 1}, {}}},
		{
			name:  "CRLF is kept",
			max:   8,
			input: "a\r\nb\r\n\r\n",
			want:  []delivered{{Data: "a\r", Size: 2}, {Data: "b\r", Size: 2}, {Data: "\r", Size: 1}},
		},
		{name: "lone CR is not a line end", max: 8, input: "a\rb\n", want: []delivered{{Data: "a\rb", Size: 3}}},
		{name: "final line without newline", max: 8, input: "a\nlast", want: []delivered{{Data: "a", Size: 1}, {Data: "last", Size: 4, NoEOL: true}}},
		{name: "only a line without newline", max: 8, input: "x", want: []delivered{{Data: "x", Size: 1, NoEOL: true}}},
		{name: "line of exactly Max", max: 4, input: "abcd\n", want: []delivered{{Data: "abcd", Size: 4}}},
		{
			name:  "line of Max+1",
			max:   4,
			input: "abcde\n",
			want:  []delivered{{Data: "abcd", Size: 5, Truncated: true, Spilled: true, Full: "abcde"}},
		},
		{
			name:  "long line between short ones",
			max:   4,
			input: "ab\nabcdefghij\ncd\n",
			want: []delivered{
				{Data: "ab", Size: 2},
				{Data: "abcd", Size: 10, Truncated: true, Spilled: true, Full: "abcdefghij"},
				{Data: "cd", Size: 2},
			},
		},
		{
			name:  "long lines in a row",
			max:   3,
			input: "0123456\nabcdefghijklmnop\nxyz\n",
			want: []delivered{
				{Data: "012", Size: 7, Truncated: true, Spilled: true, Full: "0123456"},
				{Data: "abc", Size: 16, Truncated: true, Spilled: true, Full: "abcdefghijklmnop"},
				{Data: "xyz", Size: 3},
			},
		},
		{
			name:  "long final line without newline",
			max:   3,
			input: "ok\nabcdefg",
			want: []delivered{
				{Data: "ok", Size: 2},
				{Data: "abc", Size: 7, Truncated: true, NoEOL: true, Spilled: true, Full: "abcdefg"},
			},
		},
		{
			name:  "long line with CR",
			max:   2,
			input: "abc\r\n",
			want:  []delivered{{Data: "ab", Size: 4, Truncated: true, Spilled: true, Full: "abc\r"}},
		},
		{name: "zero Max is 8 MiB", max: 0, input: strings.Repeat("x", 1000) + "\n", want: []delivered{{Data: strings.Repeat("x", 1000), Size: 1000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for how, chunks := range chunkings([]byte(tt.input)) {
				t.Run(how, func(t *testing.T) {
					dir := t.TempDir()
					got := split(t, tt.max, dir, chunks)
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("lines mismatch (-want +got):\n%s", diff)
					}
					assertEmptyDir(t, dir)
				})
			}
		})
	}
}

func TestSplitterDefaultMax(t *testing.T) {
	const def = 8 << 20
	line := bytes.Repeat([]byte("y"), def+1)
	input := append(append(append([]byte{}, line[:def]...), '\n'), append(line, '\n')...)
	var chunks [][]byte // the 64 KiB reads a pipe reader makes
	for p := input; len(p) > 0; {
		n := min(len(p), 64<<10)
		chunks, p = append(chunks, p[:n]), p[n:]
	}
	dir := t.TempDir()
	got := split(t, 0, dir, chunks)
	want := []delivered{
		{Data: string(line[:def]), Size: def},
		{Data: string(line[:def]), Size: def + 1, Truncated: true, Spilled: true, Full: string(line)},
	}
	// Compare sizes and flags first: a diff of 8 MiB strings is unreadable.
	if len(got) != len(want) {
		t.Fatalf("got %d lines; want %d", len(got), len(want))
	}
	for i := range want {
		if !cmp.Equal(want[i], got[i]) {
			t.Errorf("line %d: got Size %d, len(Data) %d, Truncated %v, Spilled %v, len(Full) %d; want Size %d, len(Data) %d, Truncated %v, Spilled %v, len(Full) %d",
				i, got[i].Size, len(got[i].Data), got[i].Truncated, got[i].Spilled, len(got[i].Full),
				want[i].Size, len(want[i].Data), want[i].Truncated, want[i].Spilled, len(want[i].Full))
		}
	}
	assertEmptyDir(t, dir)
}

// TestSplitterNoSpillDir checks that a spill file that cannot be created
// truncates the line instead of failing the stream.
func TestSplitterNoSpillDir(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "missing")
	input := []byte("abcdefgh\nok\nijklmnopq")
	want := []delivered{
		{Data: "abcd", Size: 8, Truncated: true},
		{Data: "ok", Size: 2},
		{Data: "ijkl", Size: 9, Truncated: true, NoEOL: true},
	}
	for how, chunks := range chunkings(input) {
		t.Run(how, func(t *testing.T) {
			got := split(t, 4, dir, chunks)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("lines mismatch (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("spill directory %s: Stat error = %v; want it still missing", dir, err)
			}
		})
	}
}

// TestSplitterSpillDirAppears checks that a failed spill affects only its
// own line: once the directory exists, the next long line spills.
func TestSplitterSpillDirAppears(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	c := &collector{t: t, dir: dir}
	s := &lines.Splitter{Max: 4, SpillDir: dir, OnLine: c.onLine}
	s.Write([]byte("abcdefgh\n"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("ijklmnop\n"))
	s.Close()
	want := []delivered{
		{Data: "abcd", Size: 8, Truncated: true},
		{Data: "ijkl", Size: 8, Truncated: true, Spilled: true, Full: "ijklmnop"},
	}
	if diff := cmp.Diff(want, c.lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
	assertEmptyDir(t, dir)
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		writes []string
		want   string
	}{
		{name: "nothing written", n: 4, writes: nil, want: ""},
		{name: "less than N", n: 4, writes: []string{"ab"}, want: "ab"},
		{name: "exactly N", n: 4, writes: []string{"ab", "cd"}, want: "abcd"},
		{name: "small writes past N", n: 4, writes: []string{"ab", "cd", "ef"}, want: "cdef"},
		{name: "one write larger than N", n: 4, writes: []string{"abcdefgh"}, want: "efgh"},
		{name: "one write of exactly N", n: 4, writes: []string{"xy", "abcd"}, want: "abcd"},
		{name: "large write then small", n: 4, writes: []string{"xy", "abcdefgh", "z"}, want: "fghz"},
		{name: "empty writes", n: 4, writes: []string{"", "ab", "", "cd", ""}, want: "abcd"},
		{name: "zero N keeps nothing", n: 0, writes: []string{"abc", "d"}, want: ""},
		{name: "N of one", n: 1, writes: []string{"abc", "d", "ef"}, want: "f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tail := &lines.Tail{N: tt.n}
			for _, w := range tt.writes {
				if n, err := tail.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if diff := cmp.Diff(tt.want, string(tail.Bytes())); diff != "" {
				t.Errorf("Bytes() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTailManyWrites compares Tail with the suffix of everything written,
// after each of many writes of random sizes, some larger than N.
func TestTailManyWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	for _, n := range []int{1, 7, 64, 1000} {
		tail := &lines.Tail{N: n}
		var all []byte
		for i := range 2000 {
			w := make([]byte, rng.IntN(3*n+2))
			for j := range w {
				w[j] = byte('a' + rng.IntN(26))
			}
			tail.Write(w)
			all = append(all, w...)
			want := all[max(0, len(all)-n):]
			if !bytes.Equal(want, tail.Bytes()) {
				t.Fatalf("N=%d after write %d (%d bytes): Bytes() = %q; want %q", n, i, len(w), tail.Bytes(), want)
			}
		}
	}
}

func FuzzSplitter(f *testing.F) {
	f.Add([]byte("a\nbc\n"), uint8(4), uint64(1))
	f.Add([]byte("a\r\nb\r\nno end"), uint8(1), uint64(2))
	f.Add([]byte("\n\n\n"), uint8(0), uint64(3))
	f.Add([]byte("0123456789abcdef\nxy\n0123456789"), uint8(3), uint64(4))
	f.Add([]byte(""), uint8(5), uint64(5))
	f.Add([]byte("no newline at all"), uint8(200), uint64(6))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, maxByte uint8, seed uint64) {
		lineMax := int(maxByte%32) + 1
		// The spill directory is checked once at the end rather than
		// in every callback: fuzzing needs fast executions.
		c := &collector{t: t}
		feed(t, &lines.Splitter{Max: lineMax, SpillDir: dir, OnLine: c.onLine}, chunk(data, seed))
		got := c.lines
		var out []byte
		for i, l := range got {
			full := l.Data
			if l.Truncated {
				if !l.Spilled {
					t.Fatalf("line %d: truncated without a spill file", i)
				}
				full = l.Full
			} else if l.Spilled {
				t.Fatalf("line %d: spill file on a line that is not truncated", i)
			}
			if int64(len(full)) != l.Size {
				t.Fatalf("line %d: Size = %d; the line has %d bytes", i, l.Size, len(full))
			}
			if l.Truncated != (l.Size > int64(lineMax)) {
				t.Fatalf("line %d: Truncated = %v with Size %d and Max %d", i, l.Truncated, l.Size, lineMax)
			}
			if !strings.HasPrefix(full, l.Data) || len(l.Data) != min(len(full), lineMax) {
				t.Fatalf("line %d: Data %q is not the first %d bytes of %q", i, l.Data, lineMax, full)
			}
			if strings.Contains(full, "\n") {
				t.Fatalf("line %d: %q contains a newline", i, full)
			}
			if l.NoEOL && i != len(got)-1 {
				t.Fatalf("line %d of %d has NoEOL", i, len(got))
			}
			out = append(out, full...)
			if !l.NoEOL {
				out = append(out, '\n')
			}
		}
		if !bytes.Equal(data, out) {
			t.Fatalf("lines joined = %q; want the input %q", out, data)
		}
		assertEmptyDir(t, dir)
	})
}

// A line is InPlace when it lies whole in the slice of the Write that
// delivers it, and its Data is then part of that slice.
func TestSplitterInPlace(t *testing.T) {
	type got struct {
		Data    string
		InPlace bool
	}
	var seen []got
	var chunk []byte
	s := &lines.Splitter{Max: 4, SpillDir: t.TempDir(), OnLine: func(l lines.Line) {
		if l.InPlace && (len(l.Data) == 0 || !inside(l.Data, chunk)) {
			t.Errorf("line %q is InPlace but not in the written slice %q", l.Data, chunk)
		}
		seen = append(seen, got{string(l.Data), l.InPlace})
	}}
	for _, c := range []string{"ab\ncd", "e\nfg\n", "abcdefgh\nij\n", "tail"} {
		chunk = []byte(c)
		s.Write(chunk)
	}
	s.Close()
	want := []got{{"ab", true}, {"cde", false}, {"fg", true}, {"abcd", false}, {"ij", true}, {"tail", false}}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// inside reports whether part is a slice of whole's array within it.
func inside(part, whole []byte) bool {
	for i := range len(whole) - len(part) + 1 {
		if &whole[i] == &part[0] {
			return true
		}
	}
	return false
}
