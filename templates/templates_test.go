package templates_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/templates"
)

func TestFor(t *testing.T) {
	// What every template must ask for, and what each mode adds.
	common := []string{"## Goal", "## Scope", "## Constraints", "## Done when", "## Report back"}
	tests := []struct {
		mode pilot.Mode
		want []string
	}{
		{pilot.ModeCode, append(common, "Mode: code", "You may change:", "Do not touch:")},
		{pilot.ModeExplore, []string{"Mode: explore", "Read-only", "## Questions to answer", "## Where to look", "## Constraints", "## Done when", "## Report back", "path:line"}},
		{pilot.ModeTest, []string{"Mode: test", "## What to run", "## What passing looks like", "## On failure", "## Done when", "## Report back", "exit status"}},
		{pilot.ModeReview, []string{"Mode: review", "Read-only", "## What to review", "## Focus", "## Done when", "## Verdict format",
			"VERDICT: approve | approve-with-nits | request-changes | blocked", "[blocker|major|minor|nit] path:line"}},
	}
	seen := map[string]pilot.Mode{}
	for _, tt := range tests {
		text, err := templates.For(tt.mode)
		if err != nil {
			t.Fatalf("For(%s): %v", tt.mode, err)
		}
		if !strings.HasPrefix(text, "# ") || !strings.HasSuffix(text, "\n") {
			t.Errorf("For(%s) is not a Markdown document starting with a title and ending with a newline", tt.mode)
		}
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("For(%s) lacks %q", tt.mode, w)
			}
		}
		if m, dup := seen[text]; dup {
			t.Errorf("For(%s) is the same as For(%s)", tt.mode, m)
		}
		seen[text] = tt.mode
	}
	for _, m := range []pilot.Mode{pilot.ModeResume, "write", ""} {
		text, err := templates.For(m)
		if err == nil || text != "" || !strings.Contains(err.Error(), "code, explore, test, review") {
			t.Errorf("For(%q) = %q, %v; want an error that lists the modes with templates", m, text, err)
		}
	}
}

func ExampleFor() {
	text, _ := templates.For(pilot.ModeReview)
	fmt.Println(strings.SplitN(text, "\n", 2)[0])
	_, err := templates.For("write")
	fmt.Println(err)
	// Output:
	// # Review: <one line: the change under review>
	// pilot: unknown mode "write" for a task template: want one of code, explore, test, review
}
