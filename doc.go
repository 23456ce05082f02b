// Package pilot dispatches bounded tasks to isolated LLM coding-agent CLI
// workers (pi, codex, Claude Code, opencode, gemini-cli, or any command) and
// reports each outcome truthfully: a [Verdict] with its failure class and the
// evidence for it.
//
// # One dispatch
//
// [Dispatcher.Dispatch] resolves the task's [Provider] to a [Runner], checks
// the provider's credential before anything is spawned, builds the worker's
// command and a scrubbed environment (an allowlist, the provider's own env,
// and only that provider's secret), and runs the worker in its own process
// group. Its stdout and stderr are read line by line with no line-length
// limit and bounded memory into the run directory's stream.log; events go to
// events.log and to Dispatcher.Observer; record.json is written atomically
// at the start ("running") and at the end (the verdict). The Runner's
// [Watcher] reads every line and judges the attempt.
//
// A cancelled context, the wall-clock Timeout and the IdleTimeout (no output)
// each end the worker the same way: SIGTERM to every process of its tree,
// the Grace period, then SIGKILL. Their failure classes stay distinct.
//
// # Agent CLIs
//
// The built-in runners ([BuiltinRunners]) drive pi, codex, Claude Code,
// opencode and gemini-cli in their non-interactive JSON modes, and the
// command runner any program. Each builds its CLI's command line for the
// task's mode, gives the worker its own config dir when the provider asks
// ([Provider].Isolated, or a BaseURL, for which pilot writes the CLI's own
// endpoint config), and returns a [PhaseWatcher] that reads the CLI's event
// stream: the phase (fed to the [StallPolicy], with announced retry delays
// treated as expected silence), the session id, token usage and cost, and
// the outcome. A verdict is completed only when the CLI's own stream says
// the task finished; pi's exit 0 after a failed model call and Claude
// Code's API errors reported as successful results are failures, and a CLI
// that exits 0 without its terminal event is [FailIncomplete]. Task.Resume
// continues an earlier session from its verdict's Resume value.
//
// Built-in providers ([DefaultProviders], [LoadRegistry]) keep
// pilot-workers' names; a providers file adds or replaces them.
// Credentials come from the environment, 0600 files under the user's
// config dir, or a chain of both ([DefaultCredentials]).
//
// # Process trees
//
// Agent CLIs start their tools in process groups and sessions of their own,
// and some leave them running when they exit. Killing the worker's process
// group is not enough, so pilot runs workers under a supervisor: this
// program's own executable, started again on the first dispatch (package
// init code recognises it before main runs) and kept for a few seconds after
// the last. On Linux the supervisor is a child subreaper, so a worker's
// descendants stay its descendants even when they double-fork or call
// setsid; it reaps them itself, so the program embedding pilot reaps its own
// children exactly as before. When a worker exits, whatever it left running
// gets SIGTERM, the grace period, then SIGKILL, and Dispatch returns only
// when nothing of the tree is left ([Verdict].Leftovers counts them). When
// the dispatching program dies, even by SIGKILL, the supervisor sees its
// control socket close and ends every tree.
//
// The supervisor takes over in the init function of pilot's
// internal/supervise package, which runs before main and before the init
// functions of packages that import pilot; init functions of unrelated
// packages that sort before it may still run in the supervisor, so keep
// them free of side effects such as network connections.
//
// A descendant that clears its environment and detaches from the tree is
// still killed, but only once every dispatch that was running when it was
// found has ended. A process handed to an unrelated daemon (a container
// engine, tmux's server, systemd-run) is outside the tree and out of reach.
//
// Darwin has no child subreaper: there the supervisor holds a worker by its
// process group alone. Signals go to the group, and whatever is still in it
// when the worker exits gets SIGTERM, the grace period, then SIGKILL. A
// descendant that leaves the group (setsid or setpgid, as agent CLIs do for
// their tools) escapes: it is not signalled, waited for, counted or killed,
// and runs on after Dispatch returns. Leftovers is 1, not a count, when the
// group outlived the worker. On Windows, Dispatch returns an error wrapping
// [errors.ErrUnsupported].
//
// # What importing pilot does
//
// Importing pilot adds an init function (internal/supervise's) that looks
// for PILOT_SUPERVISOR_FD in the environment: when it is not empty, the
// process is a supervisor, and init runs the supervisor and exits instead
// of returning. Nothing else happens until the first dispatch, which starts
// the program's own executable (/proc/self/exe on Linux, [os.Executable]
// elsewhere) in a process group of its own, with the argv
// ["pilot-supervisor"], the environment PILOT_SUPERVISOR_FD=3 (plus GORACE,
// if set) and nothing else, and its control socket as descriptor 3. The
// supervisor serves every later dispatch; 5 seconds after the last one ends
// it exits, and the goroutine pilot keeps to read from it returns.
// [Shutdown] ends both at once. The supervisor also exits when the program
// does.
//
// # What pilot does not do
//
// The library never prints and never installs signal handlers: the caller
// cancels the context (the example command uses signal.NotifyContext). It
// does not schedule or sandbox beyond the environment and process tree, and
// retries only when asked ([Dispatcher.DispatchWithRetry], Fanout.Retry);
// the rest is the caller's, or later layers'. It dispatches on Linux and,
// with the weaker supervision above, on darwin.
//
// # Retries and state
//
// [Dispatcher.DispatchWithRetry] runs a task again after failures its
// [RetryPolicy] retries: afresh after network, stream, server and generic
// failures, in the same session (with a resume prompt) after a session-stall
// or context-limit, never after provider-auth, provider-quota, spawn-failed
// or cancelled. Each attempt is a dispatch of its own whose record names the
// attempt before it. A budget of consecutive failures per task and stage
// blocks the task when it runs out; the waits between attempts grow from 10 s
// to 5 min and never hold a Fanout slot. A [StateStore] keeps budgets, blocks
// and the last attempt in a locked, durably written JSON file, so that a
// restarted orchestrator blocks at the same limit and can resume a failed
// attempt's session ([ResumeFromRecord]).
//
// # Errors and verdicts
//
// An error from Dispatch means pilot could not do its job: an invalid task
// or configuration, a missing credential ([CredentialError]; nothing is
// spawned), a context already done, or a run directory that cannot be
// written. What the worker did, including failing to start, is always a
// Verdict. Read a Verdict in the order its documentation gives.
package pilot
