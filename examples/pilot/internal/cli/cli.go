package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/worktrees"
)

// Exit statuses.
const (
	exitOK       = 0
	exitFailed   = 1
	exitBadInput = 2
)

const usage = `usage: pilot <command> [flags]

commands:
  dispatch     Run one task; stdout is exactly two JSON lines: started, verdict.
  run          Run one task, streaming the worker's output; ends with a summary line.
  fanout       Run several tasks at once; stdout is one JSON array of verdicts, in job order.
  schedule     Run a graph of tasks: dependencies, write sets, provider gates; one JSON array.
  state        Show the retry state (failure budgets, blocked jobs); --clear-blocked GROUP unblocks.
  worktrees    List the worktrees fanout jobs made (kept ones hold work); 'worktrees diff|remove|prune'.
  runs         List the runs (--reconcile closes out dead pilots' runs); 'runs show|logs|prune'.
  serve        Serve a read-only local page of the runs, their evidence and fanout timelines.
  demo         Run scripted jobs on the built-in fake agent (no API key, no network).
  providers    List the providers: runner, model and credential status (never a value).
  doctor       Check that each provider can run: its CLI, version, credential and sandbox;
               and which sandbox modes this machine enforces.
  template     Print the task template for a mode (code|explore|test|review).
  credentials  Store a provider's secret read from stdin (0600 file); --status shows its status.
  classify     Classify a worker's diagnostics: failure class and the line that proves it.
  phase        Read a pi session file: the phase of its active branch, and why.
  install      'install runner NAME': the pinned agent CLI; 'install PROVIDER on HOST': the
               host agent's integration (claude, codex, opencode, gemini, pi) for PROVIDER.
  uninstall    Undo an install: removes exactly what pilot wrote, never a file edited since.

  completion   Print a shell completion script: 'pilot completion bash|zsh|fish'.

Run 'pilot help <command>' (or 'pilot <command> --help') for a command's flags;
'pilot --version' for the build.
`

// run is the whole CLI without hooks (Run with a zero Hooks).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Run(ctx, args, stdin, stdout, stderr, Hooks{})
}

// Run is the whole CLI: the command args[0] with its flags, stdin, stdout
// and stderr, h's hooks around its dispatches; the result is the exit
// status. Cancelling ctx is an interrupt (Ctrl-C). Main only wires the
// process to it.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, h Hooks) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitBadInput
	}
	switch args[0] {
	case "dispatch":
		return cmdDispatch(ctx, h, args[1:], stdout, stderr, false)
	case "run":
		return cmdDispatch(ctx, h, args[1:], stdout, stderr, true)
	case "state":
		return cmdState(ctx, args[1:], stdout, stderr)
	case "worktrees":
		return cmdWorktrees(ctx, args[1:], stdout, stderr)
	case "runs":
		return cmdRuns(ctx, args[1:], stdout, stderr)
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "fanout":
		return cmdFanout(ctx, h, args[1:], stdout, stderr)
	case "schedule":
		return cmdSchedule(ctx, h, args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(ctx, h, args[1:], stdout, stderr)
	case "providers":
		return cmdProviders(ctx, args[1:], stdout, stderr)
	case "doctor":
		return cmdDoctor(ctx, args[1:], stdout, stderr)
	case "template":
		return cmdTemplate(ctx, args[1:], stdout, stderr)
	case "credentials":
		return cmdCredentials(ctx, args[1:], stdin, stdout, stderr)
	case "classify":
		return cmdClassify(ctx, args[1:], stdin, stdout, stderr)
	case "phase":
		return cmdPhase(ctx, args[1:], stdin, stdout, stderr)
	case "install":
		return cmdInstall(ctx, args[1:], stdout, stderr, false)
	case "uninstall":
		return cmdInstall(ctx, args[1:], stdout, stderr, true)
	case "--version", "version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	case "-h", "--help", "help":
		if len(args) > 1 && args[0] == "help" {
			return cmdHelp(ctx, args[1:], stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return exitOK
	case "completion":
		return cmdCompletion(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "pilot: unknown command %q%s\n\n%s", args[0], didYouMean(args[0], commands()), usage)
	return exitBadInput
}

// badInput prints "pilot <cmd>: msg" and returns exitBadInput. An error
// among a gets the command line's hint for it (see hinted), without the
// library's prefix (see trimPrefixes).
func badInput(stderr io.Writer, cmd, format string, a ...any) int {
	for i, v := range a {
		if err, ok := v.(error); ok {
			a[i] = trimPrefixes(hinted(err), cmd)
		}
	}
	fmt.Fprintf(stderr, "pilot %s: %s\n", cmd, trimPrefixes(fmt.Sprintf(format, a...), cmd))
	return exitBadInput
}

// trimPrefixes drops the prefixes the library's errors begin with,
// "pilot: " and the package's own ("schedule: " for pilot schedule): the
// command's prefix is enough.
func trimPrefixes(msg, cmd string) string {
	return strings.TrimPrefix(strings.TrimPrefix(msg, "pilot: "), cmd+": ")
}

// hinted is err's message with what to do about it on the command line: the
// library's errors name the problem and the fix in its own terms, the
// command adds its own.
func hinted(err error) string {
	msg := err.Error()
	var missing *pilot.CredentialError
	var file *config.CredentialFileError
	var unavailable *sandbox.UnavailableError
	switch {
	case errors.Is(err, pilot.ErrSharedWorkdir):
		return strings.Replace(msg, pilot.ErrSharedWorkdir.Error(), `multiple code jobs share one workdir; give each its own worktree (--job P:M:F:worktree, or "worktree": true in the jobs file)`, 1)
	case errors.As(err, &missing):
		return msg + " (run: pilot credentials " + missing.Provider + ")"
	case errors.As(err, &file) && file.Restore:
		return msg + " (run: pilot credentials " + file.Provider + ")"
	case errors.As(err, &unavailable):
		return strings.Replace(msg, unavailable.Error(), sandboxHint(unavailable), 1)
	}
	return msg
}

// A flagSet is a command's flags: its errors go to stderr, with the
// usage; a help asked for (-h, --help) goes to stdout, and exits 0.
type flagSet struct {
	*flag.FlagSet
	stdout io.Writer
}

func newFlagSet(name, synopsis string, stdout, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("pilot "+name, flag.ContinueOnError), stdout: stdout}
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: pilot %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// helpAsked reports whether args ask for help before any non-flag
// argument or "--".
func helpAsked(args []string) bool {
	for _, a := range args {
		switch {
		case a == "-h" || a == "-help" || a == "--help" || a == "--h":
			return true
		case a == "--" || !strings.HasPrefix(a, "-"):
			return false
		}
	}
	return false
}

// parse parses args, flags only; it returns -1 to go on, or the exit
// status.
func (fs *flagSet) parse(args []string) int {
	if code := fs.parseAny(args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q (all inputs are flags)\n", fs.Name(), fs.Arg(0))
		return exitBadInput
	}
	return -1
}

// parseAny is parse for a command that takes arguments after its flags.
func (fs *flagSet) parseAny(args []string) int {
	if helpAsked(args) {
		out := fs.Output()
		fs.SetOutput(fs.stdout)
		fs.Usage()
		fs.SetOutput(out)
		return exitOK
	}
	// The flag package would print the problem and the whole usage: say
	// the problem in one line instead, naming the flag, with the way to
	// the usage.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		fmt.Fprintf(out, "%s: %s (see %s --help)\n", fs.Name(), fs.flagProblem(err), fs.Name())
		return exitBadInput
	}
	return -1
}

var (
	reInvalidValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-(\S+): (.*)$`)
	reNoArgument   = regexp.MustCompile(`^flag needs an argument: -(\S+)$`)
	reUndefined    = regexp.MustCompile(`^flag provided but not defined: -(\S+)$`)
)

// flagProblem is a flag package error in the command line's words: the
// flag as --name, then the problem.
func (fs *flagSet) flagProblem(err error) string {
	msg := err.Error()
	if m := reInvalidValue.FindStringSubmatch(msg); m != nil {
		if strings.Contains(m[3], m[1]) {
			return "--" + m[2] + ": " + m[3] // the Set error names the value already
		}
		return "--" + m[2] + ": " + m[3] + ", got " + m[1]
	}
	if m := reNoArgument.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + ": needs a value"
	}
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		name := strings.TrimLeft(m[1], "-")
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if c := closest(name, names); c != "" {
			return "unknown flag --" + name + " (did you mean --" + c + "?)"
		}
		return "unknown flag --" + name
	}
	return msg
}

// seconds is a flag holding a positive number of seconds.
type seconds struct{ d *time.Duration }

func (s seconds) String() string {
	if s.d == nil || *s.d == 0 {
		return ""
	}
	return strconv.FormatFloat(s.d.Seconds(), 'f', -1, 64)
}

// Set takes a number of seconds ("90", "1.5") or a Go duration ("30s",
// "5m", "1h30m").
func (s seconds) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil {
			return fmt.Errorf("want a positive duration (30s, 5m, or seconds), got %q", v)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 {
		return fmt.Errorf("want a positive duration (30s, 5m, or seconds), got %q", v)
	}
	*s.d = d
	return nil
}

// envProvidersFile names a providers file to use when --providers-file is
// not given; unlike the default file, it must exist.
const envProvidersFile = "PILOT_PROVIDERS_FILE"

// providersFlag adds --providers-file to fs.
func providersFlag(fs *flagSet) *string {
	return fs.String("providers-file", "", "providers `JSON` file merged over the built-in providers (default $"+
		envProvidersFile+", else "+config.DefaultProvidersFile()+" when it exists)")
}

// providersPath is the providers file in effect: the flag's, else
// $PILOT_PROVIDERS_FILE (both must exist), else "" for the default file.
func providersPath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(envProvidersFile)
}

// loadRegistry returns the built-in providers with the providers file in
// effect over them.
func loadRegistry(flagValue string) (*pilot.Registry, error) {
	path := providersPath(flagValue)
	reg, err := config.LoadRegistry(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("providers file %s does not exist: fix the path given with --providers-file or $%s, or create the file (see README)", path, envProvidersFile)
	}
	if err != nil {
		return nil, err
	}
	if err := checkRunners(reg, path); err != nil {
		return nil, err
	}
	// A provider that names no binary runs the CLI pilot installed for
	// its runner (pilot install runner NAME), if any.
	return withInstalledRunners(reg)
}

// checkRunners refuses a provider whose runner pilot does not have (a
// misspelling, most likely), naming the closest runner and all of them.
func checkRunners(reg *pilot.Registry, path string) error {
	var names []string
	for _, r := range agents.Runners() {
		names = append(names, r.Name())
	}
	var errs []string
	for _, n := range reg.Names() {
		p, _ := reg.Lookup(n)
		if p.Runner == "" || slices.Contains(names, p.Runner) {
			continue
		}
		errs = append(errs, fmt.Sprintf("provider %s names runner %q, which pilot does not have%s", n, p.Runner, didYouMean(p.Runner, names)))
	}
	if len(errs) == 0 {
		return nil
	}
	where := "the providers file"
	if path != "" {
		where = "providers file " + path
	}
	return fmt.Errorf("%s: %s; the runners are %s", where, strings.Join(errs, "; "), strings.Join(names, ", "))
}

// closest returns the one of names within two edits of s (the nearest),
// or "" when none is.
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func cmdDispatch(ctx context.Context, h Hooks, args []string, stdout, stderr io.Writer, stream bool) int {
	name := "dispatch"
	if stream {
		name = "run"
	}
	fs := newFlagSet(name, "--provider P --mode M --task-file F --workdir D [flags]", stdout, stderr)
	var t pilot.Task
	var mode, runDir string
	fs.StringVar(&t.Provider, "provider", "", "provider `name`: built in, or from the providers file (required; see pilot providers)")
	fs.StringVar(&mode, "mode", "", "worker `mode`: code, explore, test, review or resume (required)")
	fs.StringVar(&t.TaskFile, "task-file", "", "`file` holding the task (required)")
	fs.StringVar(&t.Workdir, "workdir", "", "existing project `directory` the worker runs in (required)")
	fs.StringVar(&t.Label, "label", "", "free-form `label` carried into events and the verdict")
	fs.StringVar(&t.Resume, "resume", "", "continue an earlier session: the `value` of its verdict's \"resume\" field (required with --mode resume)")
	worktree := fs.Bool("worktree", false, "run the worker in a fresh git worktree of --workdir, on a branch of its own (its changes committed there and kept)")
	var worktreeDir string
	worktreeDirFlag(fs, &worktreeDir)
	fs.Var(seconds{&t.Timeout}, "timeout", "wall-clock limit in `seconds` (default 3600)")
	fs.Var(seconds{&t.IdleTimeout}, "idle-timeout", "limit in `seconds` without any output (default 900)")
	taskBudgetFlags(fs, &t.MaxTokens, &t.MaxCostUSD)
	sandboxFlag(fs, &t.Sandbox)
	providersFile := providersFlag(fs)
	fs.StringVar(&runDir, "run-dir", "", "`directory` for run records (default "+pilot.DefaultRunDir()+")")
	var rf retryFlags
	addRetryFlags(fs, &rf)
	logger := logFlag(fs, stderr)
	if code := fs.parse(args); code >= 0 {
		return code
	}
	for _, req := range []struct{ flag, val string }{
		{"--provider", t.Provider}, {"--mode", mode}, {"--task-file", t.TaskFile}, {"--workdir", t.Workdir},
	} {
		if req.val == "" {
			return badInput(stderr, name, "%s is required (see pilot %s --help)", req.flag, name)
		}
	}
	t.Mode = pilot.Mode(mode)
	if !slices.Contains([]pilot.Mode{pilot.ModeCode, pilot.ModeExplore, pilot.ModeTest, pilot.ModeReview, pilot.ModeResume}, t.Mode) {
		return badInput(stderr, name, "--mode: unknown mode %q: want code, explore, test, review or resume", mode)
	}
	if t.Mode == pilot.ModeResume && t.Resume == "" {
		return badInput(stderr, name, "--mode resume needs --resume: give the earlier verdict's \"resume\" value")
	}
	if *worktree && t.Mode == pilot.ModeResume {
		return badInput(stderr, name, "--worktree cannot resume a session: a new worktree has none (drop --worktree, or use --mode code)")
	}
	if st, err := os.Stat(t.TaskFile); err != nil || !st.Mode().IsRegular() {
		return badInput(stderr, name, "--task-file: task file not found: %s", t.TaskFile)
	}
	if st, err := os.Stat(t.Workdir); err != nil || !st.IsDir() {
		return badInput(stderr, name, "--workdir: not an existing directory: %s", t.Workdir)
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return badInput(stderr, name, "%v", err)
	}
	if _, ok := reg.Lookup(t.Provider); !ok {
		return badInput(stderr, name, "--provider: unknown provider: %s (known: %s)",
			t.Provider, strings.Join(reg.Names(), ", "))
	}

	policy, closeState, err := rf.policy(ctx, t.Workdir, stderr, name)
	if err != nil {
		return badInput(stderr, name, "%v", err)
	}
	defer closeState()

	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners(), RunDir: runDir, Credentials: config.DefaultCredentials()}
	var mu sync.Mutex
	var started *pilot.Started
	// The task's observer sees the retry layer's events too.
	t.Observer = func(e pilot.Event) {
		if e.Started != nil {
			if e.Started.Job != "" { // a --worktree run is a one-job fanout
				s := *e.Started
				s.Job = ""
				e.Started = &s
			}
			mu.Lock()
			first := started == nil
			started = e.Started
			mu.Unlock()
			switch {
			case stream:
			case first:
				writeJSON(stdout, e.Started)
			default:
				// stdout keeps exactly two lines: a retry's started
				// events go to stderr.
				writeJSON(stderr, e.Started)
			}
		}
		if e.Retry != nil {
			fmt.Fprintf(stderr, "pilot %s: %s\n", name, e.Message)
		}
	}
	if stream {
		d.OnLine = func(_ string, l pilot.Line) {
			w := stdout
			if l.Stream == pilot.Stderr {
				w = stderr
			}
			mu.Lock()
			defer mu.Unlock()
			w.Write(append(append([]byte(nil), l.Data...), '\n'))
		}
	}
	d = h.dispatcher(d)
	var td pilot.TaskDispatcher = d
	var retried *retryResults
	if policy != nil {
		retried = &retryResults{}
		td = retried.layer(d, *policy)
	}
	td = h.task(logged(logger(), td))
	var v outVerdict
	if *worktree {
		f := &pilot.Fanout{Dispatcher: td, Worktrees: worktrees.New(runDir, worktreeDir)}
		var rs []pilot.JobResult
		if rs, err = f.Run(ctx, []pilot.Job{{Task: t, Worktree: true}}); err == nil {
			v = jobVerdict(rs[0], retried, t.Key)
			v.Job, v.TaskFile = "", "" // a dispatch's verdict, as without --worktree
		}
		if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), "job 1 (") {
			err = u // as without --worktree: a dispatch has no "job 1"
		}
	} else {
		v.Verdict, err = td.Dispatch(ctx, t)
		if r, ok := retried.get(t.Key); ok {
			v.addRetry(r)
		}
		if err != nil && v.RunID != "" {
			// The attempt ran; its budget could not be kept.
			fmt.Fprintf(stderr, "pilot %s: %v\n", name, err)
			err = nil
		}
	}
	if err != nil {
		return badInput(stderr, name, "%v", err)
	}
	if !stream {
		if started == nil {
			// No worker started (blocked, spawn-failed): keep the
			// two-line contract with a started line that says so.
			writeJSON(stdout, synthesizedStarted{Type: event.Started, Provider: v.Provider, Mode: v.Mode,
				RunID: v.RunID, Label: v.Label, Record: v.Record, Synthesized: true, Reason: notStartedReason(v)})
		}
		writeJSON(stdout, v)
	} else {
		// On stderr: stdout is the worker's output alone.
		fmt.Fprintln(stderr, summaryLine(v.Verdict))
	}
	if v.Verdict.Verdict.Success() {
		return exitOK
	}
	return exitFailed
}

// synthesizedStarted is the started line of a dispatch whose worker never
// started: what is known, and no pid or start time.
type synthesizedStarted struct {
	Type        string     `json:"type"`
	Provider    string     `json:"provider"`
	Mode        pilot.Mode `json:"mode"`
	RunID       string     `json:"run_id,omitempty"`
	Label       string     `json:"label,omitempty"`
	Record      string     `json:"record,omitempty"`
	Synthesized bool       `json:"synthesized"`
	Reason      string     `json:"reason"`
}

// notStartedReason says why a verdict's worker never started.
func notStartedReason(v outVerdict) string {
	switch {
	case v.Blocked:
		return "blocked: " + v.BlockedReason
	case v.FailureClass != "":
		s := "not started: " + string(v.FailureClass)
		if v.EvidenceExcerpt != "" {
			s += ": " + v.EvidenceExcerpt
		}
		return s
	}
	return "not started"
}

func writeJSON(w io.Writer, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(fmt.Sprintf(`{"type":"pilot.error","error":%q}`, err.Error()))
	}
	w.Write(append(data, '\n'))
}

// writeResult writes v, a command's one JSON result, to stdout: indented
// when stdout is a terminal (a person reads it), one line otherwise.
func writeResult(stdout io.Writer, v any) {
	if !forPerson(stdout, false) {
		writeJSON(stdout, v)
		return
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeJSON(stdout, v)
		return
	}
	stdout.Write(append(data, '\n'))
}

// syntaxAt says where in data, a file a person wrote, the JSON error err
// stands ("line 3, column 1: invalid character ..."); other errors are
// returned as they are.
func syntaxAt(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON ends too early: a bracket, brace or string is not closed")
	default:
		return err
	}
	at := int(max(min(off, int64(len(data)))-1, 0))
	before := data[:at]
	return fmt.Errorf("line %d, column %d: %v", 1+bytes.Count(before, []byte{'\n'}), at-bytes.LastIndexByte(before, '\n'), err)
}

// summaryLine is the one-line human summary of a verdict.
func summaryLine(v pilot.Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pilot: %s", v.Verdict)
	if v.FailureClass != "" {
		fmt.Fprintf(&b, " (%s)", v.FailureClass)
	}
	switch {
	case v.Signal != "":
		fmt.Fprintf(&b, ", killed by %s", v.Signal)
	case v.ExitCode != nil:
		fmt.Fprintf(&b, ", exit %d", *v.ExitCode)
	}
	fmt.Fprintf(&b, ", %.1fs", float64(v.DurationMS)/1000)
	if sb := v.Sandbox; sb != nil {
		fmt.Fprintf(&b, ", sandbox %s", sb.Mode)
		if !sb.Enforced && sb.Mode != sandbox.Off {
			b.WriteString(" not enforced")
		}
	}
	if v.Leftovers > 0 {
		fmt.Fprintf(&b, ", %d leftover process(es) killed", v.Leftovers)
	}
	if v.EvidenceExcerpt != "" {
		// Why, in the worker's (or pilot's) own words: "executable pi
		// not found in the worker's PATH".
		fmt.Fprintf(&b, ": %s", v.EvidenceExcerpt)
	}
	if v.Record != "" {
		fmt.Fprintf(&b, "; record %s", v.Record)
	}
	return b.String()
}

// versionLine is what 'pilot --version' prints: the module's version, the
// pilot library's when they differ, the Go version and the VCS revision
// the binary was built from.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "pilot (no build information)"
	}
	parts := []string{"pilot " + bi.Main.Version}
	for _, d := range bi.Deps {
		if d.Path == "github.com/pilotworkers/pilot" && d.Version != bi.Main.Version {
			parts = append(parts, "library "+d.Version)
		}
	}
	parts = append(parts, bi.GoVersion)
	var rev, modified, at string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			modified = kv.Value
		case "vcs.time":
			at = kv.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += " (modified)"
		}
		if at != "" {
			rev += " " + at
		}
		parts = append(parts, "revision "+rev)
	}
	parts = append(parts, runtime.GOOS+"/"+runtime.GOARCH)
	return strings.Join(parts, ", ")
}
