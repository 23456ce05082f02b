//go:build linux

// Command chaos runs a random mix of dispatches and fanouts against a
// misbehaving fake agent and checks, after each, that pilot kept its
// promises: no process of the run is left alive, every job has a verdict,
// every record.json is closed out, and nothing under the run directory is
// half written.
//
//	go run ./tools/chaos -runs 1000 [-seed S] [-parallel P] [-json] [-keep]
//
// Without -json it prints the figures as text; with -json it prints one
// object ({"runs", "kinds", "orphans", "missing_verdicts", "open_records",
// "half_written", ...}; "skipped" names the kinds this machine cannot run,
// with why). It exits 1 when orphans, missing verdicts, open records or
// half-written files are not all 0, and 2 for bad flags.
//
// The program is also its own fake agent (PILOT_FAKE_AGENT set), pilot's
// supervisor (the re-exec internal/supervise recognises in its init), and
// the pilot process of the kinds that need one of their own: a pilot that is
// SIGKILLed mid-fanout, a pilot whose files stop being writable mid-run,
// two pilots sharing one run directory, and the fanouts of hostile workers
// (PILOT_CHAOS_CHILD set).
//
// It runs on Linux only: it finds leftover processes in /proc.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pilotworkers/pilot/internal/fakeagent"
)

func main() {
	if os.Getenv(fakeagent.EnvFakeAgent) != "" {
		os.Exit(fakeagent.Main(os.Args[1:]))
	}
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 1000, "how many random runs")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "the random seed (the same seed gives the same mix of kinds)")
	parallel := fs.Int("parallel", 4, "how many runs at once")
	asJSON := fs.Bool("json", false, "print one JSON object")
	keep := fs.Bool("keep", false, "keep the run directories of runs that broke a promise")
	big := fs.Int("bigline", 100<<20, "bytes of the big-line kind's line")
	verbose := fs.Bool("v", false, "print each problem as it is found")
	only := fs.String("kinds", "", "a comma list of kinds to draw from (default: all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *runs < 1 || *parallel < 1 || *big < 1 {
		fmt.Fprintln(stderr, "chaos: -runs, -parallel and -bigline must be at least 1")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "pilot-chaos-")
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	cfg := Config{Runs: *runs, Seed: *seed, Parallel: *parallel, Dir: dir, Exe: exe, BigLine: *big, KeepDir: ""}
	if *only != "" {
		cfg.Kinds = strings.Split(*only, ",")
	}
	if *keep {
		cfg.KeepDir = dir + "-kept"
	}
	if *verbose {
		cfg.Log = stderr
	}
	rep := Run(cfg)
	if *asJSON {
		data, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(data))
	} else {
		rep.WriteText(stdout)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
