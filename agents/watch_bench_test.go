package agents

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pilotworkers/pilot"
)

// BenchmarkWatchRecorded feeds a watcher its runner's recorded stream, the
// one tools/bench repeats for the runner's P3 row (the event lines between
// the first and the last), over and over: the watcher's own cost of a
// dispatch's stream, without the pipe, the splitting or stream.log.
func BenchmarkWatchRecorded(b *testing.B) {
	for _, tc := range []struct {
		runner, file string
		watcher      func() pilot.Watcher
	}{
		{RunnerCopilot, "two-tools.stdout.jsonl", func() pilot.Watcher { return &copilotWatcher{} }},
	} {
		b.Run(tc.runner, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.runner, "stream", tc.file))
			if err != nil {
				b.Fatal(err)
			}
			ls := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
			body := ls[1 : len(ls)-1]
			var size int64
			for _, l := range body {
				size += int64(len(l)) + 1
			}
			w := tc.watcher()
			pw, _ := w.(interface{ PassedStates() []pilot.SessionState })
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, l := range body {
					w.Line(pilot.Line{Stream: pilot.Stdout, Data: l, Size: int64(len(l))})
				}
				if pw != nil {
					pw.PassedStates() // as pilot's heartbeat does
				}
			}
		})
	}
}
