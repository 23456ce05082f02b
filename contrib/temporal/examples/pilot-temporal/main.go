// Command pilot-temporal runs pilot's jobs across machines on Temporal
// (package github.com/pilotworkers/pilot/contrib/temporal).
//
//	pilot-temporal worker [flags]   serve jobs on this machine
//	pilot-temporal submit [flags]   run a group of jobs and print their results
//	pilot-temporal demo-agent JOB   the demo jobs' agent (the worker runs it)
//
// A worker polls the default task queue and one queue per capability it
// names (-capabilities claude,pi): jobs that need a capability go to the
// machines that have it. submit starts the RunJobs workflow over a jobs
// file (a JSON array of temporal.Job) or, with -demo N, over N demo jobs
// in a git repository, waits for it, and prints one JSON array of results
// in job order. Exit codes: 0 all succeeded, 1 some failed, 2 bad input.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	temporal "github.com/pilotworkers/pilot/contrib/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// demoProvider is the provider of -demo jobs: this program's demo-agent
// command, which writes a file in its worktree and commits it.
const demoProvider = "demo"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: pilot-temporal worker|submit [flags] (-h for a command's flags)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "worker":
		return cmdWorker(ctx, args[1:], stderr)
	case "submit":
		return cmdSubmit(ctx, args[1:], stdout, stderr)
	case "demo-agent":
		return demoAgent(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "pilot-temporal: unknown command %q: use worker or submit\n", args[0])
	return 2
}

type common struct {
	addr, namespace, addrFile, queue string
}

func (c *common) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7233", "the Temporal frontend's `host:port`")
	fs.StringVar(&c.namespace, "namespace", "default", "the Temporal `namespace`")
	fs.StringVar(&c.addrFile, "addr-file", "", "read host:port and namespace (one per line) from this `file`, as contrib/temporal/devserver writes it; overrides -addr and -namespace")
	fs.StringVar(&c.queue, "queue", temporal.DefaultQueue, "the default task `queue`, and the prefix of the capabilities' queues")
}

func (c *common) dial() (client.Client, error) {
	if c.addrFile != "" {
		data, err := os.ReadFile(c.addrFile)
		if err != nil {
			return nil, fmt.Errorf("reading -addr-file: %w (start the dev server first: cd contrib/temporal/devserver && go run . -addr-file FILE)", err)
		}
		lines := strings.Fields(string(data))
		if len(lines) != 2 {
			return nil, fmt.Errorf("-addr-file %s holds %d fields; want host:port and namespace, one per line", c.addrFile, len(lines))
		}
		c.addr, c.namespace = lines[0], lines[1]
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return client.Dial(client.Options{HostPort: c.addr, Namespace: c.namespace, Logger: logger})
}

func cmdWorker(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.flags(fs)
	caps := fs.String("capabilities", "", "comma-separated `list` of the capabilities (agent CLIs) this machine has; each is a task queue")
	providers := fs.String("providers", "", "the providers `file` over the built-in providers (default: pilot's providers file, if any)")
	runDir := fs.String("run-dir", "", "where run directories go (default: pilot's)")
	wtDir := fs.String("worktrees", "", "where the jobs' worktrees go on this machine (default: in each repository's git directory)")
	cacheDir := fs.String("cache", "", "where this machine keeps its clones of remote repositories (default: pilot-temporal in the user's cache directory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	reg, err := config.LoadRegistry(*providers)
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal worker:", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal worker:", err)
		return 1
	}
	demo := pilot.Provider{Name: demoProvider, Runner: "command", Argv: []string{exe, "demo-agent", "{prompt}"}}
	if reg, err = reg.With(demo); err != nil {
		fmt.Fprintln(stderr, "pilot-temporal worker:", err)
		return 1
	}
	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners(), Credentials: config.DefaultCredentials(), RunDir: *runDir}
	cl, err := c.dial()
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal worker: connecting to Temporal:", err)
		return 1
	}
	defer cl.Close()
	acts := &temporal.Activities{Dispatcher: d, WorktreeDir: *wtDir, CacheDir: *cacheDir}
	queues := []string{temporal.QueueFor(c.queue, "")}
	for _, cp := range strings.Split(*caps, ",") {
		if cp = strings.TrimSpace(cp); cp != "" {
			queues = append(queues, temporal.QueueFor(c.queue, cp))
		}
	}
	var ws []worker.Worker
	for _, q := range queues {
		w := worker.New(cl, q, worker.Options{})
		acts.Register(w)
		temporal.RegisterWorkflow(w)
		if err := w.Start(); err != nil {
			fmt.Fprintln(stderr, "pilot-temporal worker:", err)
			return 1
		}
		ws = append(ws, w)
	}
	fmt.Fprintf(stderr, "pilot-temporal worker: polling %s at %s\n", strings.Join(queues, ", "), c.addr)
	<-ctx.Done()
	for _, w := range ws {
		w.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pilot.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "pilot-temporal worker:", err)
		return 1
	}
	return 0
}

func cmdSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.flags(fs)
	jobsFile := fs.String("jobs", "", "a JSON `file`: an array of jobs (temporal.Job)")
	demo := fs.Int("demo", 0, "submit `N` demo jobs instead (provider demo), in the repository -repo")
	repo := fs.String("repo", "", "the git `repository` of the demo jobs: a directory every worker reaches, or a URL")
	limit := fs.Int("limit", temporal.DefaultLimit, "the most jobs running at once, across all workers")
	hb := fs.Duration("heartbeat-timeout", temporal.DefaultHeartbeatTimeout, "how long a job may go without a heartbeat before it is run again (attached to, or taken over)")
	providers := fs.String("providers", "", "the providers `file` whose max_parallel bounds each provider's jobs across all workers (default: pilot's providers file, if any)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	reg, err := config.LoadRegistry(*providers)
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal submit:", err)
		return 2
	}
	var jobs []temporal.Job
	switch {
	case *jobsFile != "" && *demo > 0:
		fmt.Fprintln(stderr, "pilot-temporal submit: -jobs and -demo exclude each other: give one")
		return 2
	case *jobsFile != "":
		data, err := os.ReadFile(*jobsFile)
		if err == nil {
			err = json.Unmarshal(data, &jobs)
		}
		if err != nil {
			fmt.Fprintf(stderr, "pilot-temporal submit: reading the jobs file: %v\n", err)
			return 2
		}
	case *demo > 0:
		if *repo == "" {
			fmt.Fprintln(stderr, "pilot-temporal submit: -demo needs -repo, the git repository the demo jobs work in")
			return 2
		}
		abs := *repo // a git URL as given; a directory made absolute
		if _, err := os.Stat(*repo); err == nil {
			if abs, err = filepath.Abs(*repo); err != nil {
				fmt.Fprintln(stderr, "pilot-temporal submit:", err)
				return 2
			}
		}
		stamp := time.Now().UTC().Format("20060102-150405")
		for i := 1; i <= *demo; i++ {
			name := fmt.Sprintf("demo-%s-%02d", stamp, i)
			jobs = append(jobs, temporal.Job{Name: name, Repo: abs, Provider: demoProvider, Mode: pilot.ModeCode, Prompt: name})
		}
	default:
		fmt.Fprintln(stderr, "pilot-temporal submit: give -jobs FILE or -demo N -repo DIR")
		return 2
	}
	if err := temporal.CheckJobs(jobs); err != nil {
		fmt.Fprintln(stderr, "pilot-temporal submit:", err)
		return 2
	}
	// Each provider's max_parallel holds in the workflow, so across all
	// workers.
	limits := map[string]int{}
	for _, j := range jobs {
		if p, ok := reg.Lookup(j.Provider); ok && p.MaxParallel > 0 {
			limits[j.Provider] = p.MaxParallel
		}
	}
	cl, err := c.dial()
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal submit: connecting to Temporal:", err)
		return 1
	}
	defer cl.Close()
	// The input goes with its defaults resolved: the workflow runs with
	// these, whatever a later version of the package defaults to.
	in := temporal.Input{Jobs: jobs, Limit: *limit, ProviderLimits: limits, Queue: c.queue, HeartbeatTimeout: *hb}.WithDefaults()
	run, err := cl.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: temporal.QueueFor(c.queue, "")}, temporal.WorkflowName, in)
	if err != nil {
		fmt.Fprintln(stderr, "pilot-temporal submit:", err)
		return 1
	}
	fmt.Fprintf(stderr, "pilot-temporal submit: workflow %s, %d jobs\n", run.GetID(), len(jobs))
	var results []temporal.Result
	if err := run.Get(ctx, &results); err != nil {
		if errors.Is(err, context.Canceled) {
			_ = cl.CancelWorkflow(context.Background(), run.GetID(), run.GetRunID())
		}
		fmt.Fprintln(stderr, "pilot-temporal submit:", err)
		return 1
	}
	out, _ := json.MarshalIndent(results, "", "  ")
	fmt.Fprintln(stdout, string(out))
	for _, r := range results {
		if !r.Verdict.Verdict.Verdict.Success() {
			return 1
		}
	}
	return 0
}

// demoAgent is the demo jobs' agent: in its worktree (the current
// directory) it writes JOB.txt and commits it, as an agent doing its job
// would, taking a couple of seconds so that heartbeats show.
func demoAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "pilot-temporal demo-agent: want the job's name")
		return 2
	}
	job := args[0]
	fmt.Fprintln(stdout, "working on", job)
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return 1
	}
	if err := os.WriteFile(job+".txt", []byte(job+"\n"), 0o644); err != nil {
		fmt.Fprintln(stderr, "pilot-temporal demo-agent:", err)
		return 1
	}
	for _, a := range [][]string{{"add", job + ".txt"}, {"-c", "user.name=pilot demo", "-c", "user.email=demo@example.invalid", "commit", "-q", "-m", "work of " + job}} {
		cmd := exec.CommandContext(ctx, "git", a...)
		cmd.Stderr = stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(stderr, "pilot-temporal demo-agent: git:", err)
			return 1
		}
	}
	fmt.Fprintln(stdout, "committed", job+".txt")
	return 0
}
