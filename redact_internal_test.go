package pilot

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestRedactor(t *testing.T) {
	const (
		long  = "sk-ant-api03-Zq81kXvB2mW9pLr4TtYc0nHd7sEaFgJu" // longer than a probe
		other = "glm-4f2c9e1b7a"
		inner = "api03-Zq81kXvB2m" // a part of long
	)
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"no secret", nil, "key " + long, "key " + long},
		{"none occurs", []string{long, other}, "nothing to see", "nothing to see"},
		{"one", []string{long}, "key " + long + " end", "key [REDACTED] end"},
		{"each of several", []string{long, other}, other + "," + long + "," + other, "[REDACTED],[REDACTED],[REDACTED]"},
		{"only the second", []string{long, other}, "x" + other, "x[REDACTED]"},
		{"the probe alone is no secret", []string{long}, probeOf(long) + " and " + long[:len(long)-1], probeOf(long) + " and " + long[:len(long)-1]},
		{"one inside another: the longer whole", []string{inner, long}, long + " " + inner, "[REDACTED] [REDACTED]"},
		{"duplicates", []string{other, other}, other, "[REDACTED]"},
		{"too short to redact", []string{"abc12"}, "abc12 abc12", "abc12 abc12"},
		{"empty secret", []string{""}, "text", "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newRedactor(tt.secrets...)
			if diff := cmp.Diff(tt.want, string(x.bytes([]byte(tt.in)))); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, x.string(tt.in)); diff != "" {
				t.Errorf("string (-want +got):\n%s", diff)
			}
			var out bytes.Buffer
			x.copy(&out, iotest.OneByteReader(strings.NewReader(tt.in)))
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Errorf("copy, a byte a read (-want +got):\n%s", diff)
			}
		})
	}
}

func probeOf(s string) string { return string(probe([]byte(s))) }

// bytes hands back its input, not a copy, when no secret occurs: the
// stream's hot path allocates nothing.
func TestRedactorBytesNoCopy(t *testing.T) {
	x := newRedactor("sk-ant-api03-Zq81kXvB2mW9pLr4TtYc0nHd7sEaFgJu", "glm-4f2c9e1b7a")
	in := []byte(`{"type":"text","text":"nothing secret here"}`)
	if out := x.bytes(in); &out[0] != &in[0] {
		t.Errorf("bytes copied a line without a secret")
	}
	if n := testing.AllocsPerRun(100, func() { x.bytes(in) }); n != 0 {
		t.Errorf("bytes allocated %v times for a line without a secret", n)
	}
}

// copy carries the longest secret's length over between reads: a short
// secret cut by a read, and a long one, both go.
func TestRedactorCopyAcrossReads(t *testing.T) {
	short, long := "glm-4f2c9e1b7a", strings.Repeat("Zq81kXvB2mW9pLr4", 40)
	x := newRedactor(short, long)
	var in, want strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "%d %s %s|", i, short, long)
		fmt.Fprintf(&want, "%d [REDACTED] [REDACTED]|", i)
	}
	for _, r := range []int{7, 640, 4093} {
		var out bytes.Buffer
		x.copy(&out, iotest.HalfReader(&chunkReader{s: in.String(), n: r}))
		if diff := cmp.Diff(want.String(), out.String()); diff != "" {
			t.Errorf("reads of %d bytes: (-want +got):\n%.2000s", r, diff)
		}
	}
}

// chunkReader reads at most n bytes at a time.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.s) == 0 {
		return 0, os.ErrClosed
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}

func TestRedactorState(t *testing.T) {
	const key = "sk-9f8e7d6c5b4a"
	ids := []string{"call_1", "call_" + key}
	x := newRedactor(key)
	st := SessionState{
		Phase: PhaseErrored, Reason: "r " + key, ExpectedToolCallIDs: ids, CompletedToolCallIDs: []string{"call_1"},
		PendingToolCallIDs: ids, LeafID: key, StopReason: "error", ErrorMessage: "401: invalid key " + key,
	}
	want := SessionState{
		Phase: PhaseErrored, Reason: "r [REDACTED]", ExpectedToolCallIDs: []string{"call_1", "call_[REDACTED]"}, CompletedToolCallIDs: []string{"call_1"},
		PendingToolCallIDs: []string{"call_1", "call_[REDACTED]"}, LeafID: "[REDACTED]", StopReason: "error", ErrorMessage: "401: invalid key [REDACTED]",
	}
	if diff := cmp.Diff(want, x.state(st)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if ids[1] != "call_"+key {
		t.Errorf("state changed the state it was given: %q", ids)
	}
}

// BenchmarkRedact is the stream's hot path over the recorded streams under
// testdata, with no secret, the worker's own (an Anthropic-shaped key) or
// eight providers' (as BenchmarkStreamSecrets): "lines" checks every line,
// "reads" checks each 64 KiB read and then only the lines of those that
// may hold a secret, as Dispatch does.
func BenchmarkRedact(b *testing.B) {
	files, err := filepath.Glob("testdata/*/stream/*.stdout")
	if err != nil || len(files) == 0 {
		b.Fatalf("no recorded streams: %v", err)
	}
	var all []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, data...)
	}
	var reads [][][]byte // the lines of each read
	for off := 0; off < len(all); off += readBuf {
		reads = append(reads, bytes.Split(all[off:min(len(all), off+readBuf)], []byte("\n")))
	}
	keys := []string{
		"sk-ant-api03-9G14R5yGiSX9VaA1HJWPRlvIVr5KkFyBFIivUQmNVjLM58ak1bl2NI2pxhGMBxSiXxiiWm7kAlJ6sGUyhQ1d4XKslJPemRW",
		"sk-proj-L9mbH1cki4fiOU2HYjswciz6s5t3JwivwQjR7tukTZz9ViBGeAg7XO9NagbjvSy4P5jxsc98rR3Eksb1FCX6QCQW4DVBn8gogAf748KuwcqzeVcwCIfXX0KGvRtQ4eOW4rvf8vTwEvP2rTbvENhVLKffwI0s",
		"RcAmlN4e7XGcxR19O3XxqwQQ3AZpcAsO",
		"AIzauyWXQ16psq86yBMqLaNGdro812dQEdvf6cu",
		"sk-rhOJCbLo54Odz1d8f7uTpJahpG4fTuSJyKazUwvpxZHPQsQ6",
		"glm-6ERov7BUCXQ1jP3eR5zEuD5Eu8kaWhvyitRkvm3ofkWsZ",
		"xai-4Jm0XnqzXWfvT5FsY8aH8mvuaQ5JmUGZmDeoRlzHkPmiTzBG9W7gEPzLeDGpx1gqTuBqRrg1eGJ1o8hQjYm",
		"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",
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"none", 0}, {"one", 1}, {"eight", 8}} {
		x := newRedactor(keys[:c.n]...)
		for _, perRead := range []bool{false, true} {
			name := c.name + "/lines"
			if perRead {
				name = c.name + "/reads"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(all)))
				b.ReportAllocs()
				for b.Loop() {
					for i, lines := range reads {
						if perRead && x.clean(all[i*readBuf:min(len(all), (i+1)*readBuf)]) {
							continue
						}
						for _, l := range lines {
							x.bytes(l)
						}
					}
				}
			})
		}
	}
}

// Secrets made of a few letters, in text of the same letters, overlap and
// repeat in every way: copy in chunks of any size redacts as bytes does in
// one piece, and leaves no secret whole.
func TestRedactorOverlaps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "ab"[r.IntN(2)]
		}
		return string(b)
	}
	for range 500 {
		var secrets []string
		for range 1 + r.IntN(4) {
			secrets = append(secrets, word(minSecretLen+r.IntN(6)))
		}
		in := word(r.IntN(200))
		x := newRedactor(secrets...)
		whole := string(x.bytes([]byte(in)))
		for _, s := range secrets {
			if strings.Contains(whole, s) {
				t.Fatalf("secrets %q: %q redacted is %q, which holds %q", secrets, in, whole, s)
			}
		}
		var out bytes.Buffer
		x.copy(&out, &chunkReader{s: in, n: 1 + r.IntN(20)})
		if out.String() != whole {
			t.Fatalf("secrets %q: %q copied in chunks is %q, in one piece %q", secrets, in, out.String(), whole)
		}
	}
}
