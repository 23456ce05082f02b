package pilottest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) { pilottest.Main(m) }

// The third-party runner of Example_runner passes the conformance harness
// over its own recorded streams (testdata/jsonl), as the built-in runners
// pass it over theirs.
func TestConformanceOfAThirdPartyRunner(t *testing.T) {
	pilottest.Conformance(t, jsonlRunner{}, "testdata/jsonl")
}

// The harness is not blind: a case whose verdict the runner does not give
// fails it. The failing run happens in a child test process.
func TestConformanceFailsAWrongCase(t *testing.T) {
	if os.Getenv(envWrongCase) != "" {
		pilottest.Conformance(t, jsonlRunner{}, "testdata/jsonl-wrong")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceFailsAWrongCase$", "-test.count=1")
	cmd.Env = append(os.Environ(), envWrongCase+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the harness passed a wrong case:\n%s", out)
	}
	if !strings.Contains(string(out), "verdict verdict = error, want completed") {
		t.Errorf("the harness failed without naming the wrong verdict:\n%s", out)
	}
}

const envWrongCase = "PILOTTEST_WRONG_CASE"
