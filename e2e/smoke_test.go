package e2e_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// TestSmokeVersion runs each installed CLI's version command through a
// Dispatcher with a command-runner provider, in an isolated home, stdin
// /dev/null (the runners' default for a task without stdin) and the
// network guard as proxy. It needs no model: it proves the CLI installed
// from the lock file starts here, prints the pinned version on stdout, is
// judged completed, and leaves no process of its run behind.
func TestSmokeVersion(t *testing.T) {
	for _, c := range clis {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bin := c.binary(t)
			want := c.pinnedVersion(t)
			guard := newNetGuard(t)

			argv := append([]string{bin}, c.version...)
			if c.versionOnStderr {
				// exec: the CLI replaces the shell, so the process tree
				// is the CLI's own.
				argv = append([]string{"/bin/sh", "-c", `exec "$0" "$@" 2>&1`}, argv...)
			}
			env := isolatedEnv(t, guard)
			if path := c.workerPath(t); path != "" {
				env["PATH"] = path // the node this CLI needs, first
			}
			prov := pilot.Provider{
				Name:   "e2e-" + c.name,
				Runner: "command",
				Argv:   argv,
				Env:    env,
			}
			reg, err := pilot.NewRegistry(prov)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var stdout []string
			d := &pilot.Dispatcher{
				Runners:   agents.Runners(),
				Providers: reg,
				RunDir:    t.TempDir(),
				// The worker inherits PATH alone (node for the node
				// CLIs); everything else comes from the isolated env.
				LookupEnv: func(k string) (string, bool) {
					if k == "PATH" {
						return os.LookupEnv(k)
					}
					return "", false
				},
				OnLine: func(_ string, l pilot.Line) {
					if l.Stream == pilot.Stdout {
						mu.Lock()
						stdout = append(stdout, string(l.Data))
						mu.Unlock()
					}
				},
			}
			v, err := d.Dispatch(context.Background(), pilot.Task{
				Provider: prov.Name,
				Mode:     pilot.ModeExplore,
				Prompt:   "print the version",
				Workdir:  t.TempDir(),
			})
			if err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
			if v.Verdict != pilot.Completed || v.ExitCode == nil || *v.ExitCode != 0 {
				t.Errorf("verdict %q exit %v class %q (evidence %q), want completed with exit 0; stderr tail: %s",
					v.Verdict, exitCode(v), v.FailureClass, v.EvidenceExcerpt, v.StderrTail)
			}
			mu.Lock()
			out := strings.Join(stdout, "\n")
			mu.Unlock()
			if !strings.Contains(out, want) {
				t.Errorf("stdout %q does not hold the version package-lock.json pins, %s", out, want)
			}
			if v.RunID == "" {
				t.Fatal("the verdict has no run id")
			}
			if left := procfs.WithEnv(pilot.EnvRunID + "=" + v.RunID); len(left) > 0 {
				t.Errorf("processes of run %s still alive after Dispatch returned: %v", v.RunID, left)
			}
			if s := guard.seen(); len(s) > 0 {
				t.Logf("%s %s asked beyond 127.0.0.1 (refused by the guard): %q", c.name, strings.Join(c.version, " "), s)
			}
			t.Logf("%s %s: %s in %d ms, leftovers %d", c.name, want, v.Verdict, v.DurationMS, v.Leftovers)
		})
	}
}

func exitCode(v pilot.Verdict) any {
	if v.ExitCode == nil {
		return nil
	}
	return *v.ExitCode
}
