package e2e_test

import (
	"flag"
	"os"
	"testing"
)

// scenarioParallel is how many e2e tests run at once unless -parallel says
// otherwise. The scenarios mostly wait (on the CLIs' retry delays, a
// sleeping tool, a silent model), not on the CPU, so more of them at once
// than the default GOMAXPROCS shortens the suite's wall time.
const scenarioParallel = "5"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", scenarioParallel)
	}
	os.Exit(m.Run())
}
