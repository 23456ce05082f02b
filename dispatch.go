package pilot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/landlock"
	"github.com/pilotworkers/pilot/internal/rundir"
	"github.com/pilotworkers/pilot/internal/supervise"
	"github.com/pilotworkers/pilot/size"
)

// A TaskDispatcher runs one task and reports its verdict, as
// [Dispatcher.Dispatch] does. Orchestration layers ([Fanout], the retry and
// schedule packages) take one, so that they compose, and so that code built
// on them can be tested with a fake that starts no process. A layer over
// another has an Unwrap() TaskDispatcher method returning it, so that
// Fanout finds the optional methods of the layers beneath (Check, Runs).
type TaskDispatcher interface {
	Dispatch(ctx context.Context, t Task) (Verdict, error)
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
	r.others = inBackground(func() ([]string, error) { return cfg.otherSecrets(ctx, p.prov.Name) })
	defer r.awaitSecrets()
	if cfg.Observer != nil || r.task.Observer != nil {
		// No observer may delay supervision; Dispatch returns once they
		// have seen every event.
		r.delivery = newDelivery(r.observe)
		defer r.delivery.close()
	}
	v, err := r.execute(ctx)
	return v, fdLimit(err)
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
	if err := checkMemoryLimit(t, prov); err != nil {
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

func (r *run) execute(ctx context.Context) (v Verdict, err error) {
	start := time.Now()
	r.id = newRunID(start, r.prov.Name)
	r.dir = filepath.Join(r.d.RunDir, r.id)
	if err := mkdir(r.dir); err != nil {
		return Verdict{}, fmt.Errorf("pilot: creating run directory: %w", err)
	}
	r.recPath = filepath.Join(r.dir, "record.json")
	r.rec = r.newRecord(start)
	defer r.closeLogs()

	// From here on the run directory exists and its record must be closed
	// out on every path.
	defer func() { err = r.closeOut(err) }()

	cmd, env, confinement, err := r.command(ctx)
	if err != nil {
		return Verdict{}, err
	}

	// Create the run's other files while the supervisor starts the
	// worker: on a slow disk that is most of pilot's own cost.
	r.files = inBackground(func() (struct{}, error) { return struct{}{}, r.prepareFiles() })
	defer r.files.wait()

	exit, job, err := r.supervise(ctx, cmd, env, confinement, start)
	exit.Runner = r.runner.Name()
	if err != nil {
		return Verdict{}, err
	}
	if _, err := r.files.wait(); err != nil { // the worker never started
		return Verdict{}, err
	}
	if _, err := r.running.wait(); err != nil {
		return Verdict{}, err
	}
	exit.Diagnostic = r.diagnostic()
	res, failure := r.judge(exit, job.finishedFirst)
	if exit.Terminated && exit.Reason == FailBudget {
		failure.EvidenceSource, failure.EvidenceExcerpt = "pilot", job.spent
	}
	if failure.FailureClass == FailMemoryLimit && job.memOver != nil {
		failure.EvidenceSource = "pilot:memory"
		failure.EvidenceExcerpt = memoryOver(*job.memOver, r.memoryLimit())
	}

	v = r.finalVerdict(exit, job, res, failure)
	r.closeRecord(&v, exit, start)
	if err := writeRecord(r.recPath, r.final, &r.rec); err != nil {
		return Verdict{}, fmt.Errorf("pilot: writing %s: %w", r.recPath, err)
	}
	r.final = nil
	r.emit(Event{Type: event.Verdict, Verdict: &v})
	return v, nil
}

// command builds the worker's command for the run's attempt, its
// environment and its sandbox's rules, recording them; the task file is
// written first when the worker reads it.
func (r *run) command(ctx context.Context) (*Command, []string, *landlock.Ruleset, error) {
	a, err := r.attempt(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	r.rec.TaskFile = a.TaskFile
	cmd, err := r.runner.Command(ctx, a)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pilot: runner %s: %w", r.runner.Name(), err)
	}
	if len(cmd.Argv) == 0 {
		return nil, nil, nil, fmt.Errorf("pilot: runner %s built an empty command", r.runner.Name())
	}
	r.watcher = cmd.Watcher
	if r.watcher == nil {
		r.watcher = exitCodeWatcher{}
	}
	if err := r.checkBudget(); err != nil {
		return nil, nil, nil, err
	}
	env := r.environ(cmd.Env, cmd.SecretEnv)
	// Nothing of the worker's is written, nor the worker started, before
	// every secret is known.
	if err := r.awaitSecrets(); err != nil {
		return nil, nil, nil, err
	}
	confinement, report, err := r.confine(env)
	r.rec.Sandbox = &report
	r.confined = report.Enforced
	if err != nil {
		return nil, nil, nil, err
	}
	if err := mkdir(r.tmpDir()); err != nil {
		return nil, nil, nil, fmt.Errorf("pilot: creating the worker's temp dir: %w", err)
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
			return nil, nil, nil, err
		}
	}
	return cmd, env, confinement, nil
}

// newRecord is the record of the run starting at start, status running.
func (r *run) newRecord(start time.Time) Record {
	return Record{
		RunID:       r.id,
		Provider:    r.prov.Name,
		Mode:        r.task.Mode,
		Label:       r.task.Label,
		Group:       r.task.Group,
		GroupJob:    r.task.GroupJob,
		Runner:      r.runner.Name(),
		Model:       r.prov.Model,
		Status:      statusRunning,
		Workdir:     r.task.Workdir,
		StartedAt:   start.UTC(),
		Timeout:     r.timeout().Seconds(),
		IdleTimeout: r.idleTimeout().Seconds(),

		MemoryLimitBytes: int64(r.memoryLimit()),
		StreamLog:        filepath.Join(r.dir, "stream.log"),
		EventsLog:        filepath.Join(r.dir, "events.log"),

		RetryKey:       r.task.Lineage.Key,
		Attempt:        r.task.Lineage.Attempt,
		PreviousRecord: r.task.Lineage.PreviousRecord,
		ResumedFrom:    r.task.Lineage.ResumedFrom,
		ResumeFallback: r.task.Lineage.ResumeFallback,
	}
}

// closeOut closes out the record of a run that ends with err, which it
// returns with whatever closing out added; the record of a run that ends
// in a verdict is written by execute.
func (r *run) closeOut(err error) error {
	if err != nil {
		now := time.Now().UTC()
		r.rec.Status = string(Failed)
		r.rec.EndedAt = &now
		r.awaitSecrets() // those it found, for an error before the worker starts
		r.rec.PilotError = r.red.string(err.Error())
		r.files.wait()
		r.running.wait()
		r.rec.RunDirBytes = r.dirSize()
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
	return err
}

// finalVerdict is the Verdict of a run that ended as exit says, judged res and
// failure.
func (r *run) finalVerdict(exit Exit, job jobInfo, res Result, failure Failure) Verdict {
	v := Verdict{
		Type:             event.Verdict,
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
		PeakRSSBytes:     job.peak.RSSBytes,
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
	if job.peak.Top.Pid != 0 {
		top := job.peak.Top
		v.PeakRSSProcess = &top
	}
	if exit.Started {
		if exit.Signal != 0 {
			v.Signal = signalName(syscall.Signal(exit.Signal))
		} else {
			code := exit.Code
			v.ExitCode = &code
		}
	}
	return v
}

// closeRecord fills in the record of a run that ended in v, as exit says,
// and marks v's sandbox with the access it denied a failed worker.
func (r *run) closeRecord(v *Verdict, exit Exit, start time.Time) {
	end := start.Add(exit.Duration).UTC()
	r.rec.EndedAt = &end
	r.rec.Status = string(v.Verdict)
	r.rec.ExitCode = v.ExitCode
	r.rec.Signal = v.Signal
	r.rec.Verdict = v.Verdict
	r.rec.Failure = v.Failure
	r.rec.OutputIncomplete = v.OutputIncomplete
	r.rec.Leftovers = v.Leftovers
	r.rec.PeakRSSBytes, r.rec.PeakRSSProcess = v.PeakRSSBytes, v.PeakRSSProcess
	r.rec.SessionID, r.rec.Resume, r.rec.Usage = v.SessionID, v.Resume, v.Usage
	r.rec.StdoutBytes = exit.StdoutBytes
	r.rec.StderrBytes = exit.StderrBytes
	r.rec.RunDirBytes = r.dirSize()
	v.RunDirBytes = r.rec.RunDirBytes
	if r.denial != "" && !v.Verdict.Success() {
		sb := *r.rec.Sandbox
		sb.Denied = r.red.string(r.denial)
		r.rec.Sandbox, v.Sandbox = &sb, &sb
	}
	r.rec.Provenance = currentProvenance() // the executable on disk now
}

// dirSize is the size of the run directory's files: a walk of it, cheap
// beside a dispatch; a lower bound where part of it cannot be read.
func (r *run) dirSize() int64 {
	n, _ := rundir.Size(r.dir)
	return n
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

// jobInfo is what the supervision of a started worker found beyond its exit.
type jobInfo struct {
	leftovers  int
	incomplete bool
	phase      SessionPhase
	// finishedFirst is set when the worker's session or stream already
	// showed it finished when pilot began to end it.
	finishedFirst bool
	// spent is the usage that ended a worker past its budget.
	spent string
	// peak is the tree's memory at its peak; memOver the sample that
	// went past the memory limit, when one ended the worker.
	peak    size.Tree
	memOver *size.Tree
}

// supervise starts the worker and follows it until its tree is gone and
// its output is read. A worker that cannot be started is an Exit with
// Started false; the error is for pilot's own failures.
func (r *run) supervise(ctx context.Context, cmd *Command, env []string, confinement *landlock.Ruleset, start time.Time) (Exit, jobInfo, error) {
	var info jobInfo
	exit := Exit{}
	job, w, notStarted, err := r.spawn(cmd, env, confinement)
	if notStarted != nil {
		exit.Err, exit.Duration = notStarted, time.Since(start)
	}
	if job == nil {
		return exit, info, err
	}
	defer job.Close()
	exit.Started = true
	r.rec.Pid, r.rec.Pgid = job.Pid, job.Pid
	startedAt := time.Now()
	r.lastOutput.Store(startedAt.UnixNano())
	if _, err = r.files.wait(); err != nil {
		// Pilot cannot keep its records: do not let the worker run
		// unrecorded.
		_ = job.Signal(syscall.SIGKILL)
		<-job.Done()
		w.closeAll()
		return exit, info, err
	}
	r.announce(job.Pid, start)

	w.readInto(r)
	watch := r.newSessionWatch(cmd, start)
	r.mem = r.newMemoryWatch()
	m := r.supervisor(watch, ctx.Value(memoryFollowedKey{}) != nil)
	r.drive(ctx, job, m, startedAt)
	exit.Terminated, exit.Reason = m.terminated, m.reason
	info.finishedFirst, info.spent = m.finishedFirst, m.spent
	info.peak, info.memOver = r.mem.final(job.Pid, job.MaxRSS(), cmd.Argv[0]), m.memOver
	if err := job.Err(); err != nil {
		w.closeAll()
		return exit, info, fmt.Errorf("pilot: worker %d: %w (pilot killed the %d process(es) of its tree it found left)", job.Pid, err, job.Leftovers())
	}
	info.leftovers = job.Leftovers()
	if info.leftovers > 0 {
		r.emit(Event{Type: event.Leftovers, Message: fmt.Sprintf("the worker exited leaving %d process(es) running; pilot killed them", info.leftovers)})
	}
	info.incomplete = !w.drain(r.d.WaitDelay)
	watch.beat(time.Now()) // the session as the worker left it, every line read
	r.rec.SessionRecord = watch.record(r.d.Stall)
	if watch.follows() {
		info.phase = watch.state.Phase
	}

	r.ended(&exit, job.Status(), start)
	return exit, info, nil
}

// spawn starts cmd's worker, with pilot's ends of its stdio. A worker that
// could not be started (no such program, a failed exec) is notStarted,
// with a nil job; err is pilot's own failure.
func (r *run) spawn(cmd *Command, env []string, confinement *landlock.Ruleset) (job *supervise.Job, w *workerIO, notStarted, err error) {
	path, err := lookPath(cmd.Argv[0], env)
	if err != nil {
		return nil, nil, err, nil
	}
	path, argv := wrapped(r.wrapper, path, cmd.Argv)
	w, outW, errW, stdin, err := openWorkerIO(cmd.Stdin)
	if err != nil {
		return nil, nil, nil, err
	}
	job, err = supervise.Start(supervise.Spec{
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
	switch {
	case err == nil:
		return job, w, nil, nil
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		// Out of descriptors (the supervisor's, in its fork): pilot's
		// failure, not the worker's.
		w.closeAll()
		return nil, nil, nil, fmt.Errorf("pilot: %w", err)
	case errors.As(err, new(*supervise.StartError)):
		w.closeAll()
		return nil, nil, err, nil
	default:
		w.closeAll()
		return nil, nil, nil, fmt.Errorf("pilot: %w", err)
	}
}

// supervisor is the policy that follows the worker whose session watch
// shows: the Dispatcher's timeouts, grace periods and stall policy, and
// the task's memory limit. followed says a Fanout's memory budget follows
// the tree's samples: it is then sampled at every heartbeat.
func (r *run) supervisor(watch *sessionWatch, followed bool) *supervisor {
	return &supervisor{
		timeout:     r.timeout(),
		idle:        r.idleTimeout(),
		grace:       r.d.Grace,
		finishGrace: r.d.FinishGrace,
		heartbeat:   r.d.Heartbeat,
		stall:       r.d.Stall,
		view:        watch,
		budget:      r.budget(),
		sample:      followsMemory,
		everyBeat:   followed,
		lastRSS:     -1,
		memLimit:    r.memoryLimit(),
	}
}

// ended fills in how the worker that started at start ended: its exit
// status st, and what it wrote.
func (r *run) ended(exit *Exit, st supervise.Status, start time.Time) {
	switch {
	case st.Signaled():
		exit.Code, exit.Signal = -1, int(st.Signal())
	default:
		exit.Code = st.ExitStatus()
	}
	exit.StdoutBytes = r.stdoutBytes.Load()
	exit.StderrBytes = r.stderrBytes.Load()
	exit.Duration = time.Since(start)
}

// announce emits the started event of the worker pid and writes the
// "running" record while it runs (r.running), which the final one must
// follow.
func (r *run) announce(pid int, start time.Time) {
	r.emit(Event{Type: event.Started, Started: &Started{
		Type:      event.Started,
		Provider:  r.prov.Name,
		Mode:      r.task.Mode,
		RunID:     r.id,
		Label:     r.task.Label,
		Pid:       pid,
		Runner:    r.runner.Name(),
		Model:     r.prov.Model,
		Workdir:   r.task.Workdir,
		RunDir:    r.dir,
		Record:    r.recPath,
		StartedAt: start.UTC(),
	}})
	running := r.rec
	r.running = inBackground(func() (struct{}, error) {
		if err := writeRecord(r.recPath, nil, &running); err != nil {
			return struct{}{}, fmt.Errorf("pilot: writing %s: %w", r.recPath, err)
		}
		return struct{}{}, nil
	})
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
