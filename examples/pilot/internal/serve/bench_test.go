package serve

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
)

// BenchmarkRunPageHugeLog is a run's page over a 1 GiB stream.log: the
// tail, and the evidence line at the start of the log, which the page
// looks for backwards from the end (up to 256 MiB of it). The log is
// sparse (a hole with a line at each end), so it costs no disk.
func BenchmarkRunPageHugeLog(b *testing.B) {
	dir := b.TempDir()
	for _, tc := range []struct {
		name, excerpt string
	}{{"tail", ""}, {"evidence-not-found", "a line that is nowhere"}} {
		rec := ended(record("huge-"+tc.name, "glm", "", t0), time.Second, pilot.Failed)
		rec.EvidenceExcerpt = tc.excerpt
		rd := writeRun(b, dir, fixtureRun{rec: rec})
		f, err := os.Create(filepath.Join(rd, "stream.log"))
		if err != nil {
			b.Fatal(err)
		}
		f.WriteString("err fatal: at the start\n")
		f.WriteAt([]byte("\nout the last line\n"), 1<<30)
		f.Close()
		s := newServer(Config{RunDir: dir})
		h := s.guard(http.HandlerFunc(s.run))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", "/run/"+rec.RunID, nil)
				req.SetPathValue("id", rec.RunID)
				req.Host = "127.0.0.1"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte("the last line")) {
					b.Fatalf("%d", w.Code)
				}
				if tc.excerpt != "" {
					s.forget() // each page looks again, as the first does
				}
			}
		})
	}
}
