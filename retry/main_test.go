package retry_test

import (
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) { pilottest.Main(m) }

// The test helpers the retry tests share, over pilottest's fake agent.

func fakeProvider(t testing.TB, name string, script ...string) pilot.Provider {
	return pilottest.FakeProvider(t, name, script...)
}

func testDispatcher(t testing.TB, ps ...pilot.Provider) *pilot.Dispatcher {
	return pilottest.Dispatcher(t, ps)
}

func task(provider string) pilot.Task {
	return pilot.Task{Provider: provider, Mode: pilot.ModeCode, Prompt: "do the thing"}
}

// gitRepo is pilottest.GitRepo.
func gitRepo(t *testing.T) string { return pilottest.GitRepo(t) }
