package agents_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

func TestCodexSandboxNeeds(t *testing.T) {
	var _ pilot.SandboxRunner = agents.CodexRunner{}
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"-c", "model_reasoning_effort=high"}, true},
		{[]string{"--dangerously-bypass-approvals-and-sandbox"}, false},
		{[]string{"-s", "danger-full-access"}, false},
		{[]string{"--sandbox=danger-full-access"}, false},
	} {
		got := agents.CodexRunner{}.SandboxNeeds(pilot.Provider{Args: tt.args}, "/home/u").Seatbelt
		if got != tt.want {
			t.Errorf("args %q: Seatbelt %v, want %v", tt.args, got, tt.want)
		}
	}
}
