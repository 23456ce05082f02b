package supervise

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkStartConfined starts /bin/true under the supervisor, confined
// as a dispatch confines it (the sandbox off still scopes signals), and
// waits for its whole tree to be gone: a dispatch's round trips to the
// supervisor without the dispatch. It reports the time to the started
// reply (start-ms) beside the whole job's.
func BenchmarkStartConfined(b *testing.B) {
	rules := lightRuleset()
	if rules == nil {
		b.Skip("no Landlock here")
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	SetLinger(time.Hour)
	defer func() {
		SetLinger(0)
		Shutdown(b.Context())
	}()
	n := 0
	run := func() time.Duration {
		n++
		cookie := "PILOT_BENCH_JOB=" + strconv.Itoa(n)
		start := time.Now()
		j, err := Start(Spec{Path: "/bin/true", Argv: []string{"true"}, Env: []string{cookie}, Dir: "/", Cookie: cookie, Sandbox: rules},
			null, null, null)
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		<-j.Done()
		j.Close()
		return d
	}
	run() // starts the supervisor
	var started time.Duration
	for b.Loop() {
		started += run()
	}
	b.ReportMetric(float64(started)/float64(time.Millisecond)/float64(b.N), "start-ms")
}
