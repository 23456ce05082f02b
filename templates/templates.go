// Package templates holds task-file templates, one per kind of work.
package templates

import (
	"fmt"
	"strings"

	"github.com/pilotworkers/pilot"
)

// For returns the task-file template for mode m: what a good
// bounded task for that kind of work says, as Markdown with <placeholders>
// to fill in. Every template states the goal, the scope, the constraints
// (read-only for explore and review), when the task is done, and what the
// worker must report back; the review template also fixes the verdict
// format.
//
// There are templates for code, explore, test and review. ModeResume has
// none (a resume task continues an earlier session; its task is what is
// left to do), and it, like an unknown mode, is an error that lists the
// modes that have one.
func For(m pilot.Mode) (string, error) {
	for _, t := range taskTemplates {
		if t.mode == m {
			return t.text, nil
		}
	}
	var modes []string
	for _, t := range taskTemplates {
		modes = append(modes, string(t.mode))
	}
	if m == pilot.ModeResume {
		return "", fmt.Errorf("pilot: there is no task template for mode resume: a resume task continues an earlier session, so write only what is left to do; templates exist for %s", strings.Join(modes, ", "))
	}
	return "", fmt.Errorf("pilot: unknown mode %q for a task template: want one of %s", m, strings.Join(modes, ", "))
}

var taskTemplates = []struct {
	mode pilot.Mode
	text string
}{
	{pilot.ModeCode, codeTemplate},
	{pilot.ModeExplore, exploreTemplate},
	{pilot.ModeTest, testTemplate},
	{pilot.ModeReview, reviewTemplate},
}

const codeTemplate = `# Task: <one line: the change to make>

Mode: code. You may edit files in the working directory and run commands
there. One task, one outcome: if the goal turns out to need more than the
scope below, stop and report instead of widening it.

## Goal
<What must be true when you are done, in one or two sentences.>

## Context
<Why the change is needed, and what you cannot learn by reading the code:
the issue, a design decision, an earlier attempt and why it failed.>

## Scope
Read first:
- <path/to/the/code/in/question>
- <path/to/an/example/to/follow>

You may change:
- <path/to/file>
- <path/to/file_test>

Do not touch:
- <public APIs, generated files, dependencies, CI, anything not listed above>

## Constraints
- Keep the change as small as the goal allows; no unrelated refactoring.
- Follow the code's existing style; run the formatter on what you changed.
- Add no dependencies and change no public interface unless the goal says so.
- Do not commit, push, or rewrite history unless this task says so.
- <anything else: performance budget, compatibility, secrets to keep out>

## Done when
- [ ] <a check anyone can run, e.g. "go test ./pkg/... passes">
- [ ] <the new behaviour has a test that fails without the change>
- [ ] <vet / lint / format command> reports nothing

## Report back
End with this report:
1. Status: done, partial or blocked, and why.
2. Files changed, one line each on what changed.
3. Each check you ran and its result (pass/fail counts, exit status).
4. Assumptions you made, anything you were unsure of, and follow-ups you
   left undone.
`

const exploreTemplate = `# Question: <one line: what you need to know>

Mode: explore. Read-only: read files and run commands that change nothing
(search, list, git log/show/blame). Do not edit, create or delete files,
install anything, or commit. Answer the questions; do not fix what you find.

## Questions to answer
1. <a precise question, e.g. "Where is X validated, and what happens when it
   is empty?">
2. <...>

## Where to look
- <paths, packages, documents to start from>
- <names to search for: functions, error messages, config keys>

## Constraints
- Stop when the questions are answered; say what you did not look at.
- Back every claim with evidence: path:line and the line itself, or a
  command and its output.
- <time or scope limit, e.g. "only the server package">

## Done when
Every question has an answer with evidence, or says what could not be
determined and what would settle it.

## Report back
For each question:
- Answer: one or two sentences.
- Evidence: path:line (quoted) or command output.
- Confidence: confirmed, likely or unknown.
Then: anything surprising, and the tasks you would do next.
`

const testTemplate = `# Test: <one line: what is being checked>

Mode: test. Run the checks below and report what they show. You may create
scratch files under a temporary directory; do not change the code or the
tests to make them pass.

## What to run
<In this order, from the working directory:>
1. <command, e.g. go test -count=1 ./...>
2. <command>

Setup: <environment variables, services to start, data to prepare>
Limit: <the longest one command may take>

## What passing looks like
- <e.g. every command exits 0 and prints no FAIL line>
- <known skips or flaky tests, and how to recognise them>

## On failure
- Run a failing test once more on its own to tell a flake from a failure.
- Keep the first error and the output around it; trim long logs to the
  part that shows the failure.
- <allowed fixes, if any, e.g. "none: report only">

## Done when
Every command above has run (or you say why it could not), and every
failure is described.

## Report back
1. Per command: pass, fail or could not run, with its exit status and the
   pass/fail/skip counts.
2. Per failure: the test's name, the error message, the path:line it points
   at, and whether it failed again on its own.
3. Facts about the environment that matter (tool versions, missing
   services).
`

const reviewTemplate = `# Review: <one line: the change under review>

Mode: review. Read-only: read the change and the code around it, and run
commands that change nothing (tests included, if they write nowhere but a
temporary directory). Do not edit files or commit.

## What to review
- Change: <e.g. git diff main...my-branch, or the commits or files below>
- Files: <paths>
- Intent: <what the change is meant to do, and the task or issue it
  answers>

## Focus
- Correctness: does it do what the intent says, including edge cases and
  error paths?
- Tests: do they cover the new behaviour, and would they fail without the
  change?
- <specific concerns: concurrency, secrets, compatibility, performance>
Out of scope: <formatting the formatter handles, code the change does not
touch>

## Done when
Every file of the change has been read and every focus point answered.

## Verdict format
Start your final answer with exactly one line:

VERDICT: approve | approve-with-nits | request-changes | blocked

(blocked: you could not review it; say why.) Then the findings, most severe
first, one per line:

- [blocker|major|minor|nit] path:line: the problem, why it matters, and the
  fix you suggest.

End with what you checked and found sound, and what you could not check.
`
