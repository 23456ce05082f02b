package supervise

import (
	"os"
	"testing"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

// The test binary doubles as the supervisor (this package's init) and as
// the fake agent its tests' workers run.
func TestMain(m *testing.M) {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}
