package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
	"github.com/pilotworkers/pilot/worktrees"
)

// jobSpec is one job as the command line or the jobs file gives it.
type jobSpec struct {
	Provider, Mode, TaskFile string
	Worktree                 bool
	Name                     string       // "" when none was given
	Sandbox                  sandbox.Mode // the jobs file's; "" when none was given
	// MaxTokens and MaxCostUSD are the job's own caps (0: none).
	MaxTokens  int64
	MaxCostUSD float64
}

// jobFlags are the flags that make the job list, in pilot-workers' grammar.
type jobFlags struct {
	jobs        []string // --job, repeatable
	jobsFile    string   // --jobs-file
	jobsFileSet bool
	providers   string // --providers, with --mode and --task-file
	mode        string
	taskFile    string
}

// buildJobs turns the flags into the job list, with pilot-workers' rules
// and messages: exactly one of --job, --jobs-file and the --providers
// shorthand, and at least one job. Checking the jobs themselves (provider,
// mode, task file) is the Fanout's.
func buildJobs(f jobFlags) ([]jobSpec, error) {
	shorthand := f.providers != "" || f.mode != "" || f.taskFile != ""
	explicit := len(f.jobs) > 0 || f.jobsFileSet
	switch {
	case len(f.jobs) > 0 && f.jobsFileSet:
		return nil, errors.New("--job and --jobs-file are mutually exclusive")
	case shorthand && explicit:
		return nil, errors.New("--providers/--mode/--task-file are mutually exclusive with --job and --jobs-file")
	case shorthand && (f.providers == "" || f.mode == "" || f.taskFile == ""):
		return nil, errors.New("--providers requires --mode and --task-file")
	}
	var specs []jobSpec
	switch {
	case shorthand:
		for _, p := range strings.Split(f.providers, ",") {
			if p = strings.TrimSpace(p); p != "" {
				specs = append(specs, jobSpec{Provider: p, Mode: f.mode, TaskFile: f.taskFile})
			}
		}
	case f.jobsFileSet:
		var err error
		if specs, err = loadJobsFile(f.jobsFile); err != nil {
			return nil, err
		}
	default:
		for _, s := range f.jobs {
			spec, err := parseJobSpec(s)
			if err != nil {
				return nil, err
			}
			specs = append(specs, spec)
		}
	}
	if len(specs) == 0 {
		return nil, errors.New("at least one job is required")
	}
	return specs, nil
}

// jobSpecGrammar is what --job takes.
const jobSpecGrammar = "expected PROVIDER:MODE:TASK_FILE, optionally NAME= before and :worktree after"

// parseJobSpec parses [NAME=]PROVIDER:MODE:TASK_FILE[:worktree], splitting
// from the left so that the task file's path may hold colons: NAME= is a
// start without a colon before its "=", and a last ":worktree" asks for a
// worktree (a task file named "worktree" is given as ./worktree).
func parseJobSpec(s string) (jobSpec, error) {
	var spec jobSpec
	rest := s
	if name, after, ok := strings.Cut(s, "="); ok && !strings.Contains(name, ":") {
		if err := checkJobName(name); err != nil {
			return jobSpec{}, fmt.Errorf("invalid --job spec (%s): %s: %v", jobSpecGrammar, s, err)
		}
		spec.Name, rest = name, after
	}
	if r, ok := strings.CutSuffix(rest, ":worktree"); ok {
		spec.Worktree, rest = true, r
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 || slices.Contains(parts, "") {
		return jobSpec{}, fmt.Errorf("invalid --job spec (%s): %s", jobSpecGrammar, s)
	}
	spec.Provider, spec.Mode, spec.TaskFile = parts[0], parts[1], parts[2]
	return spec, nil
}

// maxJobName bounds a job's name, which the table shows whole.
const maxJobName = 64

// checkJobName says what is wrong with a job's name: it must be 1 to 64
// characters, none of them a control character.
func checkJobName(name string) error {
	switch {
	case name == "":
		return errors.New("the job's name is empty")
	case utf8.RuneCountInString(name) > maxJobName:
		return fmt.Errorf("the job's name is longer than %d characters", maxJobName)
	case !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("the job's name %q holds a control character or invalid UTF-8", name)
	}
	return nil
}

// jobLabels names each job for the terminal as its JSON does: its name,
// else "provider:mode", made unique with #2, #3, ... when it is repeated.
// Two jobs given the same name are an error.
func jobLabels(specs []jobSpec) ([]string, error) {
	labels := make([]string, len(specs))
	used := map[string]int{} // label → job number
	for i, s := range specs {
		if s.Name == "" {
			continue
		}
		if j, ok := used[s.Name]; ok {
			return nil, fmt.Errorf("jobs %d and %d are both named %q: job names must be unique", j, i+1, s.Name)
		}
		used[s.Name], labels[i] = i+1, s.Name
	}
	for i, s := range specs {
		if s.Name != "" {
			continue
		}
		base := s.Provider + ":" + s.Mode
		label := base
		for n := 2; used[label] != 0; n++ {
			label = base + "#" + strconv.Itoa(n)
		}
		used[label], labels[i] = i+1, label
	}
	return labels, nil
}

// loadJobsFile reads a JSON array of {"provider","mode","task_file",
// "worktree","name","sandbox"} objects (the last three optional). Unknown and
// missing fields are errors that name them; so are fields of the wrong
// type (pilot-workers converted them with str() and bool(), turning null
// into the provider "None").
func loadJobsFile(path string) ([]jobSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read jobs file: %v", err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("cannot read jobs file: %s: %v", path, syntaxAt(data, err))
	}
	entries, ok := doc.([]any)
	if !ok {
		return nil, errors.New("jobs file must be a JSON array of job objects")
	}
	known := []string{"provider", "mode", "task_file", "worktree", "name", "sandbox", "max_tokens", "max_cost_usd"}
	var specs []jobSpec
	for n, e := range entries {
		obj, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("jobs file entries must be objects (entry %d is not)", n+1)
		}
		var unknown, missing []string
		for k := range obj {
			if !slices.Contains(known, k) {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			return nil, fmt.Errorf("unknown jobs file fields: %s (entry %d)", strings.Join(unknown, ", "), n+1)
		}
		for _, k := range known[:3] {
			if _, ok := obj[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("jobs file entry missing fields: %s (entry %d)", strings.Join(missing, ", "), n+1)
		}
		var spec jobSpec
		for i, dst := range []*string{&spec.Provider, &spec.Mode, &spec.TaskFile} {
			s, ok := obj[known[i]].(string)
			if !ok {
				return nil, fmt.Errorf("jobs file field %s must be a string (entry %d)", known[i], n+1)
			}
			*dst = s
		}
		if w, ok := obj["worktree"]; ok {
			if spec.Worktree, ok = w.(bool); !ok {
				return nil, fmt.Errorf("jobs file field worktree must be true or false (entry %d)", n+1)
			}
		}
		if v, ok := obj["name"]; ok {
			if spec.Name, ok = v.(string); !ok {
				return nil, fmt.Errorf("jobs file field name must be a string (entry %d)", n+1)
			}
			if err := checkJobName(spec.Name); err != nil {
				return nil, fmt.Errorf("jobs file field name: %v (entry %d)", err, n+1)
			}
		}
		if v, ok := obj["sandbox"]; ok {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("jobs file field sandbox must be a string (entry %d)", n+1)
			}
			var err error
			if spec.Sandbox, err = parseSandbox(s); err != nil {
				return nil, fmt.Errorf("jobs file field sandbox: %v (entry %d)", err, n+1)
			}
		}
		var err error
		if spec.MaxTokens, spec.MaxCostUSD, err = jobBudget(obj); err != nil {
			return nil, fmt.Errorf("jobs file field %v (entry %d)", err, n+1)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// worktreeDirFlag adds --worktree-dir to fs.
func worktreeDirFlag(fs *flagSet, dir *string) {
	fs.StringVar(dir, "worktree-dir", "", "`directory` for the jobs' git worktrees (default: <repo>.pilot-worktrees beside the repository <repo>)")
}

// memoryBudgetFlag adds --memory-budget to fs.
func memoryBudgetFlag(fs *flagSet, budget *size.Bytes) {
	fs.Func("memory-budget", "start a job only while the running jobs' memory and its expected peak fit in `SIZE` (12GiB, 512MiB; one job always runs)", func(s string) error {
		b, err := size.Parse(s)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "pilot: "))
		}
		*budget = b
		return nil
	})
}

// fanoutBadInput prints "pilot fanout: error: msg" and returns exitBadInput.
func fanoutBadInput(stderr io.Writer, format string, a ...any) int {
	return badInput(stderr, "fanout", "error: "+format, a...)
}

func cmdFanout(ctx context.Context, h Hooks, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fanout", "--workdir D (--job [NAME=]P:M:F[:worktree] ... | --jobs-file J | --providers P,... --mode M --task-file F) [flags]", stdout, stderr)
	var (
		jf                   jobFlags
		workdir, runDir      string
		worktreeDir          string
		maxParallel          int
		timeout, idleTimeout time.Duration
		failFast             bool
		sandboxMode          sandbox.Mode
		memoryBudget         size.Bytes
	)
	fs.StringVar(&workdir, "workdir", "", "existing project `directory` every job runs in (required)")
	fs.Func("job", "one job, `[NAME=]PROVIDER:MODE:TASK_FILE[:worktree]`; repeatable (the task file's path may hold colons; :worktree runs it in a git worktree of its own)", func(s string) error {
		jf.jobs = append(jf.jobs, s)
		return nil
	})
	fs.StringVar(&jf.jobsFile, "jobs-file", "", "`JSON` array of jobs: {\"provider\",\"mode\",\"task_file\",\"worktree\",\"name\",\"sandbox\",\"max_tokens\",\"max_cost_usd\"} (a job's \"sandbox\" wins over --sandbox)")
	fs.StringVar(&jf.providers, "providers", "", "comma-separated provider `names`, one job each (with --mode and --task-file)")
	fs.StringVar(&jf.mode, "mode", "", "worker `mode` for --providers")
	fs.StringVar(&jf.taskFile, "task-file", "", "task `file` for --providers")
	fs.Func("max-parallel", "run at most `N` jobs at once (0, the default: all of them)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a number of jobs, 0 for all of them, got %q", s)
		}
		maxParallel = n
		return nil
	})
	fs.Var(seconds{&timeout}, "timeout", "wall-clock limit of each job in `seconds` (default 3600)")
	fs.Var(seconds{&idleTimeout}, "idle-timeout", "limit of each job in `seconds` without any output (default 900)")
	memoryBudgetFlag(fs, &memoryBudget)
	sandboxFlag(fs, &sandboxMode)
	providersFile := providersFlag(fs)
	fs.StringVar(&runDir, "run-dir", "", "`directory` for run records (default "+pilot.DefaultRunDir()+")")
	worktreeDirFlag(fs, &worktreeDir)
	fs.BoolVar(&failFast, "fail-fast", false, "cancel the other jobs as soon as one fails")
	var maxCost float64
	totalBudgetFlag(fs, "fanout", &maxCost)
	var rf retryFlags
	addRetryFlags(fs, &rf)
	logger := logFlag(fs, stderr)
	if code := fs.parse(args); code >= 0 {
		return code
	}
	fs.Visit(func(f *flag.Flag) { jf.jobsFileSet = jf.jobsFileSet || f.Name == "jobs-file" })
	if workdir == "" {
		return fanoutBadInput(stderr, "--workdir is required")
	}
	specs, err := buildJobs(jf)
	if err != nil {
		return fanoutBadInput(stderr, "%v", err)
	}
	labels, err := jobLabels(specs)
	if err != nil {
		return fanoutBadInput(stderr, "%v", err)
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return fanoutBadInput(stderr, "%v", err)
	}

	jobs := make([]pilot.Job, len(specs))
	rows := make([]progressJob, len(specs))
	group := grouplog.NewID(grouplog.KindFanout, time.Now())
	for i, s := range specs {
		mode := sandboxMode
		if s.Sandbox != "" {
			mode = s.Sandbox
		}
		jobs[i] = pilot.Job{
			Task: pilot.Task{
				Provider:    s.Provider,
				Mode:        pilot.Mode(s.Mode),
				TaskFile:    s.TaskFile,
				Workdir:     workdir,
				Timeout:     timeout,
				IdleTimeout: idleTimeout,
				Sandbox:     mode,
				MaxTokens:   s.MaxTokens,
				MaxCostUSD:  s.MaxCostUSD,
				Group:       group,
				GroupJob:    labels[i],
			},
			Worktree: s.Worktree,
			Name:     s.Name,
		}
		rows[i] = progressJob{Label: labels[i], Worker: s.Provider + ":" + s.Mode}
	}
	policy, closeState, err := rf.policy(ctx, workdir, stderr, "fanout")
	if err != nil {
		return fanoutBadInput(stderr, "%v", err)
	}
	defer closeState()
	prog := newProgress(stderr, "fanout", rows)
	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners(), RunDir: runDir, Credentials: config.DefaultCredentials()}
	if prog.term != nil {
		d.OnLine = prog.line
	}
	d = h.dispatcher(d)
	f := &pilot.Fanout{Dispatcher: d, MaxParallel: maxParallel, FailFast: failFast, OnEvent: prog.event, MaxCostUSD: maxCost,
		Worktrees: worktrees.New(d.RunDir, worktreeDir), MemoryBudget: memoryBudget}
	var retried *retryResults
	if policy != nil {
		retry.UniqueKeys(jobs)
		retried = &retryResults{}
		f.Dispatcher = retried.layer(d, *policy)
	}
	f.Dispatcher = h.task(logged(logger(), f.Dispatcher))
	prog.glog = openGroupLog(d.RunDir, group, grouplog.KindFanout, rows, nil)
	prog.start()
	rs, err := h.fanout(ctx, f, jobs)
	var verdicts []outVerdict
	if err == nil {
		verdicts = make([]outVerdict, len(rs))
		for i, r := range rs {
			verdicts[i] = jobVerdict(r, retried, jobs[i].Task.Key)
		}
	}
	prog.finish(verdicts)
	if err != nil {
		// The guards refused the jobs; nothing ran.
		return fanoutBadInput(stderr, "%v", err)
	}
	writeResult(stdout, verdicts)
	return fanoutExit(ctx, verdicts)
}

// fanoutExit is the exit status of a fanout: 0 when every verdict is a
// success, 1 otherwise or when the run was interrupted.
func fanoutExit(ctx context.Context, verdicts []outVerdict) int {
	if ctx.Err() != nil {
		return exitFailed
	}
	for _, v := range verdicts {
		if v.Interrupted || !v.Verdict.Verdict.Success() {
			return exitFailed
		}
	}
	return exitOK
}

// openGroupLog starts the log of group id (see package grouplog) in runDir
// ("" is the default), its jobs as rows names them, deps[i] job i's
// dependencies. A log that cannot be written (an unwritable run
// directory) is only missing: the records still name the group, and the
// dispatches say what is wrong with the directory.
func openGroupLog(runDir, id, kind string, rows []progressJob, deps [][]string) *grouplog.Log {
	if runDir == "" {
		runDir = pilot.DefaultRunDir()
	}
	jobs := make([]grouplog.Job, len(rows))
	for i, r := range rows {
		jobs[i] = grouplog.Job{Name: r.Label, Worker: r.Worker}
		if i < len(deps) {
			jobs[i].Deps = deps[i]
		}
	}
	l, _ := grouplog.New(runDir, id, kind, jobs, time.Now())
	return l
}
