package pilot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot/internal/seatbelt"
	"github.com/pilotworkers/pilot/sandbox"
)

// needsRunner is a SandboxRunner with fixed needs.
type needsRunner struct {
	name  string
	needs sandbox.Needs
}

func (n needsRunner) Name() string { return n.name }
func (n needsRunner) Command(context.Context, Attempt) (*Command, error) {
	return nil, errors.New("not started")
}
func (n needsRunner) SandboxNeeds(p Provider, home string) sandbox.Needs { return n.needs }

// seatbeltRun returns a run of runner "mine" (needs) beside runner "other"
// (which owns ~/.other), in a temp home, workdir and run dir.
func seatbeltRun(t *testing.T, needs sandbox.Needs, prov Provider) (*run, string) {
	t.Helper()
	base := realPath(t.TempDir())
	home := filepath.Join(base, "home")
	for _, d := range []string{home, filepath.Join(base, "work"), filepath.Join(base, "runs", "r1")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mine := needsRunner{"mine", needs}
	other := needsRunner{"other", sandbox.Needs{Own: []string{filepath.Join(home, ".other")}}}
	d := &Dispatcher{
		Runners:   []Runner{mine, other},
		LookupEnv: func(k string) (string, bool) { return map[string]string{"HOME": home}[k], k == "HOME" },
	}
	return &run{d: d, task: Task{Workdir: filepath.Join(base, "work")}, prov: prov, runner: mine, dir: filepath.Join(base, "runs", "r1")}, home
}

func TestConfineSeatbeltModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-ins for sandbox-exec are shell scripts")
	}
	script := func(body string) string {
		exe := filepath.Join(t.TempDir(), "sandbox-exec")
		if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return exe
	}
	exe := script("exit 0")
	refusing := script("echo 'sandbox-exec: sandbox_apply: Operation not permitted' >&2; exit 71")
	missing := filepath.Join(t.TempDir(), "none")
	tests := []struct {
		name     string
		mode     sandbox.Mode
		asked    bool
		exe      string
		needs    sandbox.Needs
		enforced bool
		unavail  bool   // an *UnavailableError
		reason   string // in the Reason, or the error
	}{
		{name: "off", mode: sandbox.Off, asked: true, exe: exe, reason: "sandbox off"},
		{name: "default secrets", mode: sandbox.Secrets, exe: exe, enforced: true},
		{name: "workspace", mode: sandbox.Workspace, asked: true, exe: exe, enforced: true},
		{name: "strict", mode: sandbox.Strict, asked: true, exe: exe, unavail: true, reason: "connect filtering"},
		{name: "default without sandbox-exec", mode: sandbox.Secrets, exe: missing, reason: missing},
		{name: "asked without sandbox-exec", mode: sandbox.Secrets, asked: true, exe: missing, unavail: true, reason: missing},
		{name: "default inside another sandbox", mode: sandbox.Secrets, exe: refusing, reason: "sandbox_apply: Operation not permitted"},
		{name: "asked inside another sandbox", mode: sandbox.Workspace, asked: true, exe: refusing, unavail: true, reason: "as inside another sandbox"},
		{name: "default, a CLI with its own sandbox", mode: sandbox.Secrets, exe: exe, needs: sandbox.Needs{Seatbelt: true}, reason: "own sandbox-exec"},
		{name: "asked, a CLI with its own sandbox", mode: sandbox.Workspace, asked: true, exe: exe, needs: sandbox.Needs{Seatbelt: true}, unavail: true, reason: "own sandbox-exec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := seatbeltRun(t, tt.needs, Provider{})
			rep, err := r.confineSeatbelt(tt.mode, tt.asked, tt.exe)
			var ue *sandbox.UnavailableError
			if tt.unavail {
				if !errors.As(err, &ue) || ue.Mode != tt.mode || !strings.Contains(ue.Missing, tt.reason) {
					t.Fatalf("err = %v, want an UnavailableError for %s naming %q", err, tt.mode, tt.reason)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if rep.Mode != tt.mode || rep.Enforced != tt.enforced || rep.Scoped {
				t.Errorf("report %+v: want mode %s, enforced %v, never scoped", rep, tt.mode, tt.enforced)
			}
			if !tt.unavail && !strings.Contains(rep.Reason, tt.reason) {
				t.Errorf("reason %q does not hold %q", rep.Reason, tt.reason)
			}
			if !tt.enforced {
				if r.wrapper != nil || rep.Mechanism != "" || rep.Profile != "" {
					t.Errorf("an unenforced worker is wrapped: %q, report %+v", r.wrapper, rep)
				}
				return
			}
			if rep.Mechanism != "sandbox-exec" || rep.Profile != filepath.Join(r.dir, "sandbox.sb") {
				t.Errorf("report %+v: want mechanism sandbox-exec and the profile in the run dir", rep)
			}
			prof, err := os.ReadFile(rep.Profile)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{tt.exe, "-p", string(prof), "--"}
			if diff := cmp.Diff(want, r.wrapper); diff != "" {
				t.Errorf("wrapper (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSeatbeltPolicy(t *testing.T) {
	prov := Provider{SandboxAllow: []string{"~/.ssh"}, SandboxWrite: []string{"~/cache"}}
	for _, mode := range []sandbox.Mode{sandbox.Secrets, sandbox.Workspace} {
		t.Run(string(mode), func(t *testing.T) {
			r, home := seatbeltRun(t, sandbox.Needs{}, prov)
			base := filepath.Dir(home)
			own := filepath.Join(home, ".mine")
			state := filepath.Join(base, "state")
			needs := sandbox.Needs{Own: []string{own}, Write: []string{state}}
			// A link in the workdir's path: the profile holds both names.
			link := filepath.Join(base, "link")
			if err := os.Symlink(filepath.Join(base, "work"), link); err != nil {
				t.Fatal(err)
			}
			r.task.Workdir = link
			got, allow := r.seatbeltPolicy(mode, needs, home)

			if diff := cmp.Diff([]string{filepath.Join(home, ".ssh")}, allow); diff != "" {
				t.Errorf("allowed (-want +got):\n%s", diff)
			}
			guard := append(sandbox.SecretStores(home), sandbox.AgentDirs(home)...)
			guard = append(guard, filepath.Join(home, ".other"))
			want := seatbelt.Policy{
				Guard:    guard,
				Allow:    []string{own, filepath.Join(home, ".ssh")},
				WriteAll: mode == sandbox.Secrets,
			}
			if mode == sandbox.Workspace {
				want.Write = append([]string{filepath.Join(base, "work"), link, r.dir, r.tmpDir(), own, state, filepath.Join(home, "cache")},
					resolvedPaths(seatbeltDevices)...) // links on Linux (/dev/fd), not on macOS
				if _, err := os.Stat(state); err != nil {
					t.Errorf("the CLI's write dir was not made: %v", err)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWrapped(t *testing.T) {
	argv := []string{"claude", "-p", "hi"}
	path, got := wrapped(nil, "/bin/claude", argv)
	if path != "/bin/claude" || !cmp.Equal(got, argv) {
		t.Errorf("unwrapped: %q %q", path, got)
	}
	path, got = wrapped([]string{sandboxExec, "-p", "(version 1)", "--"}, "/bin/claude", argv)
	want := []string{sandboxExec, "-p", "(version 1)", "--", "/bin/claude", "-p", "hi"}
	if path != sandboxExec || !cmp.Equal(want, got) {
		t.Errorf("wrapped: %q %q, want %q %q", path, got, sandboxExec, want)
	}
	if argv[0] != "claude" {
		t.Errorf("the runner's argv was changed: %q", argv)
	}
}

func TestRealPath(t *testing.T) {
	dir := realPath(t.TempDir())
	if err := os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		filepath.Join(dir, "link"):                 filepath.Join(dir, "real"),
		filepath.Join(dir, "link", "not", "there"): filepath.Join(dir, "real", "not", "there"),
		filepath.Join(dir, "none"):                 filepath.Join(dir, "none"),
		"/":                                        "/",
	} {
		if got := realPath(in); got != want {
			t.Errorf("realPath(%q) = %q, want %q", in, got, want)
		}
	}
}
