package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/pilottest"
)

// demoJob is one scripted job of the demo.
type demoJob struct {
	name    string
	about   string
	script  []string
	timeout time.Duration
}

var demoJobs = []demoJob{
	{
		name:   "completes",
		about:  "prints its result and exits 0",
		script: []string{"out=reading the task", "sleep=200ms", "out=changed 2 files; tests pass"},
	},
	{
		name:   "says-nothing",
		about:  "exits 0 without writing to stdout",
		script: []string{"err=warning: nothing to do"},
	},
	{
		name:   "fails",
		about:  "the provider answers HTTP 500; exit 1 (the stderr line is the evidence)",
		script: []string{"out=calling the model", "err=API error: 500 Internal Server Error", "exit=1"},
	},
	{
		name:   "crashes",
		about:  "dies from SIGSEGV, a signal pilot did not send",
		script: []string{"out=working", "signal=11"},
	},
	{
		name:    "hangs",
		about:   "never finishes; the 1 s timeout ends it with SIGTERM",
		script:  []string{"out=thinking...", "block"},
		timeout: time.Second,
	},
	{
		name:  "resists",
		about: "ignores SIGTERM and leaves a daemon in its own session; SIGKILL after the grace period",
		script: []string{"ignore-term", "spawn:setsid", "ignore-term", "ready", "block", "end",
			"out=started a daemon", "block"},
		timeout: time.Second,
	},
}

func cmdDemo(ctx context.Context, h Hooks, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "[--json] [--run-dir DIR]", stdout, stderr)
	asJSON := fs.Bool("json", false, "print the verdicts as one JSON array, in job order")
	runDir := fs.String("run-dir", "", "keep the run records in `directory` (default "+demoRunDir()+", kept to read)")
	logger := logFlag(fs, stderr)
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if *runDir == "" {
		*runDir = demoRunDir()
	}
	var ps []pilot.Provider
	for _, j := range demoJobs {
		p, err := pilottest.FakeAgent(j.name, j.script...)
		if err != nil {
			return badInput(stderr, "demo", "%v", err)
		}
		ps = append(ps, p)
	}
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		return badInput(stderr, "demo", "%v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = os.TempDir()
	}
	// The demo's providers need no credential and are its own: it runs
	// without the providers file and without any API key.
	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners(), RunDir: *runDir, Grace: 500 * time.Millisecond, Credentials: config.DefaultCredentials()}

	if !*asJSON {
		fmt.Fprintf(stdout, "pilot demo: %d scripted workers (this program as a fake agent), run side by side\n\n", len(demoJobs))
	}
	td := h.task(logged(logger(), h.dispatcher(d)))
	start := time.Now()
	verdicts := make([]pilot.Verdict, len(demoJobs))
	var g errgroup.Group
	for i, j := range demoJobs {
		g.Go(func() error {
			v, err := td.Dispatch(ctx, pilot.Task{
				Provider: j.name,
				Mode:     pilot.ModeCode,
				Prompt:   "demo task: " + j.about,
				Workdir:  wd,
				Timeout:  j.timeout,
				Label:    "demo",
			})
			if err != nil {
				return fmt.Errorf("%s: %w", j.name, err)
			}
			v.Job = j.name + ":" + string(pilot.ModeCode)
			verdicts[i] = v
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return badInput(stderr, "demo", "%v", err)
	}
	if *asJSON {
		data, _ := json.Marshal(verdicts)
		stdout.Write(append(data, '\n'))
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tVERDICT\tFAILURE CLASS\tENDED BY\tLEFTOVERS\tTIME\tWHAT THE WORKER DID")
	for i, v := range verdicts {
		ended := "-"
		switch {
		case v.Signal != "":
			ended = v.Signal
		case v.ExitCode != nil:
			ended = "exit " + strconv.Itoa(*v.ExitCode)
		}
		fc := string(v.FailureClass)
		if fc == "" {
			fc = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.1fs\t%s\n", demoJobs[i].name, v.Verdict, fc, ended, v.Leftovers,
			float64(v.DurationMS)/1000, demoJobs[i].about)
	}
	tw.Flush()
	left := 0
	for _, v := range verdicts {
		left += len(pilottest.Alive(v.RunID))
	}
	fmt.Fprintf(stdout, "\n%d jobs in %.1fs; processes of these runs still alive: %d\n", len(verdicts), time.Since(start).Seconds(), left)
	fmt.Fprintf(stdout, "each run has record.json, stream.log and events.log in its run directory under %s (kept; 'pilot runs --run-dir %s' lists them); try 'pilot demo --json'\n", *runDir, *runDir)
	return exitOK
}

// demoRunDir is where the demo keeps its runs: beside pilot's own run
// directory, apart from real runs.
func demoRunDir() string {
	return filepath.Join(filepath.Dir(pilot.DefaultRunDir()), "demo-runs")
}
