package pilot

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// NewCommandRunner returns the command runner ("command"), which runs any
// command line from the provider's Argv. Each
// argument may contain these placeholders, replaced for every attempt:
//
//	{task_file}     a file holding the task text
//	{prompt}        the task text itself
//	{workdir}       the absolute working directory
//	{model}         Provider.Model
//	{mode}          Task.Mode
//	{run_dir}       the attempt's run directory
//	{run_id}        the attempt's run id
//	{session_path}  a path under the run directory for a native session
//	{resume}        Task.Resume, the session to continue
//
// A task with Resume set needs a {resume} somewhere in Argv: without one,
// the command could not continue the session, and the runner refuses it.
//
// Its outcome comes from the exit status alone ([JudgeExit]): exit 0
// with output on stdout is completed, exit 0 with no stdout is empty, and
// anything else is an error.
//
// The command may keep a native session file at {session_path}: pilot
// watches it for activity, and when readSession is given (the agents package
// sets it to read pi's format), for the worker's phase and the stall policy.
func NewCommandRunner(readSession func(path string) func() (SessionState, error)) Runner {
	return commandRunner{readSession}
}

// commandRunner is NewCommandRunner's runner; the Dispatcher has one with
// no session reader.
type commandRunner struct {
	readSession func(path string) func() (SessionState, error)
}

func (commandRunner) Name() string { return runnerCommand }

func (c commandRunner) Command(_ context.Context, a Attempt) (*Command, error) {
	if len(a.Provider.Argv) == 0 {
		return nil, fmt.Errorf("pilot: provider %q has no argv for the command runner", a.Provider.Name)
	}
	if a.Task.Resume != "" && !slices.ContainsFunc(a.Provider.Argv, func(s string) bool { return strings.Contains(s, "{resume}") }) {
		return nil, fmt.Errorf("pilot: provider %q cannot resume a session: its argv has no {resume} placeholder", a.Provider.Name)
	}
	// The replacer is built only for an argv with a placeholder: building
	// it costs more than the rest of the command.
	var r *strings.Replacer
	argv := make([]string, len(a.Provider.Argv))
	for i, arg := range a.Provider.Argv {
		argv[i] = arg
		if strings.IndexByte(arg, '{') < 0 {
			continue
		}
		if r == nil {
			r = strings.NewReplacer(
				"{task_file}", a.TaskFile,
				"{prompt}", a.Prompt,
				"{workdir}", a.Workdir,
				"{model}", a.Provider.Model,
				"{mode}", string(a.Task.Mode),
				"{run_dir}", a.RunDir,
				"{run_id}", a.RunID,
				"{session_path}", a.SessionPath,
				"{resume}", a.Task.Resume,
			)
		}
		argv[i] = r.Replace(arg)
	}
	// A command that writes a session at {session_path} (a wrapper around
	// pi, say) gets phase tracking and the stall policy when readSession
	// knows its format; one that does not stays "starting", which is only
	// ever inspected.
	cmd := &Command{Argv: argv, Watcher: exitCodeWatcher{}, SessionPath: a.SessionPath}
	if c.readSession != nil {
		cmd.ReadSession = c.readSession(a.SessionPath)
	}
	return cmd, nil
}
