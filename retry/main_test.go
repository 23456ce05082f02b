package retry_test

import (
	"os/exec"
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
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=pilot", "-c", "user.email=pilot@example.invalid", "commit", "-q", "--allow-empty", "-m", "start"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}
