package measure_test

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/tools/bench/measure"
)

// TestLongLine is P7's long-line case: a 16 MiB assistant line before the
// result stops the peers' reader at the line (bufio.ErrTooLong), while
// pilot's claude watcher still reads the result and judges the run
// completed.
func TestLongLine(t *testing.T) {
	var buf bytes.Buffer
	if _, err := measure.LongLineClaude(&buf, 16<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := measure.PeerReadClaude(bytes.NewReader(buf.Bytes())); !errors.Is(err, bufio.ErrTooLong) {
		t.Errorf("the peers' reader: %v, want bufio.ErrTooLong", err)
	}
	res, err := measure.WatchStream(agents.ClaudeRunner{}, bytes.NewReader(buf.Bytes()), 0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pilot.Completed || res.Usage == nil || res.Usage.CostUSD == nil || *res.Usage.CostUSD != 0.5 {
		t.Errorf("pilot's watcher: %+v, want completed with the result's usage (cost 0.5)", res)
	}
}

// TestPeerReadClaude checks the baseline on a stream it can read: P3's
// generator without the big line.
func TestPeerReadClaude(t *testing.T) {
	var buf bytes.Buffer
	if _, err := measure.ClaudeStream(&buf, 4<<20, 0, rand.New(rand.NewPCG(1, 1))); err != nil {
		t.Fatal(err)
	}
	ev, err := measure.PeerReadClaude(bytes.NewReader(buf.Bytes()))
	if err != nil || ev.Type != "result" || ev.Subtype != "success" || ev.Result != "done" {
		t.Errorf("PeerReadClaude: %+v, %v; want the success result", ev, err)
	}
	if _, err := measure.PeerReadClaude(bytes.NewReader(buf.Bytes()[:buf.Len()/2])); !errors.Is(err, measure.ErrNoResult) {
		t.Errorf("PeerReadClaude of half the stream: %v, want ErrNoResult", err)
	}
}

// TestRecordedStream checks the inputs of the P3 rows per runner: each
// runner's watcher, fed the stream in process, judges it completed.
func TestRecordedStream(t *testing.T) {
	runners := map[string]pilot.Runner{}
	for _, r := range agents.Runners() {
		runners[r.Name()] = r
	}
	for name := range measure.RecordedStreams {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := measure.RecordedStream(&buf, name, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(buf.Len()) || n < 1<<20 {
				t.Fatalf("reported %d bytes, wrote %d, want at least 1 MiB", n, buf.Len())
			}
			res, err := measure.WatchStream(runners[name], &buf, 0, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != pilot.Completed {
				t.Errorf("the %s watcher: %+v, want completed", name, res)
			}
		})
	}
}

// peerBenchFile writes P7's input: P3's Claude stream-json without its big
// line (the peers' reader stops at a line over 10 MiB), 64 MiB unless
// PILOT_BENCH_STREAM_MIB says otherwise.
func peerBenchFile(b *testing.B) (path string, n int64) {
	mib := int64(64)
	if v := os.Getenv("PILOT_BENCH_STREAM_MIB"); v != "" {
		m, err := strconv.ParseInt(v, 10, 64)
		if err != nil || m <= 0 {
			b.Fatalf("PILOT_BENCH_STREAM_MIB=%q: want a positive number of MiB", v)
		}
		mib = m
	}
	path = filepath.Join(b.TempDir(), "stream.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err = measure.ClaudeStream(f, mib<<20, 0, rand.New(rand.NewPCG(3, 3)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	return path, n
}

// BenchmarkPeerReaderClaude is P7's baseline: the peers' bufio.Scanner and
// json.Unmarshal of every line, reading the file.
func BenchmarkPeerReaderClaude(b *testing.B) {
	path, n := peerBenchFile(b)
	b.SetBytes(n)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = measure.PeerReadClaude(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPilotWatcherClaude (P7) feeds the same file to pilot's claude
// watcher as a dispatch does (internal/lines, Diagnostic, Line, Finish).
func BenchmarkPilotWatcherClaude(b *testing.B) {
	path, n := peerBenchFile(b)
	dir := b.TempDir()
	b.SetBytes(n)
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		res, err := measure.WatchStream(agents.ClaudeRunner{}, f, 0, dir)
		f.Close()
		if err != nil || res.Outcome != pilot.Completed {
			b.Fatalf("pilot's watcher: %+v, %v; want completed", res, err)
		}
	}
}

// BenchmarkWatchRecorded feeds each runner's P3 stream (RecordedStream,
// 16 MiB) to its watcher in process, as WatchStream does: the watcher's
// share of the P3-<runner> rows, without the process and stream.log.
func BenchmarkWatchRecorded(b *testing.B) {
	runners := map[string]pilot.Runner{}
	for _, r := range agents.Runners() {
		runners[r.Name()] = r
	}
	for _, name := range []string{agents.RunnerPi, agents.RunnerCodex, agents.RunnerOpencode, agents.RunnerGemini, agents.RunnerQwen, agents.RunnerKilo, agents.RunnerCopilot} {
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			n, err := measure.RecordedStream(&buf, name, 16<<20)
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			b.SetBytes(n)
			for b.Loop() {
				res, err := measure.WatchStream(runners[name], bytes.NewReader(buf.Bytes()), 0, dir)
				if err != nil || res.Outcome != pilot.Completed {
					b.Fatalf("%+v, %v; want completed", res, err)
				}
			}
		})
	}
}
