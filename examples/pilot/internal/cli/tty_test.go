//go:build linux || darwin

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pilotworkers/pilot/retry"
)

// newPTY is a pseudo-terminal (openPTY, from the fanout tests) that the
// test closes when it ends.
func newPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, tty = openPTY(t, 80, 24)
	t.Cleanup(func() { master.Close(); tty.Close() })
	return master, tty
}

// promptWriter reports each write on a channel: the prompt is written once
// echo is off, so the test knows when to type.
type promptWriter chan string

func (w promptWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

func mustTermios(t *testing.T, f *os.File) syscall.Termios {
	t.Helper()
	st, err := termios(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readUntil reads master until it has shown marker, and returns all it
// read.
func readUntil(t *testing.T, master *os.File, marker string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 256)
	for !strings.Contains(got.String(), marker) {
		n, err := master.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("reading the terminal's output: %v (so far %q)", err, got.String())
		}
	}
	return got.String()
}

func TestReadTerminalSecretTurnsEchoOffAndBackOn(t *testing.T) {
	master, tty := newPTY(t)
	before := mustTermios(t, tty)
	if before.Lflag&syscall.ECHO == 0 {
		t.Fatal("a new pseudo-terminal does not echo; nothing to test")
	}
	const secret = "sk-typed-at-the-terminal-0123"
	prompts := make(promptWriter, 2)
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := readTerminalSecret(context.Background(), tty, prompts, "Secret: ")
		done <- result{s, err}
	}()
	if p := <-prompts; p != "Secret: " {
		t.Fatalf("prompt %q", p)
	}
	if st := mustTermios(t, tty); st.Lflag&syscall.ECHO != 0 {
		t.Error("echo is on while the secret is typed")
	}
	master.Write([]byte(secret + "\r")) // Enter on a terminal is a carriage return
	r := <-done
	if r.err != nil || r.s != secret {
		t.Fatalf("readTerminalSecret = %q, %v; want the typed line", r.s, r.err)
	}
	if p := <-prompts; p != "\n" {
		t.Errorf("after the line: wrote %q, want a newline", p)
	}
	if after := mustTermios(t, tty); after != before {
		t.Errorf("terminal attributes not restored:\nbefore %+v\nafter  %+v", before, after)
	}
	// Echo is back: a line typed now shows, and the secret never did.
	master.Write([]byte("echoed-marker\r"))
	if out := readUntil(t, master, "echoed-marker"); strings.Contains(out, secret) {
		t.Errorf("the terminal echoed the secret: %q", out)
	}
}

func TestReadTerminalSecretRestoresTheTerminalWhenInterrupted(t *testing.T) {
	for _, how := range []string{"context", "SIGINT"} {
		t.Run(how, func(t *testing.T) {
			master, tty := newPTY(t)
			before := mustTermios(t, tty)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			prompts := make(promptWriter, 2)
			done := make(chan error, 1)
			go func() {
				_, err := readTerminalSecret(ctx, tty, prompts, "Secret: ")
				done <- err
			}()
			<-prompts
			if how == "context" {
				cancel()
			} else {
				// readTerminalSecret catches SIGINT while it waits, so
				// this does not end the test binary.
				syscall.Kill(os.Getpid(), syscall.SIGINT)
			}
			if err := <-done; !errors.Is(err, errInterrupted) {
				t.Errorf("readTerminalSecret = %v; want errInterrupted", err)
			}
			if after := mustTermios(t, tty); after != before {
				t.Errorf("terminal attributes not restored:\nbefore %+v\nafter  %+v", before, after)
			}
			// The abandoned read takes this line and ends.
			master.Write([]byte("\r"))
		})
	}
}

// A command's JSON result is indented on a terminal, one line elsewhere:
// one JSON value either way.
func TestWriteResultIndentsOnATerminal(t *testing.T) {
	ptm, pts := openPTY(t, 80, 24)
	defer ptm.Close()
	writeResult(pts, []map[string]int{{"a": 1}})
	pts.Close()
	got, _ := io.ReadAll(ptm)
	if want := "[\r\n  {\r\n    \"a\": 1\r\n  }\r\n]\r\n"; string(got) != want {
		t.Errorf("on a terminal: %q, want %q", got, want)
	}
	var b strings.Builder
	writeResult(&b, []map[string]int{{"a": 1}})
	if b.String() != "[{\"a\":1}]\n" {
		t.Errorf("elsewhere: %q", b.String())
	}
}

// On a terminal, credentials --status, state and schedule --dry-run are
// tables a person reads; with --json, and off a terminal, the JSON they
// always were.
func TestStatusCommandsOnATerminal(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	t.Setenv("ZHIPU_API_KEY", "sk-not-shown")
	stateDir := t.TempDir()
	st, err := retry.OpenStore(filepath.Join(stateDir, retry.StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateTask("fix-login", func(ts *retry.TaskState) {
		ts.Group, ts.Blocked = "g1", "3 failures in a row"
		ts.RecoveryFailures = map[string]int{"code": 3}
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	graph := f.writeGraph(t, gjob("a", "ok", f), gjob("b", "ok", f, "a"))
	onTerminal := func(args ...string) string {
		t.Helper()
		ptm, pts := openPTY(t, 200, 40)
		defer ptm.Close()
		var errb bytes.Buffer
		code := run(context.Background(), args, nil, pts, &errb)
		pts.Close()
		out, _ := io.ReadAll(ptm)
		if code != 0 {
			t.Fatalf("pilot %v: exit %d, stderr %q", args, code, errb.String())
		}
		return strings.ReplaceAll(string(out), "\r\n", "\n")
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"credentials", "glm", "--status"}, []string{"PROVIDER  CREDENTIAL     CONFIGURED  SECURE  SOURCE\nglm       ZHIPU_API_KEY  yes         no      env:ZHIPU_API_KEY\n"}},
		{[]string{"state", "--state", stateDir}, []string{": 1 task(s)\nTASK       GROUP  FAILURES  LAST CLASS  BLOCKED              UPDATED\nfix-login  g1     code=3    -           3 failures in a row  "}},
		{f.scheduleArgs(graph, "--dry-run"), []string{"pilot schedule --dry-run: 2 job(s); nothing was run or written\nJOB  WORKER   DEPS  WRITE SET  WORKTREE  SANDBOX\na    ok:code  -     -          no        -\nb    ok:code  a     -          no        -\n"}},
	} {
		out := onTerminal(tt.args...)
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("pilot %v on a terminal:\n%s\nwant it to hold:\n%s", tt.args, out, w)
			}
		}
		if strings.Contains(out, "{") || strings.Contains(out, "sk-not-shown") {
			t.Errorf("pilot %v on a terminal shows JSON or the secret:\n%s", tt.args, out)
		}
		jsonOut := onTerminal(append(tt.args, "--json")...)
		var v any
		if err := json.Unmarshal([]byte(jsonOut), &v); err != nil {
			t.Errorf("pilot %v --json on a terminal is not JSON: %v\n%s", tt.args, err, jsonOut)
		}
		if code, out, _ := runCLI(tt.args...); code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Errorf("pilot %v off a terminal: exit %d, not JSON:\n%s", tt.args, code, out)
		}
	}
}
