//go:build !e2e_fakellm

package e2e_test

import "testing"

// TestScenarios stands in for the scenario runs until internal/fakellm
// lands: they are in scenarios_fakellm_test.go, built with -tags
// e2e_fakellm.
func TestScenarios(t *testing.T) {
	t.Skip("the scenario runs need internal/fakellm (not in this tree yet): once it lands, run go test -tags e2e_fakellm ./e2e")
}
