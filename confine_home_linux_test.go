//go:build linux

package pilot_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/sandbox"
)

// needyRunner runs the fake agent with its provider's Args as the script,
// declaring a CLI's own dir and state dir beneath the home it is given,
// and recording the homes it was asked about.
type needyRunner struct {
	exe   string
	name  string
	mu    sync.Mutex
	asks  []string       // "<provider name>@<home>"
	modes []sandbox.Mode // each attempt's Sandbox
}

func (r *needyRunner) Name() string { return r.name }

func (r *needyRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	r.mu.Lock()
	r.modes = append(r.modes, a.Sandbox)
	r.mu.Unlock()
	return &pilot.Command{Argv: append([]string{r.exe}, a.Provider.Args...)}, nil
}

func (r *needyRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	r.mu.Lock()
	r.asks = append(r.asks, p.Name+"@"+home)
	r.mu.Unlock()
	own := filepath.Join(home, "."+r.name)
	return sandbox.Needs{Own: []string{own}, Write: []string{filepath.Join(own, "state")}}
}

// TestSandboxFollowsTheWorkersHome: a provider's env that moves HOME moves
// where its CLI's dirs are (made by pilot when missing, in every mode),
// and the user's own home stays guarded all the same.
func TestSandboxFollowsTheWorkersHome(t *testing.T) {
	if abi, err := landlock.ABI(); abi < 3 {
		t.Skipf("Landlock ABI %d (%v): the workspace mode needs 3", abi, err)
	}
	user, worker := t.TempDir(), t.TempDir()
	for _, dir := range []string{filepath.Join(user, ".rival"), filepath.Join(worker, ".rival"), filepath.Join(user, ".needy")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	needy := &needyRunner{exe: exe, name: "needy"}
	rival := &needyRunner{exe: exe, name: "rival"}
	write := func(mode sandbox.Mode, path string) pilot.Provider {
		p := fakeProvider(t, "write", "write="+path+"=x", "out=wrote")
		p.Runner, p.Sandbox, p.Args, p.Argv = "needy", mode, p.Argv[1:], nil
		p.Env["HOME"] = worker
		return p
	}
	tests := []struct {
		name string
		p    pilot.Provider
		want pilot.Outcome
	}{
		{"its state dir, in the worker's home, secrets", write(sandbox.Secrets, filepath.Join(worker, ".needy", "state", "f")), pilot.Completed},
		{"its state dir, in the worker's home, workspace", write(sandbox.Workspace, filepath.Join(worker, ".needy", "state", "g")), pilot.Completed},
		{"another CLI's dir in the worker's home", write(sandbox.Secrets, filepath.Join(worker, ".rival", "key")), pilot.Failed},
		{"another CLI's dir in the user's home", write(sandbox.Secrets, filepath.Join(user, ".rival", "key")), pilot.Failed},
		{"its own dir in the user's home", write(sandbox.Secrets, filepath.Join(user, ".needy", "key")), pilot.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testDispatcher(t, tt.p)
			d.Runners = []pilot.Runner{needy, rival}
			d.LookupEnv = func(k string) (string, bool) {
				switch k {
				case "PATH":
					return os.LookupEnv(k)
				case "HOME":
					return user, true
				}
				return "", false
			}
			v, err := d.Dispatch(context.Background(), task(tt.p.Name))
			if err != nil {
				t.Fatal(err)
			}
			if v.Verdict != tt.want {
				t.Errorf("verdict %s (%s: %s), want %s", v.Verdict, v.FailureClass, v.StderrTail, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(user, ".needy", "state")); err == nil {
		t.Errorf("pilot made the CLI's dirs in the user's home, not the worker's")
	}
	for _, a := range needy.asks {
		if name, home, _ := strings.Cut(a, "@"); name != "" && home != worker {
			t.Errorf("needy was asked %q: want its worker's home %s", a, worker)
		}
	}
	for _, home := range []string{user, worker} {
		if !slices.Contains(rival.asks, "@"+home) {
			t.Errorf("rival's own dirs in %s were not asked for (asks %q): both homes are guarded", home, rival.asks)
		}
	}
}

// TestAttemptSandbox: a runner learns the mode pilot will enforce.
func TestAttemptSandbox(t *testing.T) {
	if abi, err := landlock.ABI(); abi < 4 {
		t.Skipf("Landlock ABI %d (%v): the strict mode needs 4", abi, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []sandbox.Mode{"", sandbox.Off, sandbox.Secrets, sandbox.Workspace, sandbox.Strict} {
		r := &needyRunner{exe: exe, name: "needy"}
		p := fakeProvider(t, "p", "out=hi")
		p.Runner, p.Sandbox, p.Args, p.Argv = "needy", mode, p.Argv[1:], nil
		d := testDispatcher(t, p)
		d.Runners = []pilot.Runner{r}
		if v := dispatch(t, d, task("p")); v.Verdict != pilot.Completed {
			t.Errorf("sandbox %q: verdict %s (%s)", mode, v.Verdict, v.StderrTail)
		}
		want := mode
		if want == "" {
			want = sandbox.Default
		}
		if len(r.modes) != 1 || r.modes[0] != want {
			t.Errorf("sandbox %q: the attempts' Sandbox %q, want %q", mode, r.modes, want)
		}
	}
}
