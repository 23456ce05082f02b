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
// at the start ("running") and at the end (the verdict); the first dispatch
// into a run directory closes out, as "abandoned", the records a killed
// pilot left running. The Runner's
// [Watcher] reads every line and judges the attempt.
//
// A cancelled context, the wall-clock Timeout, the IdleTimeout (no output)
// and the MemoryLimit (the resident memory of the whole tree, sampled at
// every Heartbeat; Linux) each end the worker the same way: SIGTERM to
// every process of its tree, the Grace period, then SIGKILL. Their failure
// classes stay distinct. Every verdict says how much memory its tree held
// at its peak.
//
// # Runners, and the packages around this one
//
// This package names no agent CLI. A [Runner] builds one worker's
// [Command] and returns a [Watcher] that judges its output; a Watcher may
// also diagnose lines (which are the worker's own error reports), follow
// its usage and its own retries of a failing model call (the methods its
// doc lists), and be a [PhaseWatcher] (the phase its stream shows, for the
// [StallPolicy]). The zero Dispatcher has the command runner ([NewCommandRunner]),
// which runs any program. The rest is built only on this package's
// exported API, as a third-party runner or orchestrator would be:
//
//   - agents: the runners of pi, codex, Claude Code, opencode,
//     gemini-cli, qwen-code, kilo and copilot (agents.Runners), one file
//     per CLI, and the built-in providers;
//   - pisession: pi's native session file, read into a [SessionState];
//   - config: the providers file over the built-in providers, and
//     credential sources (environment, 0600 files, chains);
//   - retry: retries with budgets and a shared state store, as a
//     [TaskDispatcher] over any other;
//   - worktrees, templates, report: Fanout's git worktrees (New for
//     Fanout.Worktrees; list, diff, remove, prune), task templates, the
//     seed's key=value failure report;
//   - pilottest: a fake agent, a fake TaskDispatcher and the conformance
//     harness the built-in runners pass, for runner authors.
//
// [Fanout] and the retry package take a [TaskDispatcher], so that code
// built on them is tested against a fake that starts no process.
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
// does not retry (the retry package does, when asked). It dispatches on
// Linux and, with the weaker supervision above, on darwin; its pure
// functions ([ClassifyFailure], [StallPolicy]) work everywhere.
//
// # Errors and verdicts
//
// An error from Dispatch means pilot could not do its job: an invalid task
// or configuration, a missing credential ([CredentialError]; nothing is
// spawned), a context already done, or a run directory that cannot be
// written. What the worker did, including failing to start, is always a
// Verdict. Read a Verdict in the order its documentation gives.
package pilot
