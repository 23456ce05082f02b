package pilot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	// fatal errors, are known to hang there. A worker that goes on after
	// its final result (its stream starts another turn) is not ended: the
	// grace starts again at its next final result.
	FinishGrace time.Duration
	// WaitDelay is how long pilot waits on a quiet output pipe once the
	// worker's whole process tree is gone (a process pilot could not kill
	// may hold it open); 2 s when zero. Output still waiting in the pipes
	// is read however long that takes on a busy machine, and a pipe that
	// keeps giving output is read for at most 15 × WaitDelay. A verdict
	// whose pipes were cut off says so (Verdict.OutputIncomplete).
	WaitDelay time.Duration
	// MaxLineBytes is the most of one output line held in memory (longer
	// lines still reach stream.log whole); 8 MiB when zero.
	MaxLineBytes int

	// Stall decides, from the phase of the worker's native session, when
	// a silent worker is inspected and when it is ended as a
	// session-stall. Heartbeat is how often pilot looks at the session
	// file and the silence, and (on Linux) measures the resident memory
	// of the worker's tree, for its memory limit and its peak; 1 s when
	// zero. A tree with a memory limit, or in a Fanout with a memory
	// budget, is measured at every heartbeat; another at each of its
	// first five, then at every fifth while it holds steady, and at each
	// of the five after a measure that moved by an eighth or 16 MiB
	// (the move a memory event reports).
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
	// concurrently within one dispatch. A worker that prints line after
	// line (more often than every 100 ms, under 16 KiB a tick) is read
	// about every 100 ms, so its lines arrive in groups, and pilot spends
	// a read and a stream.log write on each group rather than on each
	// line; one that prints now and then, or fast, is read as it prints.
	// A dispatch whose timeouts or stall policy act on a silence under
	// 1 s waits a tenth of the shortest instead.
	OnLine func(runID string, l Line)
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

// defaultEnvAllow is the environment a worker inherits from pilot's own when
// Dispatcher.EnvAllow is nil. Everything else is dropped.
var defaultEnvAllow = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE",
	"TERM", "TMPDIR", "TZ", "NO_COLOR",
}
