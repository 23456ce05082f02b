package agents_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) { pilottest.Main(m) }

// conformanceRunners are the agent CLI runners, each with its recorded
// streams in testdata/<runner>/stream/ at the repository root.
func conformanceRunners() []pilot.Runner {
	var out []pilot.Runner
	for _, r := range agents.Runners() {
		if r.Name() != "command" {
			out = append(out, r)
		}
	}
	return out
}

func caseDir(runner string) string { return filepath.Join("..", "testdata", runner, "stream") }

// TestConformance runs pilottest's conformance harness, which any
// third-party runner can run too, over every built-in agent CLI runner.
func TestConformance(t *testing.T) {
	for _, rn := range conformanceRunners() {
		t.Run(rn.Name(), func(t *testing.T) { pilottest.Conformance(t, rn, caseDir(rn.Name())) })
	}
}

func loadConformance(t *testing.T, runner string) map[string]pilottest.Case {
	t.Helper()
	cases, err := pilottest.Cases(caseDir(runner))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestConformanceCoverage checks that every runner's cases cover what the
// suite promises, and logs the table of runners × outcomes (go test -run
// TestConformanceCoverage -v).
func TestConformanceCoverage(t *testing.T) {
	kinds := []string{"completed", "tool use", "parallel tools", "step cap", "empty", "incomplete", "resume", "provider fault", "termination"}
	var table strings.Builder
	fmt.Fprintf(&table, "%-9s", "runner")
	for _, k := range kinds {
		fmt.Fprintf(&table, " | %s", k)
	}
	table.WriteString("\n")
	for _, rn := range conformanceRunners() {
		count := map[string]int{}
		classes := map[string]bool{}
		for _, c := range loadConformance(t, rn.Name()) {
			var verdict, class string
			json.Unmarshal(c.Want["verdict"], &verdict)
			json.Unmarshal(c.Want["failure_class"], &class)
			switch {
			case verdict == string(pilot.Completed):
				count["completed"]++
			case verdict == string(pilot.StepCappedPartial):
				count["step cap"]++
			case verdict == string(pilot.Empty):
				count["empty"]++
			case class == string(pilot.FailIncomplete):
				count["incomplete"]++
			case class == string(pilot.FailProcessTerminated):
				count["termination"]++
			case verdict == string(pilot.Failed):
				count["provider fault"]++
				classes[class] = true
			}
			if c.Resume != "" {
				count["resume"]++
			}
			tools := 0
			for _, p := range c.Phases {
				if p == pilot.PhaseToolRunning {
					tools++
				}
			}
			if tools > 0 || slices.Contains(c.Tags, "tool-use") {
				count["tool use"]++
			}
			if slices.Contains(c.Tags, "parallel-tools") {
				count["parallel tools"]++
			}
		}
		fmt.Fprintf(&table, "%-9s", rn.Name())
		for _, k := range kinds {
			fmt.Fprintf(&table, " | %d", count[k])
		}
		cl := make([]string, 0, len(classes))
		for c := range classes {
			cl = append(cl, c)
		}
		sort.Strings(cl)
		fmt.Fprintf(&table, " | faults: %s\n", strings.Join(cl, ", "))
		for _, k := range []string{"completed", "tool use", "parallel tools", "empty", "resume", "provider fault"} {
			if count[k] == 0 {
				t.Errorf("%s: no conformance case for %s", rn.Name(), k)
			}
		}
	}
	t.Logf("conformance cases per runner:\n%s", table.String())
}
