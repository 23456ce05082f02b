package schedule

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStoreDecision is the state store's cost per scheduling decision
// with a Store: claiming a job, then recording it complete (two locked,
// atomic writes of the file), in a store already holding 1,000 jobs.
func BenchmarkStoreDecision(b *testing.B) {
	s, err := OpenStore(filepath.Join(b.TempDir(), StoreFileName), false)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range 1000 {
		if _, err := s.claim(fmt.Sprintf("old%04d", i), "", "", false, Writes{}, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("j%d", i)
		i++
		if c, err := s.claim(id, "", "", false, Writes{}, now); err != nil || !c.claimed {
			b.Fatal(err)
		}
		if err := s.release(id, "", true, "", "", now); err != nil {
			b.Fatal(err)
		}
	}
}
