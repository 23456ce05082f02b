//go:build linux

package pilot_test

// Tests of the sandbox as a hostile worker meets it: the worker (this test
// binary re-executed as a probe) tries to read secrets, write outside its
// workdir, connect where it should not and signal its parent, and each
// probe must get exactly what its mode allows.

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/sandbox"
)

func requireLandlock(t *testing.T, abi int) {
	t.Helper()
	got, err := landlock.ABI()
	if got < abi {
		t.Skipf("needs Landlock ABI %d; this kernel offers %d (%v)", abi, got, err)
	}
}

// sandboxWorld is a home with secrets in it, a credential store holding
// another provider's key, a workdir, a directory outside everything the
// worker may write, and two listening ports.
type sandboxWorld struct {
	home, store, workdir, outside string
	endpoint, other               net.Listener
	otherSecret                   string
}

func newSandboxWorld(t *testing.T) *sandboxWorld {
	t.Helper()
	w := &sandboxWorld{
		home:        t.TempDir(),
		workdir:     t.TempDir(),
		outside:     t.TempDir(),
		otherSecret: "provb-stored-key-7d1e9a",
	}
	w.store = filepath.Join(w.home, ".config", "pilot", "credentials")
	for path, data := range map[string]string{
		filepath.Join(w.store, "provb"):                w.otherSecret + "\n",
		filepath.Join(w.home, ".ssh", "id_ed25519"):    "ssh-private-key\n",
		filepath.Join(w.home, ".aws", "credentials"):   "[default]\naws_secret_access_key=aws-secret\n",
		filepath.Join(w.home, "projects", "notes.txt"): "mine\n",
		filepath.Join(w.home, ".codex", "auth.json"):   `{"OPENAI_API_KEY":"codex-login"}` + "\n",
		filepath.Join(w.home, ".config", "other", "x"): "not a secret\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []*net.Listener{&w.endpoint, &w.other} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		*l = ln
	}
	return w
}

// dispatcher returns a Dispatcher whose workers have w's home, whose
// credential store is w's, and whose providers are a probing "prova" and a
// "provb" with a stored key.
func (w *sandboxWorld) dispatcher(t *testing.T, probes ...string) *pilot.Dispatcher {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := pilot.Provider{
		Name: "prova", Runner: "command",
		Argv:           append([]string{exe}, probes...),
		Env:            map[string]string{envProbe: "1", "GORACE": "atexit_sleep_ms=0"},
		SandboxConnect: []string{w.endpoint.Addr().String()},
	}
	b := pilot.Provider{Name: "provb", Runner: "command", Argv: []string{"true"}, CredentialEnv: "PROVB_TEST_KEY"}
	return w.dispatcherOf(t, a, b)
}

// dispatcherOf returns a Dispatcher of providers ps whose workers have w's
// home and whose credential store is w's.
func (w *sandboxWorld) dispatcherOf(t *testing.T, ps ...pilot.Provider) *pilot.Dispatcher {
	t.Helper()
	d := testDispatcher(t, ps...)
	d.Credentials = config.FileCredentials{Dir: w.store}
	d.LookupEnv = func(k string) (string, bool) {
		switch k {
		case "PATH":
			return os.LookupEnv(k)
		case "HOME":
			return w.home, true
		}
		return "", false
	}
	return d
}

// probes dispatches the probes under mode and returns each probe's result
// ("ok" or "denied") and the verdict.
func (w *sandboxWorld) probes(t *testing.T, mode sandbox.Mode, probes []string) (map[string]string, pilot.Verdict) {
	t.Helper()
	d := w.dispatcher(t, probes...)
	got := map[string]string{}
	d.OnLine = onLine("probe ", func(line string) {
		f := strings.Fields(line)
		got[f[1]] = f[2]
	})
	tk := task("prova")
	tk.Workdir, tk.Sandbox = w.workdir, mode
	v := dispatch(t, d, tk)
	if v.Verdict != pilot.Completed {
		t.Fatalf("probe worker: verdict %s (%s), stderr %q", v.Verdict, v.FailureClass, v.StderrTail)
	}
	return got, v
}

func TestSandboxProbesGetWhatTheirModeAllows(t *testing.T) {
	requireLandlock(t, 6)
	w := newSandboxWorld(t)
	names := map[string]string{
		"other-credential": "read:" + filepath.Join(w.store, "provb"),
		"ssh-key":          "read:" + filepath.Join(w.home, ".ssh", "id_ed25519"),
		"aws-credentials":  "read:" + filepath.Join(w.home, ".aws", "credentials"),
		"other-cli-login":  "read:" + filepath.Join(w.home, ".codex", "auth.json"),
		"list-store":       "list:" + w.store,
		"read-home":        "read:" + filepath.Join(w.home, "projects", "notes.txt"),
		"write-workdir":    "write:" + filepath.Join(w.workdir, "probe"),
		"write-outside":    "write:" + filepath.Join(w.outside, "probe"),
		"write-home":       "write:" + filepath.Join(w.home, "projects", "probe"),
		"write-config":     "write:" + filepath.Join(w.home, ".config", "other", "probe"),
		"write-tmp":        "write-tmpdir",
		"connect-endpoint": "connect:" + w.endpoint.Addr().String(),
		"connect-other":    "connect:" + w.other.Addr().String(),
		"signal-parent":    "signal-parent",
		"trace-parent":     "trace-parent",
	}
	const ok, no = "ok", "denied"
	secretsDenied := map[string]string{"other-credential": no, "ssh-key": no, "aws-credentials": no, "other-cli-login": no, "list-store": no}
	want := map[sandbox.Mode]map[string]string{
		sandbox.Off:       {"write-outside": ok, "write-home": ok, "write-config": ok, "connect-other": ok},
		sandbox.Secrets:   {"write-outside": ok, "write-home": ok, "write-config": ok, "connect-other": ok},
		sandbox.Workspace: {"write-outside": no, "write-home": no, "write-config": no, "connect-other": ok},
		sandbox.Strict:    {"write-outside": no, "write-home": no, "write-config": no, "connect-other": no},
	}
	for mode, m := range want {
		for _, n := range []string{"read-home", "write-workdir", "write-tmp", "connect-endpoint"} {
			m[n] = ok
		}
		m["signal-parent"] = no // scoped in every mode
		m["trace-parent"] = no
		for n := range secretsDenied {
			m[n] = no
			if mode == sandbox.Off {
				m[n] = ok
			}
		}
	}
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.Secrets, sandbox.Workspace, sandbox.Strict} {
		t.Run(string(mode), func(t *testing.T) {
			var probes []string
			byProbe := map[string]string{}
			for name, p := range names {
				probes = append(probes, p)
				byProbe[p] = name
			}
			got, v := w.probes(t, mode, probes)
			gotByName := map[string]string{}
			for p, res := range got {
				gotByName[byProbe[p]] = res
			}
			if diff := cmp.Diff(want[mode], gotByName); diff != "" {
				t.Errorf("probes under %s (-want +got):\n%s", mode, diff)
			}
			if v.Sandbox == nil || v.Sandbox.Mode != mode || v.Sandbox.Enforced != (mode != sandbox.Off) || !v.Sandbox.Scoped {
				t.Errorf("verdict's sandbox = %+v, want mode %s, enforced %v, scoped", v.Sandbox, mode, mode != sandbox.Off)
			}
			// Whoever printed it, no file pilot wrote holds the other
			// provider's key.
			assertNoSecretIn(t, filepath.Dir(v.Record), w.otherSecret)
		})
	}
}

// A worker cannot read the environment of a sibling worker (another
// provider's, its credential variable in it) nor of the program that runs
// pilot, in any mode: its Landlock domain is none of theirs. Run as root,
// as CI runs, this also holds the root worker's CAP_SYS_ADMIN and
// CAP_PERFMON to account, either of which reads any environment.
func TestSandboxWorkerCannotReadAnotherProcessEnvironment(t *testing.T) {
	requireLandlock(t, 1)
	w := newSandboxWorld(t)
	fifo := filepath.Join(t.TempDir(), "hold")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The sibling: provb's worker, holding its stored key in
	// PROVB_TEST_KEY, until the test lets it go.
	sd := w.dispatcherOf(t, pilot.Provider{
		Name: "provb", Runner: "command", CredentialEnv: "PROVB_TEST_KEY",
		Argv: []string{exe, "hold:" + fifo},
		Env:  map[string]string{envProbe: "1", "GORACE": "atexit_sleep_ms=0"},
	})
	held := make(chan string, 1)
	sd.OnLine = onLine("probe held ", func(line string) { held <- strings.Fields(line)[2] })
	sib := task("provb")
	sib.Workdir, sib.Sandbox = w.workdir, sandbox.Off
	sibDone := make(chan pilot.Verdict, 1)
	go func() {
		v, err := sd.Dispatch(context.Background(), sib)
		if err != nil {
			t.Errorf("the sibling: %v", err)
		}
		sibDone <- v
	}()
	var sibPid string
	select {
	case sibPid = <-held:
	case v := <-sibDone:
		t.Fatalf("the sibling ended before it held: %s %s %q", v.Verdict, v.FailureClass, v.StderrTail)
	}
	defer func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if v := <-sibDone; v.Verdict != pilot.Completed {
			t.Errorf("the sibling: %s %s %q", v.Verdict, v.FailureClass, v.StderrTail)
		}
	}()
	// Readable at all: the test itself (unconfined) reads it.
	if data, err := os.ReadFile("/proc/" + sibPid + "/environ"); err != nil || !strings.Contains(string(data), w.otherSecret) {
		t.Fatalf("the sibling's environment, read by the test: %v; holds its key: %v", err, strings.Contains(string(data), w.otherSecret))
	}
	probes := []string{"environ:" + sibPid, "environ:" + strconv.Itoa(os.Getpid())}
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.Secrets, sandbox.Strict} {
		got, v := w.probes(t, mode, probes)
		want := map[string]string{probes[0]: "denied", probes[1]: "denied"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("under %s, reading environments (-want +got):\n%s", mode, diff)
		}
		assertNoSecretIn(t, filepath.Dir(v.Record), w.otherSecret)
	}
}

// assertNoSecretIn fails if any file beneath dir holds secret.
func assertNoSecretIn(t *testing.T, dir, secret string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("%s holds the other provider's secret", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A worker that failed after it was denied an access has that line as
// evidence beside its verdict, whose class stays its own.
func TestSandboxDenialIsEvidenceOfAFailure(t *testing.T) {
	requireLandlock(t, 3)
	w := newSandboxWorld(t)
	d := w.dispatcher(t, "write:"+filepath.Join(w.outside, "x"), "exit:")
	tk := task("prova")
	tk.Workdir, tk.Sandbox = w.workdir, sandbox.Workspace
	v := dispatch(t, d, tk)
	if v.Verdict != pilot.Failed || v.FailureClass != pilot.FailGeneric {
		t.Errorf("verdict %s (%s), want error (generic-error)", v.Verdict, v.FailureClass)
	}
	if v.Sandbox == nil || !strings.Contains(v.Sandbox.Denied, "permission denied") || !strings.Contains(v.Sandbox.Denied, w.outside) {
		t.Errorf("sandbox report %+v: want the denied write as evidence", v.Sandbox)
	}
	// A worker that succeeds carries no denial, whatever it was denied.
	d = w.dispatcher(t, "write:"+filepath.Join(w.outside, "x"))
	if v := dispatch(t, d, tk); v.Verdict != pilot.Completed || v.Sandbox == nil || v.Sandbox.Denied != "" {
		t.Errorf("a worker that completed: verdict %s, sandbox %+v; want no denial", v.Verdict, v.Sandbox)
	}
}

// A mode asked for that the kernel cannot enforce spawns nothing, and the
// error names the mode, the missing feature and the way out; the default
// mode there runs unconfined and says so.
func TestSandboxFailsClosedWhenAskedAndSaysSoByDefault(t *testing.T) {
	w := newSandboxWorld(t)
	marker := filepath.Join(w.outside, "ran")
	for _, tt := range []struct {
		name     string
		abi      int
		abiErr   error
		mode     sandbox.Mode // the task's
		provider sandbox.Mode
		missing  string // in the error; "" for a run
	}{
		{name: "strict without ABI 4", abi: 3, mode: sandbox.Strict, missing: "Landlock ABI 4 or later (this kernel offers ABI 3)"},
		{name: "workspace without Landlock", abiErr: syscall.EOPNOTSUPP, mode: sandbox.Workspace, missing: "Landlock, which this kernel does not offer"},
		{name: "the provider's secrets without Landlock", abiErr: syscall.ENOSYS, provider: sandbox.Secrets, missing: "Landlock"},
		{name: "the default without Landlock", abiErr: syscall.ENOSYS},
		{name: "off without Landlock", abiErr: syscall.ENOSYS, mode: sandbox.Off},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pilot.SetLandlockABI(t, tt.abi, tt.abiErr)
			os.Remove(marker)
			d := w.dispatcher(t, "write:"+marker)
			if tt.provider != "" {
				p, _ := d.Providers.Lookup("prova")
				p.Sandbox = tt.provider
				reg, err := d.Providers.With(p)
				if err != nil {
					t.Fatal(err)
				}
				d.Providers = reg
			}
			tk := task("prova")
			tk.Workdir, tk.Sandbox = w.workdir, tt.mode
			v, err := d.Dispatch(context.Background(), tk)
			_, ranErr := os.Stat(marker)
			if tt.missing != "" {
				if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), tt.missing) || !strings.Contains(err.Error(), "--sandbox off") {
					t.Fatalf("Dispatch = %v; want an UnavailableError naming %q and --sandbox off", err, tt.missing)
				}
				if ranErr == nil {
					t.Error("the worker ran")
				}
				return
			}
			if err != nil || v.Verdict != pilot.Completed || ranErr != nil {
				t.Fatalf("Dispatch = %s, %v (worker ran: %v); want it run", v.Verdict, err, ranErr == nil)
			}
			if v.Sandbox == nil || v.Sandbox.Enforced || v.Sandbox.Scoped || v.Sandbox.Reason == "" {
				t.Errorf("sandbox report %+v; want not enforced, not scoped, with the reason", v.Sandbox)
			}
		})
	}
}
