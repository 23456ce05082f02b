package agents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/sandbox"
)

// RunnerQwen is the qwen runner's name, as providers files give it.
const RunnerQwen = "qwen"

// qwenProviders are the built-in providers of the qwen runner
// ([Providers]): qwen-code on the user's own settings and login.
var qwenProviders = []pilot.Provider{{Name: "qwen", Runner: RunnerQwen}}

// QwenRunner runs qwen-code (the qwen CLI) headless, one prompt per
// worker, the prompt on stdin:
//
//	qwen --output-format stream-json [--model M] <approval flags>
//	     [--resume ID] [Provider.Args...]
//
// Code, test and resume run with --approval-mode yolo; explore and review
// with --approval-mode plan, in which qwen neither offers nor runs its
// shell, write and edit tools. Its stream is Claude Code's schema (see
// formats-qwen-code.md), so qwenWatcher is claudeWatcher with qwen's
// retry notices, error results and exit codes. README's "The agent CLIs"
// gives isolation (QWEN_HOME), the endpoint, resume and exits.
type QwenRunner struct{}

// Name implements Runner.
func (QwenRunner) Name() string { return RunnerQwen }

// SandboxNeeds tells pilot's sandbox what the CLI needs (see
// pilot.Runner). qwen keeps its settings, login, transcripts and memory in
// ~/.qwen, which QWEN_HOME moves (and QWEN_RUNTIME_DIR the transcripts),
// as it does for an isolated worker, whose dir is in its run directory.
// With no endpoint of the provider's, qwen's default is DashScope's
// OpenAI-compatible API.
func (QwenRunner) SandboxNeeds(p pilot.Provider, home string) sandbox.Needs {
	n := sandbox.Needs{Connect: []string{"dashscope.aliyuncs.com:443"}}
	if hp, ok := endpointOf(p, "OPENAI_BASE_URL"); ok {
		n.Connect = hp
	}
	if !isolated(p) {
		n.Own = []string{userDir(p, home, "QWEN_HOME", ".qwen")}
		if d := p.Env["QWEN_RUNTIME_DIR"]; filepath.IsAbs(d) {
			n.Own = append(n.Own, filepath.Clean(d))
		}
		n.Write = n.Own
	}
	return n
}

// qwenSettings is the settings.json pilot writes in an isolated worker's
// QWEN_HOME: no memory-extraction, dream or skill-review agents after the
// answer (each a model call of its own, which delays the result and hides
// its errors), no usage statistics (a DNS lookup of qwen's telemetry host
// on every run) and no update check.
const qwenSettings = `{
  "memory": {"enableManagedAutoMemory": false, "enableManagedAutoDream": false, "enableAutoSkill": false},
  "privacy": {"usageStatisticsEnabled": false},
  "general": {"enableAutoUpdate": false}
}
`

// Command implements Runner.
func (QwenRunner) Command(_ context.Context, a pilot.Attempt) (*pilot.Command, error) {
	p := a.Provider
	if strings.TrimSpace(a.Prompt) == "" {
		return nil, errors.New("the task text is empty, and qwen fails without a prompt: give the task some text")
	}
	if p.BaseURL != "" && p.Model == "" {
		return nil, fmt.Errorf("provider %q sets base_url but no model: qwen uses an OpenAI-compatible endpoint only with the model id it serves; set \"model\"", p.Name)
	}
	home, err := isolatedDir(a, "qwen-home")
	if err != nil {
		return nil, err
	}
	if home != "" {
		if err := os.WriteFile(filepath.Join(home, "settings.json"), []byte(qwenSettings), 0o600); err != nil {
			return nil, fmt.Errorf("writing the worker's qwen settings: %w", err)
		}
	}
	argv := []string{program(p, RunnerQwen), "--output-format", "stream-json"}
	if p.Model != "" {
		argv = append(argv, "--model", p.Model)
	}
	switch a.Task.Mode {
	case pilot.ModeExplore, pilot.ModeReview:
		argv = append(argv, "--approval-mode", "plan")
	default:
		argv = append(argv, "--approval-mode", "yolo")
	}
	if r := a.Task.Resume; r != "" {
		id, err := qwenResume(a, home, r)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--resume", id)
	}
	argv = append(argv, p.Args...)

	cmd := &pilot.Command{
		Argv:    argv,
		Stdin:   []byte(a.Prompt),
		Watcher: &qwenWatcher{home: home},
	}
	env := map[string]string{"QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"}
	if home != "" {
		env["QWEN_HOME"] = home
		env["QWEN_RUNTIME_DIR"] = home
	}
	if p.BaseURL != "" {
		// qwen picks its OpenAI-compatible auth by itself when the key,
		// the base URL and the model are all in its environment.
		env["OPENAI_BASE_URL"] = p.BaseURL
		env["OPENAI_MODEL"] = p.Model
	}
	cmd.Env = env
	if c := p.CredentialEnv; c != "" && c != "OPENAI_API_KEY" {
		cmd.SecretEnv = []string{"OPENAI_API_KEY"}
	}
	return cmd, nil
}

// qwenResume returns the session id to pass to --resume. resume is the
// earlier verdict's "resume" value: a session id, or the transcript of an
// isolated worker (<QWEN_HOME>/projects/<project>/chats/<id>.jsonl), which
// qwenResume copies into home, this worker's QWEN_HOME, under the same
// project: qwen resumes a session only in the workdir it ran in.
func qwenResume(a pilot.Attempt, home, resume string) (string, error) {
	if !filepath.IsAbs(resume) {
		if err := checkResumeID(resume); err != nil {
			return "", err
		}
		if home != "" {
			return "", fmt.Errorf("provider %q is isolated, so qwen starts with an empty QWEN_HOME and cannot find session %q: resume with the earlier verdict's \"resume\" value, the transcript path pilot reports for an isolated worker", a.Provider.Name, resume)
		}
		return resume, nil
	}
	if home == "" {
		return "", fmt.Errorf("session %s was recorded in an isolated worker's QWEN_HOME, which qwen cannot see from the user's own: resume it with a provider that sets isolated (or base_url)", resume)
	}
	chats := filepath.Dir(resume)
	id := strings.TrimSuffix(filepath.Base(resume), ".jsonl")
	if filepath.Base(chats) != "chats" || !strings.HasSuffix(resume, ".jsonl") || checkResumeID(id) != nil {
		return "", fmt.Errorf("%s does not name a qwen session transcript (<QWEN_HOME>/projects/<project>/chats/<session id>.jsonl)", resume)
	}
	st, err := os.Stat(resume)
	if err != nil {
		return "", fmt.Errorf("reading the transcript of the session to resume: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a qwen session transcript (not a regular file)", resume)
	}
	dst := filepath.Join(home, "projects", filepath.Base(filepath.Dir(chats)), "chats")
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return "", fmt.Errorf("copying the transcript to resume: %w", err)
	}
	if err := copyFile(filepath.Join(dst, id+".jsonl"), resume); err != nil {
		return "", fmt.Errorf("copying the transcript to resume: %w", err)
	}
	return id, nil
}

// qwenSessionGone begins what qwen prints on stderr when the session it
// was asked to resume does not exist.
const qwenSessionGone = "No saved session found"

// qwenWatcher follows one qwen worker's stream-json output: Claude Code's
// schema, read by the embedded claudeWatcher, except for qwen's own retry
// notices (system/retry, with the failed call on stderr), its API errors
// (an assistant text "[API Error: …]" with no usage, then a result with
// error.message) and its session files.
type qwenWatcher struct {
	claudeWatcher
	home string // the worker's isolated QWEN_HOME, or ""
}

// qwenEvent is the part of a qwen line the watcher reads itself.
type qwenEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Data    struct {
		DelayMS *float64 `json:"delayMs"`
	} `json:"data"`
}

// qwenAPIErrorText begins the text qwen gives a failed model call.
const qwenAPIErrorText = "[API Error:"

// Line implements Watcher.
func (w *qwenWatcher) Line(l pilot.Line) {
	if l.Truncated {
		return
	}
	if l.Stream == pilot.Stderr {
		w.noteGone(l.Data, qwenSessionGone)
		w.stderrRetry(string(bytes.TrimSpace(l.Data)))
		return
	}
	data := bytes.TrimSpace(l.Data)
	typ, _ := leadingType(data)
	switch {
	case string(typ) == "system" && bytes.Contains(data, []byte(`"subtype":"retry"`)):
		w.retry(data)
		return
	case string(typ) == "assistant" && bytes.Contains(data, []byte(qwenAPIErrorText)) && qwenSynthetic(data):
		// Not the model's message: the error the result repeats.
		return
	}
	w.claudeWatcher.Line(l)
}

// retry reads a system/retry line: one with delayMs says a retry comes
// after that long (the failed call is named on stderr, where the watcher
// takes the notice from); one without says an attempt starts.
func (w *qwenWatcher) retry(data []byte) {
	var ev qwenEvent
	if !claudeDecode(data, &ev) {
		return
	}
	if d := ev.Data.DelayMS; d != nil && *d > 0 && *d < float64(maxRetryDelay/time.Millisecond) {
		w.quiet(time.Duration(*d * float64(time.Millisecond)))
	} else {
		w.quiet(0)
	}
	if len(w.pending) == 0 {
		w.setPhase(pilot.PhaseAwaitingModel, "stream:system/retry", nil)
	}
}

// qwenRetryLine matches qwen's stderr notice of a scheduled retry:
// "Retrying in 60s (attempt 1/10): [API Error: 429 …]".
var qwenRetryLine = regexp.MustCompile(`^Retrying in ([0-9.]+)(m?s) \(attempt [0-9]+/[0-9]+\): (.+)$`)

// qwenRetryNow begins qwen's stderr notice of an attempt that starts at
// once: after a scheduled retry's wait, or for a cut stream.
const qwenRetryNow = "Retrying provider attempt"

// stderrRetry reads qwen's retry notices, which name the failed call (its
// system/retry lines on stdout do not).
func (w *qwenWatcher) stderrRetry(line string) {
	if m := qwenRetryLine.FindStringSubmatch(line); m != nil {
		w.retrying(RunnerQwen+":stderr", line, qwenAPIError(m[3]))
		if n, err := strconv.ParseFloat(m[1], 64); err == nil && n > 0 {
			unit := time.Second
			if m[2] == "ms" {
				unit = time.Millisecond
			}
			if d := n * float64(unit); d < float64(maxRetryDelay) {
				w.quiet(time.Duration(d))
			}
		}
		return
	}
	if strings.HasPrefix(line, qwenRetryNow) && !w.looping {
		// A cut stream asked for again: a retry whose cause qwen
		// does not name.
		w.retrying(RunnerQwen+":stderr", line, pilot.Classification{})
	}
}

// qwenLine is the part of a qwen line its error checks read.
type qwenLine struct {
	Type    string `json:"type"`
	IsError bool   `json:"is_error"`
	Error   struct {
		Message string `json:"message"`
	} `json:"error"`
	Message struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

// apiError returns the text of an assistant line that is qwen's report of
// an API error rather than a model message: its only block is a text that
// begins "[API Error:".
func (l qwenLine) apiError() (string, bool) {
	if c := l.Message.Content; len(c) == 1 && c[0].Type == "text" && strings.HasPrefix(c[0].Text, qwenAPIErrorText) {
		return c[0].Text, true
	}
	return "", false
}

// qwenSynthetic reports whether an assistant line is qwen's report of an
// API error (qwenLine.apiError).
func qwenSynthetic(data []byte) bool {
	var l qwenLine
	if !claudeDecode(data, &l) {
		return false
	}
	_, ok := l.apiError()
	return ok
}

// qwenExitClass is the class of a qwen exit code that means something by
// itself. qwen keeps gemini-cli's codes (FatalError subclasses): 41
// authentication, 42 input, 44 sandbox, 52 config; 53 (session turn
// limit) and 55 (--max-wall-time, --max-tool-calls) are step caps,
// qwenCapped.
func qwenExitClass(code int) (pilot.FailureClass, bool) {
	switch code {
	case 41:
		return pilot.FailProviderAuth, true
	case 42, 44, 52:
		return pilot.FailSpawn, true
	}
	return "", false
}

// qwenCapped reports whether qwen's exit code says it stopped at the
// caller's limit: 53 (max session turns), 55 (wall time or tool calls).
func qwenCapped(code int) bool { return code == 53 || code == 55 }

// Finish implements Watcher. An API error ends the stream with a result
// of subtype error_during_execution and exit 1; a turn or budget limit
// exits 53 or 55 with no result; SIGTERM ends it with no result either.
func (w *qwenWatcher) Finish(e pilot.Exit) pilot.Result {
	if w.usage == nil && len(w.msgOrder) > 0 {
		u := w.Usage()
		w.usage = &u
	}
	w.resume = w.transcript()
	if ended(e) {
		return w.session(pilot.JudgeExit(e))
	}
	r := w.result
	switch {
	case r == nil && qwenCapped(e.Code):
		return w.session(pilot.Result{Outcome: pilot.StepCappedPartial})
	case r == nil && e.Code != 0:
		if class, ok := qwenExitClass(e.Code); ok && (e.Diagnostic == nil || e.Diagnostic.Evidence == "") {
			return w.session(failed(class, "exit", "qwen exited "+strconv.Itoa(e.Code)))
		}
		return w.session(pilot.JudgeExit(e))
	case r == nil:
		return w.session(incomplete(RunnerQwen, "a result event"))
	case r.IsError || strings.HasPrefix(r.Subtype, "error"):
		// The result's own error decides when it proves a class: its
		// stderr retry notices name the same error, and which of the
		// two streams was read last, the Dispatcher's pick, is timing.
		if c, ok := qwenEventError(w.resultLine); ok {
			e = streamDiagnostic(e, RunnerQwen, c)
		}
		return w.session(reportedFailure(e, RunnerQwen, w.resultLine))
	case strings.TrimSpace(r.Result) == "" && !w.answered:
		return w.session(pilot.Result{Outcome: pilot.Empty})
	}
	return w.session(pilot.Result{Outcome: pilot.Completed})
}

// transcript returns the path of the session's transcript in the worker's
// isolated QWEN_HOME, which is what resuming it needs; "" when the worker
// is not isolated or wrote none.
func (w *qwenWatcher) transcript() string {
	if w.home == "" || !claudeSessionID.MatchString(w.sessionID) {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(w.home, "projects", "*", "chats", w.sessionID+".jsonl"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
			return m
		}
	}
	return ""
}

// Diagnose is pilot.Watcher's optional Diagnose: a stderr line in qwen's
// words or any API's, a result with error.message, and the assistant text
// that carries an API error.
func (w *qwenWatcher) Diagnose(s pilot.Stream, line string) (pilot.Classification, bool) {
	switch s {
	case pilot.Stderr:
		if m := qwenRetryLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			return proved(qwenAPIError(m[3]))
		}
		return ownWords(line, qwenPhrases)
	case pilot.Stdout:
		if t, ok := eventLine(line); ok {
			return qwenEventError(t)
		}
	}
	return pilot.Classification{}, false
}

// qwenPhrases are qwen's own failure texts.
var qwenPhrases = []phrase{
	{word: "no auth type is selected", class: pilot.FailProviderAuth},
	{word: "reached max session turns", class: pilot.FailGeneric},
}

// qwenStatus finds the HTTP status in qwen's "[API Error: 429 …]".
var qwenStatus = regexp.MustCompile(`\[API Error: ([1-5][0-9][0-9])\b`)

// qwenAPIError classifies the text qwen gives a failed model call, with
// the HTTP status it starts with, when it does.
func qwenAPIError(text string) pilot.Classification {
	if c, ok := ownWords(text, qwenPhrases); ok && c.Class != pilot.FailGeneric {
		return c
	}
	status := 0
	if m := qwenStatus.FindStringSubmatch(text); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	return pilot.ClassifyProviderError(text, status)
}

// qwenEventError classifies an error event of qwen's: a result with
// is_error (its error.message) and an assistant "[API Error: …]" text.
func qwenEventError(line string) (pilot.Classification, bool) {
	typ, typed := leadingType(line)
	switch {
	case typed && typ != "result" && typ != "assistant":
		return pilot.Classification{}, false
	case typ == "assistant" && !strings.Contains(line, qwenAPIErrorText):
		return pilot.Classification{}, false
	case typ != "assistant" && !strings.Contains(line, `"is_error"`):
		return pilot.Classification{}, false
	}
	var ev qwenLine
	if !claudeDecode([]byte(line), &ev) {
		return pilot.Classification{}, false
	}
	switch {
	case ev.Type == "result" && ev.IsError && ev.Error.Message != "":
		return proved(qwenAPIError(ev.Error.Message))
	case ev.Type == "assistant":
		if text, ok := ev.apiError(); ok {
			return proved(qwenAPIError(text))
		}
	}
	return pilot.Classification{}, false
}
