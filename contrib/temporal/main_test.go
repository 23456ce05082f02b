package temporal

import (
	"io"
	"os"
	"testing"

	"github.com/pilotworkers/pilot/pilottest"
)

// envBlockOnStdin makes the test binary a process that lives until its
// stdin closes (a live owner for the attach tests).
const envBlockOnStdin = "PILOT_TEMPORAL_TEST_BLOCK"

func TestMain(m *testing.M) {
	if os.Getenv(envBlockOnStdin) != "" {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	if os.Getenv(envScenarioWorker) != "" {
		os.Exit(scenarioWorker())
	}
	if os.Getenv(envLedgerAgent) != "" {
		os.Exit(ledgerAgent(os.Args[1:]))
	}
	pilottest.Main(m)
}
