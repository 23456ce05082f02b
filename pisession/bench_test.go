package pisession_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pisession"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// piGenSession writes a realistic pi session of at least size bytes (see
// measure.PiSession).
func piGenSession(w io.Writer, size int64, rng *rand.Rand) { measure.PiSession(w, size, rng) }

func BenchmarkParsePiSession(b *testing.B) {
	var buf bytes.Buffer
	piGenSession(&buf, 8<<20, rand.New(rand.NewPCG(1, 1)))
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		st, err := pisession.Parse(bytes.NewReader(data))
		if err != nil || st.Phase != pilot.PhaseFinished {
			b.Fatalf("%q %q %v", st.Phase, st.Reason, err)
		}
	}
}

// piBenchSizes is the session sizes, in MiB, the session benchmarks run at:
// 1 and a large size, 64 unless PILOT_BENCH_PI_SESSION_MIB sets it.
func piBenchSizes(b *testing.B) []int64 {
	large := int64(64)
	if v := os.Getenv("PILOT_BENCH_PI_SESSION_MIB"); v != "" {
		mib, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mib <= 0 {
			b.Fatalf("PILOT_BENCH_PI_SESSION_MIB=%q: want a positive number of MiB", v)
		}
		large = mib
	}
	return []int64{1, large}
}

// BenchmarkPiSessionTailAppend1KiB measures one Tail.Update after
// 1 KiB was appended to a large session file, at two file sizes, to show
// that the cost does not depend on the size. The large size is 64 MiB;
// PILOT_BENCH_PI_SESSION_MIB sets it, e.g. for 1 GiB:
//
//	PILOT_BENCH_PI_SESSION_MIB=1024 go test -run '^$' -bench PiSessionTailAppend -benchtime 20x .
func BenchmarkPiSessionTailAppend1KiB(b *testing.B) {
	for _, mib := range piBenchSizes(b) {
		b.Run(fmt.Sprintf("size=%dMiB", mib), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "session.jsonl")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			piGenSession(f, mib<<20, rand.New(rand.NewPCG(2, 2)))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			tail := pisession.Tail{Path: path}
			if st, err := tail.Update(); err != nil || st.Phase != pilot.PhaseFinished {
				b.Fatalf("initial read: %q %q %v", st.Phase, st.Reason, err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// What the Tail keeps for the whole file (its index).
			indexMiB := float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc)) / (1 << 20)
			defer func() { b.ReportMetric(indexMiB, "index-MiB") }()
			// Appended: an assistant message with a tool call, then its
			// result, each padded to 1 KiB.
			line := func(i int, parent string) ([]byte, string) {
				id := fmt.Sprintf("bench%04d", i)
				var e string
				if i%2 == 0 {
					e = fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-03-15T11:00:00.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"bc%d","name":"bash","arguments":{"command":"%%s"}}],"stopReason":"toolUse"}}`, id, parent, i)
				} else {
					e = fmt.Sprintf(`{"type":"message","id":%q,"parentId":%q,"timestamp":"2026-03-15T11:00:00.000Z","message":{"role":"toolResult","toolCallId":"bc%d","toolName":"bash","content":[{"type":"text","text":"%%s"}]}}`, id, parent, i-1)
				}
				pad := 1024 - (len(e) - 2) - 1
				return []byte(fmt.Sprintf(e, strings.Repeat("z", pad)) + "\n"), id
			}
			st, _ := tail.Update()
			parent := st.LeafID
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				l, id := line(i, parent)
				if len(l) != 1024 {
					b.Fatalf("appended %d bytes, want 1024", len(l))
				}
				if _, err := f.Write(l); err != nil {
					b.Fatal(err)
				}
				parent = id
				b.StartTimer()
				st, err := tail.Update()
				if err != nil {
					b.Fatal(err)
				}
				want := pilot.PhaseToolRunning
				if i%2 == 1 {
					want = pilot.PhaseAwaitingModel
				}
				if st.Phase != want {
					b.Fatalf("after append %d: %q %q; want %q", i, st.Phase, st.Reason, want)
				}
			}
		})
	}
}

// BenchmarkPiSessionFullReparse is P4's baseline: what the seed does at
// every heartbeat, a full parse of the session file, at the same sizes as
// BenchmarkPiSessionTailAppend1KiB (PILOT_BENCH_PI_SESSION_MIB sets the
// large one).
func BenchmarkPiSessionFullReparse(b *testing.B) {
	for _, mib := range piBenchSizes(b) {
		b.Run(fmt.Sprintf("size=%dMiB", mib), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "session.jsonl")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			piGenSession(f, mib<<20, rand.New(rand.NewPCG(2, 2)))
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := measure.FullParse(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
