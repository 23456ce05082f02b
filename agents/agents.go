// Package agents adapts pi, codex, Claude Code, opencode, gemini-cli,
// qwen-code, kilo and GitHub's Copilot CLI to pilot: one file per CLI
// holds all pilot knows of it (its command line per mode, its event
// stream, its error events and the failure classes they prove, exit
// codes, retries and "session gone" signs, isolation, config files and
// sandbox paths). Runners gives them to a Dispatcher; Providers
// are the built-in providers.
//
// Adding a CLI is one file and one line:
//
//  1. a Runner type whose Command builds the argv, env and Watcher of one
//     attempt (and SandboxNeeds, when the CLI keeps files or connects);
//  2. its Watcher: Line follows the stream (embed streamWatch for phase,
//     session, usage and retries), Finish judges the run, and Diagnose
//     classifies the CLI's error lines, its own words first, then
//     [pilot.ClassifyFailure] for what every API says;
//  3. the runner in Runners() (and its built-in providers, if any, in
//     Providers()), and a row in the README's table;
//  4. its recorded streams under testdata/<name>/stream and a row of the
//     e2e table, run against the fake LLM server.
package agents

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/text"
	"github.com/pilotworkers/pilot/pisession"
)

// Runners returns one of each of pilot's runners for a Dispatcher's
// Runners field: the agent CLI adapters, and the command runner reading
// pi-format session files at {session_path}:
//
//	d := &pilot.Dispatcher{Providers: reg, Runners: agents.Runners()}
func Runners() []pilot.Runner {
	return []pilot.Runner{
		pilot.NewCommandRunner(ReadPiSession),
		PiRunner{}, CodexRunner{}, ClaudeRunner{}, OpencodeRunner{}, GeminiRunner{}, QwenRunner{}, KiloRunner{}, CopilotRunner{},
	}
}

// Classifier returns how a dispatch with runner r classifies one line of
// its worker's output: its watcher's Diagnose, else (a watcher without
// one) [pilot.ClassifyFailure] on stderr. The watcher is that of an
// attempt no worker runs, in a directory removed before it returns; what
// `pilot classify` and tests of a runner's failure classes read lines with.
func Classifier(r pilot.Runner) (func(pilot.Stream, string) (pilot.Classification, bool), error) {
	dir, err := os.MkdirTemp("", "pilot-classify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := pilot.Provider{Name: r.Name(), Runner: r.Name()}
	if p.Runner == "command" {
		p.Argv = []string{"true"} // never run: only its watcher is asked
	}
	cmd, err := r.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Provider: p.Name, Mode: pilot.ModeReview, Prompt: "classify", Workdir: dir},
		Provider: p, RunID: "classify", RunDir: dir, Prompt: "classify", Workdir: dir,
		TaskFile: filepath.Join(dir, "task.md"), SessionPath: filepath.Join(dir, "session"),
	})
	if err != nil {
		return nil, err
	}
	if d, ok := cmd.Watcher.(interface {
		Diagnose(pilot.Stream, string) (pilot.Classification, bool)
	}); ok {
		return d.Diagnose, nil
	}
	return func(s pilot.Stream, line string) (pilot.Classification, bool) {
		if s != pilot.Stderr {
			return pilot.Classification{}, false
		}
		c := pilot.ClassifyFailure(line)
		return c, c.Evidence != ""
	}, nil
}

// ReadPiSession returns a reader of the pi session file at path, for
// [pilot.Command].ReadSession: each call reads what was appended since the
// last one ([pisession.Tail]).
func ReadPiSession(path string) func() (pilot.SessionState, error) {
	return (&pisession.Tail{Path: path}).Update
}

// program is the CLI an agent runner starts for p: p.Binary, or the
// runner's own name looked up in PATH.
func program(p pilot.Provider, name string) string {
	if p.Binary != "" {
		return p.Binary
	}
	return name
}

// isolatedDir returns the worker's own config directory for a runner,
// <RunDir>/<name>, created with mode 0700, when the provider asks for
// isolation (Isolated, or a BaseURL whose config pilot writes); "" when it
// does not.
func isolatedDir(a pilot.Attempt, name string) (string, error) {
	if !a.Provider.Isolated && a.Provider.BaseURL == "" {
		return "", nil
	}
	dir := filepath.Join(a.RunDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the worker's config dir: %w", err)
	}
	return dir, nil
}

// isolated reports whether a worker of p gets its own config dirs in its
// run directory (isolatedDir), which the sandbox lets it write: its CLI
// then keeps nothing of its own under HOME.
func isolated(p pilot.Provider) bool { return p.Isolated || p.BaseURL != "" }

// userDir is a CLI's dir that the variable name of p's env moves (an
// absolute path), else rel beneath home.
func userDir(p pilot.Provider, home, name, rel string) string {
	if v := p.Env[name]; filepath.IsAbs(v) {
		return filepath.Clean(v)
	}
	return filepath.Join(home, rel)
}

// endpointOf returns the host:port a base URL in the variable name of p's
// env names (a CLI's own setting for its endpoint), and whether it does.
func endpointOf(p pilot.Provider, name string) ([]string, bool) {
	u, err := url.Parse(p.Env[name])
	if err != nil || u.Hostname() == "" {
		return nil, false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port == "" {
		return nil, false
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}, true
}

// streamWatch is the state every agent CLI watcher keeps: the phase its
// stream shows, a retry's due time, the session id and the usage. Embedded
// in a watcher, it provides PhaseWatcher's StreamState.
type streamWatch struct {
	state      pilot.SessionState
	seen       bool
	quietUntil time.Time
	sessionID  string
	resume     string
	usage      *pilot.Usage
	loop       pilot.RetryLoop
	looping    bool
	gone       string   // the CLI's line saying the session to resume is gone
	ids        []string // state.PendingToolCallIDs' buffer
	// passed holds the phases the stream left since the last
	// PassedStates (at most maxPassed, the latest), so that a phase
	// shorter than pilot's heartbeat is still told.
	passed []pilot.SessionState
}

// maxPassed bounds the phases a stream keeps between two heartbeats.
const maxPassed = 16

// retrying records a retry notice: the worker's model call failed as c
// says and the worker calls again. notice is the notice as the worker
// printed it (the evidence), src where ("<runner>:stdout").
func (s *streamWatch) retrying(src, notice string, c pilot.Classification) {
	if !s.looping {
		s.loop = pilot.RetryLoop{Since: time.Now()}
		s.looping = true
	}
	if c.Evidence == "" {
		c = pilot.Classification{Class: pilot.FailGeneric} // the notice names no class
	}
	c.Evidence = clip(notice, 2000)
	c.Source = src
	s.loop.Diagnostic = c
	s.loop.Retries++
}

// retryOver records that the model answered (or the worker settled its
// retries itself): a retry loop, if any, is over.
func (s *streamWatch) retryOver() {
	if s.looping { // else the loop is already the zero value
		s.loop, s.looping = pilot.RetryLoop{}, false
	}
}

// RetryLoop is pilot.Watcher's optional RetryLoop.
func (s *streamWatch) RetryLoop() (pilot.RetryLoop, bool) { return s.loop, s.looping }

// setPhase records the phase the stream shows now. pending lists the tool
// calls still open (nil for none).
func (s *streamWatch) setPhase(p pilot.SessionPhase, reason string, pending []string) {
	if s.seen && s.state.Phase != p {
		// The phase it leaves, with its own copy of the ids (the
		// buffer is overwritten below).
		left := s.state
		left.PendingToolCallIDs = slices.Clone(s.state.PendingToolCallIDs)
		if len(s.passed) == maxPassed {
			s.passed = append(s.passed[:0], s.passed[1:]...)
		}
		s.passed = append(s.passed, left)
	}
	// The ids are copied into a buffer kept from call to call
	// (StreamState hands out copies); pending may be that buffer.
	s.ids = append(s.ids[:0], pending...)
	var ids []string
	if len(s.ids) > 0 {
		ids = s.ids
	}
	// The state's other fields stay zero: the three are assigned alone,
	// which costs a watcher's every line less than a whole new struct.
	s.state.Phase, s.state.Reason, s.state.PendingToolCallIDs = p, reason, ids
	s.seen = true
}

// quiet records that the worker announced a retry in d: silence until then
// is expected. A zero or negative d clears it.
func (s *streamWatch) quiet(d time.Duration) {
	if d <= 0 {
		s.quietUntil = time.Time{}
		return
	}
	s.quietUntil = time.Now().Add(d)
}

// PassedStates returns the phases the stream left since the last call, in
// order (pilot's optional method of a PhaseWatcher).
func (s *streamWatch) PassedStates() []pilot.SessionState {
	ps := s.passed
	s.passed = nil
	return ps
}

// StreamState implements PhaseWatcher.
func (s *streamWatch) StreamState() (pilot.SessionState, time.Time, bool) {
	st := s.state
	st.PendingToolCallIDs = append([]string(nil), st.PendingToolCallIDs...)
	return st, s.quietUntil, s.seen
}

// Usage is the usage the stream has reported so far (pilot.Watcher's optional Usage, for
// the watchers whose streams report it as they go).
func (s *streamWatch) Usage() pilot.Usage {
	if s.usage == nil {
		return pilot.Usage{}
	}
	u := *s.usage
	if u.CostUSD != nil {
		c := *u.CostUSD
		u.CostUSD = &c
	}
	return u
}

// session adds what the stream said about the session to r.
func (s *streamWatch) session(r pilot.Result) pilot.Result {
	r.SessionID, r.Resume, r.SessionGone = s.sessionID, s.resume, s.gone
	if s.usage != nil {
		u := *s.usage
		r.Usage = &u
	}
	return r
}

// ended reports whether the exit alone decides the verdict, whatever the
// stream said: the worker never started, pilot ended it, or it died from a
// signal (or a 128+N exit code, 129 to 159, as pilot reads them).
func ended(e pilot.Exit) bool {
	inferred := e.Code >= 129 && e.Code <= 159
	return !e.Started || e.Terminated || e.Signal != 0 || inferred
}

// streamDiagnostic returns e with c, the failure the error that the CLI's
// own stream ended with (on stdout) proves, when it proves one. It
// comes before the Dispatcher's pick among all the run's lines, which may
// be an earlier error the CLI retried, or the same error on stderr read a
// moment later.
func streamDiagnostic(e pilot.Exit, runner string, c pilot.Classification) pilot.Exit {
	if c.Evidence != "" {
		c.Source = runner + ":stdout"
		e.Diagnostic = &c
	}
	return e
}

// maxDiagnosticText is the longest text a watcher classifies: an error
// message, not a model's answer.
const maxDiagnosticText = 64 << 10

// proved returns c and whether it proves a class (has evidence).
func proved(c pilot.Classification) (pilot.Classification, bool) {
	return c, c.Evidence != ""
}

// classified is the failure a CLI's own words prove by themselves: class,
// with text as the evidence and note as the runner's gloss.
func classified(class pilot.FailureClass, text, note string) pilot.Classification {
	c := pilot.Classification{Class: class, Evidence: text, Note: note}
	switch class {
	case pilot.FailProviderConnection, pilot.FailProviderStreamDisconnect, pilot.FailProviderServerError, pilot.FailProviderRateLimit:
		c.TransportConfirmed = true
	}
	return c
}

// ownWords classifies text with a CLI's own phrases and the APIs' words
// ([pilot.ClassifyFailure]): a phrase's class decides, unless it proves
// only generic-error; then the stronger wins ([pilot.Strongest]).
func ownWords(s string, phrases []phrase) (pilot.Classification, bool) {
	if len(s) > maxDiagnosticText || strings.TrimSpace(s) == "" {
		return pilot.Classification{}, false
	}
	own := pilot.Classification{}
	for rest := s; rest != ""; {
		line, tail, _ := strings.Cut(rest, "\n")
		line, rest = strings.TrimSuffix(line, "\r"), tail
		m := text.Matching(line)
		for _, p := range phrases {
			if strings.Contains(m, p.word) && (p.re == nil || p.re.MatchString(m)) {
				own = pilot.Strongest(own, p.classify(line))
				break
			}
		}
	}
	if own.Evidence != "" && own.Class != pilot.FailGeneric {
		return own, true // the CLI's own words decide
	}
	return proved(pilot.Strongest(pilot.ClassifyFailure(s), own))
}

// A phrase is a CLI's own words for a failure: a line whose matching copy
// (text.Matching) holds word, and matches re when set, proves class; with
// no class, the line is a failed model call's error, whose class
// [pilot.ClassifyProviderError] reads.
type phrase struct {
	word  string
	re    *regexp.Regexp
	class pilot.FailureClass
}

func (p phrase) classify(line string) pilot.Classification {
	if p.class == "" {
		return pilot.ClassifyProviderError(line, 0)
	}
	return classified(p.class, line, "")
}

// reportedFailure is the Result for a worker whose own stream reported a
// failure (line, from the runner's stdout): the class of the diagnostic
// pilot extracted from the stream when there is one, else generic-error
// with the event as evidence.
func reportedFailure(e pilot.Exit, runner, line string) pilot.Result {
	if d := e.Diagnostic; d != nil && d.Evidence != "" {
		// What the diagnostic proves, as pilot judges a failed exit.
		return pilot.JudgeExit(pilot.Exit{Started: true, Code: 1, Diagnostic: d})
	}
	return failed(pilot.FailGeneric, runner+":stdout", clip(line, 2000))
}

// incomplete is the Result for a worker that exited 0 without the terminal
// event its stream always ends with.
func incomplete(runner, missing string) pilot.Result {
	return failed(pilot.FailIncomplete, runner+":stdout", runner+" exited 0 without "+missing)
}

// failed is the Result of a worker whose own stream (or exit) shows it
// failed in class, with evidence from source.
func failed(class pilot.FailureClass, source, evidence string) pilot.Result {
	return pilot.Result{Outcome: pilot.Failed, Classification: pilot.Classification{
		Class: class, Source: source, Evidence: evidence}}
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// resumeFromStore splits a resume value of the form <store>/<session id>,
// which an isolated worker's verdict gives (its session store lives in its
// run directory), into the store and the id. A bare session id is not
// such a value.
func resumeFromStore(resume string) (store, id string, ok bool) {
	if !filepath.IsAbs(resume) {
		return "", "", false
	}
	store, id = filepath.Split(filepath.Clean(resume))
	if id == "" {
		return "", "", false
	}
	return filepath.Clean(store), id, true
}

// checkResumeID refuses a session id that the CLI would read as a flag.
func checkResumeID(id string) error {
	if id == "" || strings.HasPrefix(id, "-") || strings.ContainsAny(id, "\x00\n") {
		return fmt.Errorf("%q is not a session id: resume with the \"resume\" value of the earlier run's verdict", id)
	}
	return nil
}

// isJSONObjectLine reports whether b looks like a JSON object (after spaces), so
// plain-text lines are skipped without a decode.
func isJSONObjectLine(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// copyFile copies the file src to dst, created or truncated with mode 0600:
// a session or transcript carried into a new worker's isolated config dir.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// maxRetryDelay is the longest announced retry delay taken at its word.
const maxRetryDelay = 366 * 24 * time.Hour

// noteGone records, once, the line in data that says the session the
// worker was asked to resume does not exist: from marker, as the CLI
// prints it, to the end of its line or of the JSON string that holds it.
func (s *streamWatch) noteGone(data []byte, marker string) {
	if s.gone != "" {
		return
	}
	if i := bytes.Index(data, []byte(marker)); i >= 0 {
		line := data[i:]
		if j := bytes.IndexAny(line, "\r\n\"}"); j >= 0 {
			line = line[:j]
		}
		s.gone = string(line)
	}
}
