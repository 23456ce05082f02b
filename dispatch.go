package pilot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/internal/lines"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/sandbox"
)

// Defaults for the Dispatcher's zero-valued fields.
const (
	defaultTimeout      = 3600 * time.Second
	defaultIdleTimeout  = 900 * time.Second
	defaultGrace        = 5 * time.Second
	defaultWaitDelay    = 2 * time.Second
	defaultMaxLineBytes = 8 << 20
	defaultHeartbeat    = time.Second
	defaultFinishGrace  = 10 * time.Second
)

// defaultEnvAllow is the environment a worker inherits from pilot's own when
// Dispatcher.EnvAllow is nil. Everything else is dropped.
var defaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE",
	"TERM", "TMPDIR", "TZ", "NO_COLOR",
}

// Secret-looking variable names: Dispatch refuses one in EnvAllow unless a
// provider names it as its CredentialEnv, for the allowlist would pass it
// to every worker. This is the one list of them; names are compared in
// upper case.
var (
	// secretSuffixes match a whole name, or its last words after an "_".
	secretSuffixes = []string{
		"API_KEY",     // the model providers' convention: OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY
		"ACCESS_KEY",  // S3-style key pairs: AWS_SECRET_ACCESS_KEY, MINIO_ACCESS_KEY
		"SECRET_KEY",  // MINIO_SECRET_KEY, Django's SECRET_KEY
		"PRIVATE_KEY", // signing keys in CI: COSIGN_PRIVATE_KEY, TAURI_PRIVATE_KEY
		"TOKEN",       // GITHUB_TOKEN, NPM_TOKEN, HF_TOKEN, claude's ANTHROPIC_AUTH_TOKEN
		"SECRET",      // OAuth client secrets: AZURE_CLIENT_SECRET, GOOGLE_CLIENT_SECRET
		"PASSWORD",    // logins: POSTGRES_PASSWORD, DOCKER_PASSWORD
	}
	// secretNames are well-known credentials, some of which match no
	// suffix above.
	secretNames = []string{
		"AWS_ACCESS_KEY_ID",                 // AWS CLI and SDKs' environment credentials
		"AWS_SECRET_ACCESS_KEY",             // (ditto)
		"AWS_SESSION_TOKEN",                 // (ditto)
		"GOOGLE_APPLICATION_CREDENTIALS",    // Google Cloud ADC: the path of a service-account key
		"AZURE_CLIENT_SECRET",               // Azure Identity's EnvironmentCredential
		"AZURE_CLIENT_CERTIFICATE_PASSWORD", // (ditto)
		"GH_TOKEN", "GITHUB_TOKEN",          // the gh CLI; GitHub Actions
		"PGPASSWORD", // libpq (psql)
		"MYSQL_PWD",  // the mysql client
	}
)

// secretLooking reports whether the variable name looks like it holds a
// secret (secretSuffixes, secretNames).
func secretLooking(name string) bool {
	name = strings.ToUpper(name)
	for _, s := range secretNames {
		if name == s {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if name == s || strings.HasSuffix(name, "_"+s) {
			return true
		}
	}
	return false
}

// EnvRunID is set in every worker's environment to its run id. pilot also
// uses it to recognise the worker's descendants.
const EnvRunID = "PILOT_RUN_ID"

// A Task is one bounded piece of work for one provider.
type Task struct {
	// Provider is the provider's name in the Dispatcher's registry.
	Provider string
	// Mode is the kind of work; required.
	Mode Mode
	// TaskFile is a file holding the task text, and Prompt is the text
	// itself; set one (if both are set, TaskFile wins for {task_file} and
	// Prompt for {prompt}).
	TaskFile string
	Prompt   string
	// Workdir is the directory the worker runs in; empty means the
	// current directory.
	Workdir string
	// Timeout bounds the whole run and IdleTimeout the time without any
	// output; zero means the Dispatcher's defaults. Negative disables.
	Timeout     time.Duration
	IdleTimeout time.Duration
	// Label is a free-form name carried into events and the verdict.
	Label string
	// Sandbox is how far the worker is confined; empty means the
	// provider's mode, else the Dispatcher's, else sandbox.Secrets. A
	// mode set here that the machine cannot enforce fails the dispatch
	// (*sandbox.UnavailableError), spawning nothing.
	Sandbox sandbox.Mode
	// Resume continues an earlier session instead of starting a new one:
	// the Resume field of that run's Verdict, from a provider of the same
	// runner. That is the CLI's session id, or a path: pi's session file,
	// or for an isolated worker (whose sessions live in its own run
	// directory) its session file or store, which the runner carries over
	// into the new worker's config dir. It is required in ModeResume,
	// where the worker may write as in ModeCode; other modes may set it
	// too. A runner that cannot resume refuses it.
	Resume string

	// Key names the task for layers that keep state about it across
	// attempts and restarts (the retry package's budgets, a scheduler's
	// jobs); empty means each derives one. Dispatch does not use it.
	Key string
	// Lineage links this attempt to the attempts of the same task before
	// it, for its record (retry_key, attempt, previous_record,
	// resumed_from, resume_fallback). A retry layer sets it; zero means
	// a first attempt of its own.
	Lineage Lineage
	// Observer, when set, receives this dispatch's events after the
	// Dispatcher's Observer, under the same rules. Orchestration layers
	// use it to follow one task (Fanout's OnEvent does).
	Observer func(Event)
}

// Lineage is what an attempt's record says of the attempts before it. It
// lives in the root, not in retry, because the record is the root's and
// layers other than retry (contrib/temporal) set it too.
type Lineage struct {
	// Key names the task and Attempt numbers this attempt (1 for the
	// first).
	Key     string
	Attempt int
	// PreviousRecord is the record of the attempt before; ResumedFrom
	// the record whose session this attempt continues; ResumeFallback
	// why this attempt starts afresh instead of resuming.
	PreviousRecord string
	ResumedFrom    string
	ResumeFallback string
}

// A TaskDispatcher runs one task and reports its verdict, as
// [Dispatcher.Dispatch] does. Orchestration layers ([Fanout], the retry and
// schedule packages) take one, so that they compose, and so that code built
// on them can be tested with a fake that starts no process. A layer over
// another has an Unwrap() TaskDispatcher method returning it, so that
// Fanout finds the optional methods of the layers beneath (Check, Runs).
type TaskDispatcher interface {
	Dispatch(ctx context.Context, t Task) (Verdict, error)
}

// A Dispatcher runs one task at a time per Dispatch call, each in a worker
// process of its own. Its exported fields are configuration; the zero value
// is ready to use for providers built with the command runner once
// Providers is set. A Dispatcher is safe for concurrent use and is never
// changed by Dispatch.
type Dispatcher struct {
	// Providers resolves Task.Provider.
	Providers *Registry
	// Runners adds runners (or replaces built-in ones) by Name. The
	// command runner is built in.
	Runners []Runner
	// Credentials supplies provider secrets; nil means each provider's
	// CredentialEnv variable in pilot's environment. Dispatch also asks it
	// for every other provider's secret that has a CredentialEnv, to
	// redact those too; their errors are ignored.
	Credentials CredentialSource

	// RunDir is where run directories are made; empty means
	// DefaultRunDir().
	RunDir string

	// Sandbox is the mode of a task whose task and provider name none;
	// empty means sandbox.Secrets, run unconfined (and recorded so) where
	// the machine cannot enforce it. A mode set here is enforced or the
	// dispatch fails, as a task's is.
	Sandbox sandbox.Mode

	// Timeout and IdleTimeout are the defaults for tasks that set none:
	// 3600 s and 900 s when zero.
	Timeout     time.Duration
	IdleTimeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when pilot ends a
	// worker, and the time leftover descendants get after the worker
	// exits; 5 s when zero.
	Grace time.Duration
	// FinishGrace is how long a worker that has printed its final result
	// (its stream or session shows it finished) may take to exit before
	// pilot ends it, keeping the verdict its stream gave; 10 s when zero,
	// never when negative. Claude Code's -p mode, and opencode after some
	// fatal errors, are known to hang there.
	FinishGrace time.Duration
	// WaitDelay bounds how long pilot keeps reading output once the whole
	// process tree is gone; 2 s when zero.
	WaitDelay time.Duration
	// MaxLineBytes is the most of one output line held in memory (longer
	// lines still reach stream.log whole); 8 MiB when zero.
	MaxLineBytes int

	// Stall decides, from the phase of the worker's native session, when
	// a silent worker is inspected and when it is ended as a
	// session-stall. Heartbeat is how often pilot looks at the session
	// file and the silence; 1 s when zero.
	Stall     StallPolicy
	Heartbeat time.Duration

	// EnvAllow names the variables a worker inherits from pilot's
	// environment; nil means PATH, HOME, USER, LOGNAME, SHELL,
	// LANG, LC_ALL, LC_CTYPE, TERM, TMPDIR, TZ and NO_COLOR. A name that
	// looks like a secret (…_API_KEY, …_TOKEN, …_SECRET, …_PASSWORD,
	// AWS_ACCESS_KEY_ID and the like) is refused unless a provider names
	// it as its CredentialEnv: only that provider's worker then gets it,
	// as always. LookupEnv reads them; nil means os.LookupEnv.
	EnvAllow  []string
	LookupEnv func(string) (string, bool)

	// Observer, when set, receives every event of every dispatch. Events
	// of one dispatch arrive in order and never concurrently, from a
	// goroutine of the dispatch's own: a slow observer never delays the
	// worker's supervision (its timeouts, stall checks and kills), and
	// Dispatch returns once its observers have seen every event, the
	// verdict last. An observer that falls more than 10000 events behind
	// misses the events past that (never the started or verdict event)
	// and then gets a worker_runner.events_dropped event counting them;
	// events.log has every one.
	Observer func(Event)
	// OnLine, when set, receives every output line of every worker
	// (every provider's secret redacted), for streaming display. It is
	// called from the goroutines reading the worker's output, never
	// concurrently within one dispatch.
	OnLine func(runID string, l Line)
}

// Dispatch runs t in a worker process and returns its Verdict.
//
// It returns only after the worker and every process it started are gone
// and every goroutine it started has ended. The worker gets a scrubbed
// environment, runs in its own process group under pilot's supervisor, and
// is ended with SIGTERM, then SIGKILL after the grace period, when ctx is
// done or a timeout runs out.
//
// A non-nil error means pilot could not do its job: the task or
// configuration is invalid (nothing was started), a credential is missing
// (*CredentialError; nothing was started), ctx was already done, or the run
// directory could not be written. What the worker did, including failing
// to start, is always the Verdict.
func (d *Dispatcher) Dispatch(ctx context.Context, t Task) (Verdict, error) {
	defer supervise.Hold()() // Shutdown waits for the whole dispatch
	if err := ctx.Err(); err != nil {
		return Verdict{}, fmt.Errorf("pilot: dispatch not started: %w", err)
	}
	cfg := d.withDefaults()
	p, err := cfg.prepare(ctx, t)
	if err != nil {
		return Verdict{}, err
	}
	reconcileRunDir(cfg.RunDir)
	r := &run{d: cfg, task: p.task, prov: p.prov, runner: p.runner, secret: p.secret}
	// Every provider's secret pilot can find is redacted, for a worker may
	// print any key it can read. The others' are resolved while the run
	// directory and the command are made (see awaitSecrets).
	others := make(chan resolved, 1)
	go func() {
		secrets, err := cfg.otherSecrets(ctx, p.prov.Name)
		others <- resolved{secrets, err}
	}()
	r.others = others
	defer r.awaitSecrets()
	r.prepared = func() error { return nil }
	r.runningWritten = func() error { return nil }
	if cfg.Observer != nil || r.task.Observer != nil {
		// No observer may delay supervision; Dispatch returns once they
		// have seen every event.
		r.delivery = newDelivery(r.observe)
		defer r.delivery.close()
	}
	return r.execute(ctx)
}

// Check reports whether Dispatch would accept t: no secret-looking
// variable in EnvAllow that no provider names, a known provider and
// runner, a valid mode, an existing task file and workdir, and a
// configured credential (it asks the CredentialSource for it). It starts
// nothing and writes nothing.
func (d *Dispatcher) Check(ctx context.Context, t Task) error {
	_, err := d.withDefaults().prepare(ctx, t)
	return err
}

type prepared struct {
	task   Task
	prov   Provider
	runner Runner
	secret string
}

// prepare checks the allowlist, resolves and validates t and checks its
// provider's credential.
func (d *Dispatcher) prepare(ctx context.Context, t Task) (prepared, error) {
	if err := d.checkEnvAllow(); err != nil {
		return prepared{}, err
	}
	prov, runner, err := d.resolve(t)
	if err != nil {
		return prepared{}, err
	}
	if err := validateTask(&t); err != nil {
		return prepared{}, err
	}
	if err := d.checkSandbox(t, prov); err != nil {
		return prepared{}, err
	}
	secret, err := d.Credentials.Secret(ctx, prov)
	var missing *CredentialError
	switch {
	case errors.As(err, &missing):
		return prepared{}, err
	case err != nil:
		return prepared{}, fmt.Errorf("pilot: credential check for %s: %w", prov.Name, err)
	case prov.CredentialEnv != "" && secret == "":
		return prepared{}, &CredentialError{Provider: prov.Name, Env: prov.CredentialEnv}
	}
	return prepared{task: t, prov: prov, runner: runner, secret: secret}, nil
}

// checkEnvAllow refuses a secret-looking variable in the allowlist that no
// provider names as its credential: pilot would pass it on to every worker,
// whatever its provider. A provider's own credential variable may be there;
// environ keeps it from every other worker.
func (d *Dispatcher) checkEnvAllow() error {
	creds := d.Providers.credentialEnvs("")
	for _, k := range d.EnvAllow {
		if secretLooking(k) && !creds[k] {
			return fmt.Errorf("pilot: EnvAllow names %s, which looks like a secret: give it to the provider that needs it as its credential_env (Provider.CredentialEnv) or in its env, not to every worker", k)
		}
	}
	return nil
}

func (d *Dispatcher) withDefaults() *Dispatcher {
	c := *d
	if c.Credentials == nil {
		c.Credentials = envCredentials{}
	}
	if c.RunDir == "" {
		c.RunDir = DefaultRunDir()
	}
	if abs, err := filepath.Abs(c.RunDir); err == nil {
		// Workers run in their own directories: every path handed to
		// them must be absolute.
		c.RunDir = abs
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.Grace <= 0 {
		c.Grace = defaultGrace
	}
	if c.WaitDelay <= 0 {
		c.WaitDelay = defaultWaitDelay
	}
	if c.MaxLineBytes <= 0 {
		c.MaxLineBytes = defaultMaxLineBytes
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = defaultHeartbeat
	}
	if c.FinishGrace == 0 {
		c.FinishGrace = defaultFinishGrace
	}
	if c.EnvAllow == nil {
		c.EnvAllow = defaultEnvAllow
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	return &c
}

func (d *Dispatcher) resolve(t Task) (Provider, Runner, error) {
	if t.Provider == "" {
		return Provider{}, nil, errors.New("pilot: task has no provider: set Task.Provider")
	}
	p, ok := d.Providers.Lookup(t.Provider)
	if !ok {
		return Provider{}, nil, fmt.Errorf("pilot: unknown provider: %s (known: %s)", t.Provider, strings.Join(d.Providers.Names(), ", "))
	}
	r := d.runner(p.Runner)
	if r == nil {
		return Provider{}, nil, fmt.Errorf("pilot: provider %s uses runner %q, which this Dispatcher does not have", p.Name, p.Runner)
	}
	return p, r, nil
}

func (d *Dispatcher) runner(name string) Runner {
	for i := len(d.Runners) - 1; i >= 0; i-- {
		if d.Runners[i].Name() == name {
			return d.Runners[i]
		}
	}
	if name == runnerCommand {
		return commandRunner{}
	}
	return nil
}

func validateTask(t *Task) error {
	if !t.Mode.valid() {
		return fmt.Errorf("pilot: unknown mode: %q (want one of code, explore, test, review, resume)", t.Mode)
	}
	if t.Mode == ModeResume && t.Resume == "" {
		return errors.New("pilot: mode resume needs the session to continue: set Task.Resume to the earlier verdict's \"resume\" value")
	}
	if t.TaskFile == "" && t.Prompt == "" {
		return errors.New("pilot: task has neither a task file nor a prompt: set Task.TaskFile or Task.Prompt")
	}
	if t.TaskFile != "" {
		abs, err := filepath.Abs(t.TaskFile)
		if err != nil {
			return fmt.Errorf("pilot: task file: %w", err)
		}
		st, err := os.Stat(abs)
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("pilot: task file not found: %s", t.TaskFile)
		}
		t.TaskFile = abs
	}
	if t.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("pilot: no workdir given and the current directory is unknown: %w", err)
		}
		t.Workdir = wd
	}
	abs, err := filepath.Abs(t.Workdir)
	if err != nil {
		return fmt.Errorf("pilot: workdir: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return fmt.Errorf("pilot: workdir is not an existing directory: %s", t.Workdir)
	}
	t.Workdir = abs
	return nil
}

// run is the state of one dispatch.
type run struct {
	d         *Dispatcher
	task      Task
	prov      Provider
	runner    Runner
	secret    string          // the provider's own credential, for its worker
	red       redactor        // every secret pilot found, taken out of what it writes
	others    <-chan resolved // the other providers' secrets, until awaitSecrets
	othersErr error

	id      string
	dir     string
	rec     Record
	recPath string
	events  *os.File
	stream  *os.File
	log     *lines.Batch // stream.log's writes, batched per read and written beside the reading
	watcher Watcher
	wrapper []string // what the worker runs beneath (macOS's sandbox-exec), or nil

	pendingTask []byte              // task.md content not yet written
	final       *atomicfile.Pending // the final record's temporary file

	// prepared waits for prepareFiles, run in the background while the
	// worker starts; runningWritten waits for the "running" record,
	// written while it runs. Both may be called many times.
	prepared       func() error
	prepErr        error
	runningWritten func() error
	runErr         error

	emitMu   sync.Mutex // serializes events.log writes and the queueing of events
	delivery *delivery  // hands events to the observers; nil without any
	lineMu   sync.Mutex // serializes watcher, OnLine and stream.log writes

	lastOutput  atomic.Int64 // unix nanos of the last byte read
	stdoutBytes atomic.Int64
	stderrBytes atomic.Int64
	stderrTail  lines.Tail
	streamTail  lines.Tail      // both streams, for stall inspections
	diag        *Classification // the strongest diagnostic so far; guarded by lineMu
	confined    bool            // the sandbox was enforced
	denial      string          // the latest line showing a denied access; guarded by lineMu
}

func (r *run) execute(ctx context.Context) (v Verdict, err error) {
	start := time.Now()
	r.id = newRunID(start, r.prov.Name)
	r.dir = filepath.Join(r.d.RunDir, r.id)
	if err := mkdir(r.dir); err != nil {
		return Verdict{}, fmt.Errorf("pilot: creating run directory: %w", err)
	}
	r.recPath = filepath.Join(r.dir, "record.json")
	r.rec = Record{
		RunID:       r.id,
		Provider:    r.prov.Name,
		Mode:        r.task.Mode,
		Label:       r.task.Label,
		Runner:      r.runner.Name(),
		Model:       r.prov.Model,
		Status:      statusRunning,
		Workdir:     r.task.Workdir,
		StartedAt:   start.UTC(),
		Timeout:     r.timeout().Seconds(),
		IdleTimeout: r.idleTimeout().Seconds(),
		StreamLog:   filepath.Join(r.dir, "stream.log"),
		EventsLog:   filepath.Join(r.dir, "events.log"),

		RetryKey:       r.task.Lineage.Key,
		Attempt:        r.task.Lineage.Attempt,
		PreviousRecord: r.task.Lineage.PreviousRecord,
		ResumedFrom:    r.task.Lineage.ResumedFrom,
		ResumeFallback: r.task.Lineage.ResumeFallback,
	}
	defer r.closeLogs()

	// From here on the run directory exists and its record must be closed
	// out on every path.
	defer func() {
		if err != nil {
			now := time.Now().UTC()
			r.rec.Status = string(Failed)
			r.rec.EndedAt = &now
			r.awaitSecrets() // those it found, for an error before the worker starts
			r.rec.PilotError = r.red.string(err.Error())
			r.prepared()
			r.runningWritten()
			if werr := writeRecord(r.recPath, r.final, &r.rec); werr != nil {
				err = errors.Join(err, fmt.Errorf("pilot: closing out %s: %w", r.recPath, werr))
				// A record that cannot be closed out (a full disk)
				// must not go on saying "running": remove it.
				if rerr := os.Remove(r.recPath); rerr == nil {
					err = errors.Join(err, fmt.Errorf("pilot: removed %s, which still said running", r.recPath))
				}
			}
		}
		if r.final != nil {
			r.final.Abort() // a no-op after a commit
		}
	}()

	a, err := r.attempt(ctx)
	if err != nil {
		return Verdict{}, err
	}
	r.rec.TaskFile = a.TaskFile
	cmd, err := r.runner.Command(ctx, a)
	if err != nil {
		return Verdict{}, fmt.Errorf("pilot: runner %s: %w", r.runner.Name(), err)
	}
	if len(cmd.Argv) == 0 {
		return Verdict{}, fmt.Errorf("pilot: runner %s built an empty command", r.runner.Name())
	}
	r.watcher = cmd.Watcher
	if r.watcher == nil {
		r.watcher = exitCodeWatcher{}
	}
	env := r.environ(cmd.Env, cmd.SecretEnv)
	// Nothing of the worker's is written, nor the worker started, before
	// every secret is known.
	if err := r.awaitSecrets(); err != nil {
		return Verdict{}, err
	}
	confinement, report, err := r.confine(env)
	r.rec.Sandbox = &report
	r.confined = report.Enforced
	if err != nil {
		return Verdict{}, err
	}
	if err := mkdir(r.tmpDir()); err != nil {
		return Verdict{}, fmt.Errorf("pilot: creating the worker's temp dir: %w", err)
	}
	r.rec.Argv = make([]string, len(cmd.Argv))
	for i, s := range cmd.Argv {
		r.rec.Argv[i] = r.red.string(s)
	}
	for _, kv := range env {
		r.rec.EnvKeys = append(r.rec.EnvKeys, kv[:strings.IndexByte(kv, '=')])
	}
	sort.Strings(r.rec.EnvKeys)
	if r.pendingTask != nil && commandMentions(cmd, env, a.TaskFile) {
		// The worker reads it: it must exist before the worker starts.
		if err := r.writeTaskFile(); err != nil {
			return Verdict{}, err
		}
	}

	// Create the run's other files while the supervisor starts the
	// worker: on a slow disk that is most of pilot's own cost.
	prep := make(chan error, 1)
	go func() { prep <- r.prepareFiles() }()
	r.prepared = func() error {
		if prep != nil {
			r.prepErr, prep = <-prep, nil
		}
		return r.prepErr
	}
	defer r.prepared()

	exit, job, err := r.supervise(ctx, cmd, env, confinement, start)
	exit.Runner = r.runner.Name()
	if err != nil {
		return Verdict{}, err
	}
	if err := r.prepared(); err != nil { // the worker never started
		return Verdict{}, err
	}
	if err := r.runningWritten(); err != nil {
		return Verdict{}, err
	}
	exit.Diagnostic = r.diagnostic()
	res, failure := r.judge(exit, job.finishedFirst)

	v = Verdict{
		Type:             EventVerdict,
		Provider:         r.prov.Name,
		Mode:             r.task.Mode,
		RunID:            r.id,
		Label:            r.task.Label,
		Verdict:          res.Outcome,
		Failure:          failure,
		StderrTail:       r.tail(),
		DurationMS:       exit.Duration.Milliseconds(),
		Record:           r.recPath,
		OutputIncomplete: job.incomplete,
		Leftovers:        job.leftovers,
		SessionPhase:     job.phase,
		SessionID:        res.SessionID,
		Resume:           res.Resume,
		Usage:            res.Usage,
		SessionGone:      res.SessionGone,
		Sandbox:          r.rec.Sandbox,
	}
	if s := r.rec.SessionRecord; s != nil {
		v.ToolCalls = max(len(s.ExpectedToolCallIDs), len(s.CompletedToolCallIDs)+len(s.PendingToolCallIDs))
	}
	if v.Resume == "" {
		v.Resume = v.SessionID
	}
	if exit.Started {
		if exit.Signal != 0 {
			v.Signal = signalName(syscall.Signal(exit.Signal))
		} else {
			code := exit.Code
			v.ExitCode = &code
		}
	}
	end := start.Add(exit.Duration).UTC()
	r.rec.EndedAt = &end
	r.rec.Status = string(v.Verdict)
	r.rec.ExitCode = v.ExitCode
	r.rec.Signal = v.Signal
	r.rec.Verdict = v.Verdict
	r.rec.Failure = v.Failure
	r.rec.OutputIncomplete = v.OutputIncomplete
	r.rec.Leftovers = v.Leftovers
	r.rec.SessionID, r.rec.Resume, r.rec.Usage = v.SessionID, v.Resume, v.Usage
	r.rec.StdoutBytes = exit.StdoutBytes
	r.rec.StderrBytes = exit.StderrBytes
	if r.denial != "" && !v.Verdict.Success() {
		sb := *r.rec.Sandbox
		sb.Denied = r.red.string(r.denial)
		r.rec.Sandbox, v.Sandbox = &sb, &sb
	}
	r.rec.Provenance = currentProvenance() // the executable on disk now
	if err := writeRecord(r.recPath, r.final, &r.rec); err != nil {
		return Verdict{}, fmt.Errorf("pilot: writing %s: %w", r.recPath, err)
	}
	r.final = nil
	r.emit(Event{Type: EventVerdict, Verdict: &v})
	return v, nil
}

// resolved is what otherSecrets found.
type resolved struct {
	secrets []string
	err     error
}

// awaitSecrets takes the other providers' secrets, resolved while the run
// started, into the redactor, and sizes the output tails for the longest
// secret. It fails when ctx ended before they were all resolved; later
// calls do nothing more.
func (r *run) awaitSecrets() error {
	if r.others == nil {
		return r.othersErr
	}
	o := <-r.others
	r.others, r.othersErr = nil, o.err
	r.red = newRedactor(append(o.secrets, r.secret)...)
	// Enough bytes for 500 characters of any width, plus room to redact a
	// secret cut by the window's start.
	r.stderrTail.N = 4*stderrTailRunes + 2*r.red.longest + 64
	r.streamTail.N = stallTailBytes + 2*r.red.longest + 64
	return r.othersErr
}

// commandMentions reports whether the worker's argv, environment or stdin
// refers to path.
func commandMentions(cmd *Command, env []string, path string) bool {
	for _, s := range append(append([]string(nil), cmd.Argv...), env...) {
		if strings.Contains(s, path) {
			return true
		}
	}
	return bytes.Contains(cmd.Stdin, []byte(path))
}

func (r *run) writeTaskFile() error {
	if r.pendingTask == nil {
		return nil
	}
	if err := writeNew(r.rec.TaskFile, r.pendingTask); err != nil {
		return fmt.Errorf("pilot: writing task file: %w", err)
	}
	r.pendingTask = nil
	return nil
}

// writeNew writes data to the file path, created with mode 0600 or
// truncated (os.WriteFile through atomicfile.OpenFile).
func writeNew(path string, data []byte) error {
	f, err := atomicfile.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// prepareFiles creates what the run directory needs and the worker does
// not: the task file when the worker does not read it, events.log,
// stream.log, and the temporary file of the final record. It runs once the
// worker has started, so that creating files overlaps the worker's
// start-up (its output waits in its pipes meanwhile).
func (r *run) prepareFiles() (err error) {
	r.rec.Provenance = currentProvenance()
	if err := r.writeTaskFile(); err != nil {
		return err
	}
	if err := r.openLogs(); err != nil {
		return err
	}
	if r.final == nil {
		if r.final, err = atomicfile.Prepare(r.recPath); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
	}
	return nil
}

// mkdir makes dir, and its parents only when they are missing (one system
// call in the common case).
func mkdir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(dir), 0o700); err == nil {
			err = os.Mkdir(dir, 0o700)
		}
	}
	return err
}

// openLogs opens events.log and stream.log, once. It runs after the worker
// has started, so that creating the files overlaps the worker's start-up;
// the worker's output waits in its pipes meanwhile.
func (r *run) openLogs() (err error) {
	if r.events == nil {
		if r.events, err = atomicfile.OpenFile(r.rec.EventsLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
	}
	if r.stream == nil {
		if r.stream, err = atomicfile.OpenFile(r.rec.StreamLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return fmt.Errorf("pilot: %w", err)
		}
		r.log = lines.NewBatch(r.stream, streamBatch)
	}
	return nil
}

// streamBatch is the most of a worker's output stream.log's writer gathers
// before writing it (a read from the worker's pipe is at most as big).
const streamBatch = 64 << 10

func (r *run) closeLogs() {
	if r.events != nil {
		r.events.Close()
	}
	if r.log != nil {
		r.log.Close()
	}
	if r.stream != nil {
		r.stream.Close()
	}
}

func (r *run) timeout() time.Duration {
	if r.task.Timeout != 0 {
		return r.task.Timeout
	}
	return r.d.Timeout
}

func (r *run) idleTimeout() time.Duration {
	if r.task.IdleTimeout != 0 {
		return r.task.IdleTimeout
	}
	return r.d.IdleTimeout
}

// attempt fills in the task file and prompt so both are always available.
func (r *run) attempt(ctx context.Context) (Attempt, error) {
	a := Attempt{
		Task:        r.task,
		Provider:    r.prov,
		RunID:       r.id,
		RunDir:      r.dir,
		TaskFile:    r.task.TaskFile,
		Prompt:      r.task.Prompt,
		Workdir:     r.task.Workdir,
		SessionPath: filepath.Join(r.dir, "session.jsonl"),
		Sandbox:     r.enforcedMode(),
	}
	if a.TaskFile == "" {
		// Written before the worker starts when its command refers to
		// it, else while it starts (prepareFiles).
		a.TaskFile = filepath.Join(r.dir, "task.md")
		r.pendingTask = []byte(a.Prompt)
	}
	if a.Prompt == "" {
		data, err := os.ReadFile(a.TaskFile)
		if err != nil {
			return a, fmt.Errorf("pilot: reading task file: %w", err)
		}
		a.Prompt = string(data)
	}
	return a, nil
}

// environ builds the worker's whole environment: the allowlist from pilot's
// environment, the provider's env, the runner's env, EnvRunID, and last the
// provider's own credential. Other providers' credential variables never
// pass.
func (r *run) environ(runnerEnv map[string]string, secretEnv []string) []string {
	others := r.d.Providers.credentialEnvs(r.prov.CredentialEnv)
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if others[k] {
			return
		}
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, k := range r.d.EnvAllow {
		if v, ok := r.d.LookupEnv(k); ok {
			set(k, v)
		}
	}
	// A private temp dir in every mode: the CLIs write conversations and
	// shared libraries to the temp dir and leave them there.
	set("TMPDIR", r.tmpDir())
	for _, m := range []map[string]string{r.prov.Env, runnerEnv} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(k, m[k])
		}
	}
	set(EnvRunID, r.id)
	if r.prov.CredentialEnv != "" {
		set(r.prov.CredentialEnv, r.secret)
		for _, k := range secretEnv {
			if envName.MatchString(k) {
				delete(others, k) // the runner asked for it by name
				set(k, r.secret)
			}
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env
}

// jobInfo is what the supervision of a started worker found beyond its exit.
type jobInfo struct {
	leftovers  int
	incomplete bool
	phase      SessionPhase
	// finishedFirst is set when the worker's session or stream already
	// showed it finished when pilot began to end it.
	finishedFirst bool
}

// supervise starts the worker and follows it until its tree is gone and
// its output is read. A worker that cannot be started is an Exit with
// Started false; the error is for pilot's own failures.
func (r *run) supervise(ctx context.Context, cmd *Command, env []string, confinement *landlock.Ruleset, start time.Time) (Exit, jobInfo, error) {
	var info jobInfo
	exit := Exit{}
	path, err := lookPath(cmd.Argv[0], env)
	if err != nil {
		exit.Err = err
		exit.Duration = time.Since(start)
		return exit, info, nil
	}
	path, argv := wrapped(r.wrapper, path, cmd.Argv)

	outR, outW, err := pipe()
	if err != nil {
		return exit, info, err
	}
	errR, errW, err := pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return exit, info, err
	}
	stdin, stdinDone, err := stdinFile(cmd.Stdin)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return exit, info, err
	}

	job, err := supervise.Start(supervise.Spec{
		Path:    path,
		Argv:    argv,
		Env:     env,
		Dir:     r.task.Workdir,
		Cookie:  EnvRunID + "=" + r.id,
		Grace:   r.d.Grace,
		Sandbox: confinement,
	}, stdin, outW, errW)
	outW.Close()
	errW.Close()
	stdin.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		stdinDone()
		if !errors.As(err, new(*supervise.StartError)) {
			return exit, info, fmt.Errorf("pilot: %w", err)
		}
		exit.Err = err
		exit.Duration = time.Since(start)
		return exit, info, nil
	}
	defer job.Close()
	exit.Started = true
	r.rec.Pid, r.rec.Pgid = job.Pid, job.Pid
	startedAt := time.Now()
	r.lastOutput.Store(startedAt.UnixNano())
	if err = r.prepared(); err != nil {
		// Pilot cannot keep its records: do not let the worker run
		// unrecorded.
		_ = job.Signal(syscall.SIGKILL)
		<-job.Done()
		outR.Close()
		errR.Close()
		stdinDone()
		return exit, info, err
	}
	r.emit(Event{Type: EventStarted, Started: &Started{
		Type:      EventStarted,
		Provider:  r.prov.Name,
		Mode:      r.task.Mode,
		RunID:     r.id,
		Label:     r.task.Label,
		Pid:       job.Pid,
		Runner:    r.runner.Name(),
		Model:     r.prov.Model,
		Workdir:   r.task.Workdir,
		RunDir:    r.dir,
		Record:    r.recPath,
		StartedAt: start.UTC(),
	}})
	// The "running" record is written while the worker runs; the final
	// write waits for it.
	running := r.rec
	written := make(chan error, 1)
	go func() { written <- writeRecord(r.recPath, nil, &running) }()
	r.runningWritten = func() error {
		if written != nil {
			if err := <-written; err != nil {
				r.runErr = fmt.Errorf("pilot: writing %s: %w", r.recPath, err)
			}
			written = nil
		}
		return r.runErr
	}

	var readers sync.WaitGroup
	readers.Add(2)
	go r.read(&readers, outR, Stdout, &r.stdoutBytes)
	go r.read(&readers, errR, Stderr, &r.stderrBytes)
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()

	watch := r.newSessionWatch(cmd, start)
	m := &supervisor{
		timeout:     r.timeout(),
		idle:        r.idleTimeout(),
		grace:       r.d.Grace,
		finishGrace: r.d.FinishGrace,
		heartbeat:   r.d.Heartbeat,
		stall:       r.d.Stall,
		view:        watch,
	}
	r.drive(ctx, job, m, startedAt)
	exit.Terminated, exit.Reason = m.terminated, m.reason
	info.finishedFirst = m.finishedFirst
	if err := job.Err(); err != nil {
		outR.Close()
		errR.Close()
		<-readersDone
		stdinDone()
		return exit, info, fmt.Errorf("pilot: worker %d: %w (pilot killed the %d process(es) of its tree it found left)", job.Pid, err, job.Leftovers())
	}
	info.leftovers = job.Leftovers()
	if info.leftovers > 0 {
		r.emit(Event{Type: EventLeftovers, Message: fmt.Sprintf("the worker exited leaving %d process(es) running; pilot killed them", info.leftovers)})
	}
	select {
	case <-readersDone:
	case <-time.After(r.d.WaitDelay):
		info.incomplete = true
		outR.Close()
		errR.Close()
		<-readersDone
	}
	outR.Close()
	errR.Close()
	stdinDone()
	watch.beat(time.Now()) // the session as the worker left it, every line read
	r.rec.SessionRecord = watch.record(r.d.Stall)
	info.phase = watch.state.Phase

	st := job.Status()
	switch {
	case st.Signaled():
		exit.Code, exit.Signal = -1, int(st.Signal())
	default:
		exit.Code = st.ExitStatus()
	}
	exit.StdoutBytes = r.stdoutBytes.Load()
	exit.StderrBytes = r.stderrBytes.Load()
	exit.Duration = time.Since(start)
	return exit, info, nil
}

// judge asks the watcher, then pilot's policy (verdictOf), and redacts
// what of it the worker printed: the evidence and its session id.
func (r *run) judge(e Exit, finishedFirst bool) (Result, Failure) {
	r.lineMu.Lock()
	said := r.watcher.Finish(seenExit(e, finishedFirst))
	r.lineMu.Unlock()
	loop, retrying := r.retryLoop()
	res, f := verdictOf(e, said, loop, retrying, finishedFirst)
	f.EvidenceExcerpt = r.red.string(f.EvidenceExcerpt)
	f.EvidenceNote = r.red.string(f.EvidenceNote)
	res.SessionID, res.Resume = r.red.string(res.SessionID), r.red.string(res.Resume)
	return res, f
}

// read drains one output pipe into stream.log, the watcher and OnLine.
func (r *run) read(wg *sync.WaitGroup, f *os.File, s Stream, count *atomic.Int64) {
	defer wg.Done()
	tag := []byte("out ")
	if s == Stderr {
		tag = []byte("err ")
	}
	clean := false // no secret can be in this read
	sp := &lines.Splitter{
		Max:      r.d.MaxLineBytes,
		SpillDir: r.dir,
		OnLine:   func(l lines.Line) { r.line(s, tag, l, clean && l.InPlace) },
	}
	bp := readBufs.Get().(*[readBuf]byte)
	defer readBufs.Put(bp)
	buf := bp[:]
	for {
		n, err := f.Read(buf)
		if n > 0 {
			r.lastOutput.Store(time.Now().UnixNano())
			count.Add(int64(n))
			// One lock for all the lines of a read (line runs under it).
			r.lineMu.Lock()
			if s == Stderr {
				r.stderrTail.Write(buf[:n])
			}
			r.streamTail.Write(buf[:n])
			// One look for the secrets in the whole read costs less
			// than one in each of its lines.
			clean = r.red.clean(buf[:n])
			sp.Write(buf[:n])
			// The lines of this read go to stream.log in one write, made
			// while the next read is taken and split.
			r.log.Flush()
			r.lineMu.Unlock()
		}
		if err != nil {
			break
		}
	}
	r.lineMu.Lock()
	sp.Close()
	// Every line of this stream is in stream.log before the run's record
	// can say it ended.
	r.log.Sync()
	r.lineMu.Unlock()
}

var newline = []byte("\n")

// readBuf is the size of one read from a worker's pipe.
const readBuf = 64 << 10

// readBufs holds the read buffers of finished runs: a dispatch of a short
// worker would otherwise allocate two of them, most of its garbage. Nothing
// keeps a reference into a buffer once its reader returns (lines are copied
// into stream.log's batch, and watchers and OnLine keep no line).
var readBufs = sync.Pool{New: func() any { return new([readBuf]byte) }}

// line handles one complete output line: stream.log gets all of it, the
// watcher and OnLine get at most MaxLineBytes. A clean line is one in
// which no secret can be. Called with lineMu held.
func (r *run) line(s Stream, tag []byte, l lines.Line, clean bool) {
	data := bytes.TrimSuffix(l.Data, []byte("\r"))
	out := l.Data
	if !clean {
		out = r.red.bytes(l.Data)
	}
	switch {
	case l.Spill != nil:
		// A line too long to hold, copied from its spill file after
		// what came before it.
		r.log.Sync()
		r.stream.Write(tag)
		r.red.copy(r.stream, l.Spill)
		r.stream.Write([]byte("\n"))
	case len(out) > streamBatch:
		// A long line: written where it is, not copied into a batch.
		r.log.Sync()
		r.stream.Write(tag)
		r.stream.Write(out)
		r.stream.Write([]byte("\n"))
	default:
		r.log.Append(tag, out, newline)
	}
	line := Line{Stream: s, Data: data, Size: l.Size, Truncated: l.Truncated}
	r.noteDiagnostic(line)
	r.noteDenial(line)
	r.watcher.Line(line)
	if r.d.OnLine != nil {
		if !clean {
			line.Data = r.red.bytes(data)
		}
		r.d.OnLine(r.id, line)
	}
}

// maxDiagnosticText is the longest stderr line pilot classifies for a
// watcher without Diagnose.
const maxDiagnosticText = 64 << 10

// noteDiagnostic classifies a line (the watcher's Diagnose, or
// ClassifyFailure for a stderr line) and keeps the strongest diagnostic so
// far, the latest of equals. Called with lineMu held.
func (r *run) noteDiagnostic(l Line) {
	if l.Truncated {
		return
	}
	// The line is not copied (a megabyte-long line would cost a megabyte
	// of garbage): a Diagnoser must keep nothing of it, and what it
	// returns, which may alias it, is cloned.
	line := unsafe.String(unsafe.SliceData(l.Data), len(l.Data))
	var c Classification
	if dw, ok := r.watcher.(Diagnoser); ok {
		if c, ok = dw.Diagnose(l.Stream, line); !ok {
			return
		}
	} else if l.Stream == Stderr && len(line) <= maxDiagnosticText {
		c = ClassifyFailure(line)
	}
	if c.Evidence == "" {
		return
	}
	c.Evidence, c.Note, c.Source = strings.Clone(c.Evidence), strings.Clone(c.Note), strings.Clone(c.Source)
	if c.Source == "" {
		c.Source = r.runner.Name() + ":" + string(l.Stream)
	}
	if r.diag == nil {
		r.diag = new(Classification)
	}
	*r.diag = Strongest(*r.diag, c)
}

// diagnostic returns the strongest diagnostic seen, or nil.
func (r *run) diagnostic() *Classification {
	r.lineMu.Lock()
	defer r.lineMu.Unlock()
	if r.diag == nil {
		return nil
	}
	d := *r.diag
	return &d
}

func (r *run) emit(e Event) {
	e.RunID = r.id
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	r.emitMu.Lock()
	defer r.emitMu.Unlock()
	if data, err := json.Marshal(e); err == nil {
		r.events.Write(append(data, '\n'))
	}
	if r.delivery != nil {
		r.delivery.push(e) // the observers get it from their own goroutine
	}
}

// observe hands e to the Dispatcher's observer, then the task's.
func (r *run) observe(e Event) {
	if r.d.Observer != nil {
		r.d.Observer(e)
	}
	if r.task.Observer != nil {
		r.task.Observer(e)
	}
}

// stderrTailRunes is the most characters a verdict's stderr_tail holds.
const stderrTailRunes = 500

func (r *run) tail() string {
	r.lineMu.Lock()
	raw := append([]byte(nil), r.stderrTail.Bytes()...)
	r.lineMu.Unlock()
	return text.LastRunes(strings.ToValidUTF8(string(r.red.bytes(raw)), "\uFFFD"), stderrTailRunes)
}

// pipe returns a pipe whose read end pilot reads through the runtime
// poller (so Close unblocks a Read) and whose write end is blocking, as
// ordinary programs expect their stdout to be.
func pipe() (r, w *os.File, err error) {
	return newPipe("worker-output", true)
}

// stdinFile returns the worker's stdin: /dev/null, or a pipe fed with data
// by a goroutine that wait (the second result) waits for.
func stdinFile(data []byte) (*os.File, func(), error) {
	if data == nil {
		// Opened as a plain file: nothing of pilot's reads it.
		f, err := atomicfile.OpenFile(os.DevNull, os.O_RDONLY, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("pilot: %w", err)
		}
		return f, func() {}, nil
	}
	rd, wr, err := newPipe("worker-stdin", false)
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wr.Write(data)
		wr.Close()
	}()
	return rd, func() {
		wr.Close() // unblocks a write the worker never read
		<-done
	}, nil
}

// lookPath finds prog in the PATH of env, the worker's environment.
func lookPath(prog string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // never the current directory
		}
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in the worker's PATH (%s)", prog, path)
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}
