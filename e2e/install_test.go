//go:build unix

package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/fakellm"
	"github.com/pilotworkers/pilot/internal/procfs"
)

// installProvider is the provider the installed skill hands work to: a
// command runner whose worker prints a line and exits 0.
const (
	installProvider = "e2e-worker"
	workerSays      = "worker did it"
)

// An installHost is an agent CLI a person works in, run as that person
// would run it headless, against fakellm (the same offline configuration
// the runners give it as a worker; NOTES.md).
type installHost struct {
	cli   string // the host name of pilot install, and the runner of its CLIs in clis (pi: both generations)
	shell string // its shell tool, as it declares it ({"command": ...})
	// configEnv relocates the host's config dir; isolatedEnv sets it.
	configEnv string
	// listed is how the host lists a skill to the model, name and
	// description, in the text of its first request (/tmp/host-formats.md).
	listed func(name, description string) string
	// setup writes the host's config and returns its arguments (the
	// prompt goes on stdin).
	setup func(t *testing.T, env map[string]string, srv *fakellm.Server) []string
}

var installHosts = []installHost{
	{
		cli: "claude", shell: "Bash", configEnv: "CLAUDE_CONFIG_DIR",
		// Claude Code 2.1.332: a role "system" entry of messages[],
		// "The following skills are available ...\n\n- NAME: DESCRIPTION".
		listed: func(name, description string) string { return "- " + name + ": " + description },
		setup: func(t *testing.T, env map[string]string, srv *fakellm.Server) []string {
			env["ANTHROPIC_BASE_URL"] = srv.URL() // claude appends /v1/messages
			env["ANTHROPIC_API_KEY"] = fakeKey
			env["CLAUDE_CODE_MAX_RETRIES"] = "1"
			// The claude runner's code mode: every shell command
			// pre-approved, nobody to ask.
			return []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "fake-model",
				"--allowedTools", "Bash", "--permission-mode", "acceptEdits"}
		},
	},
	{
		cli: "pi", shell: "bash", configEnv: "PI_CODING_AGENT_DIR",
		// pi 0.73.1 and 1.6.0: messages[0] (system), <available_skills>, with the
		// text XML-escaped; only when the read tool is on, as it is by
		// default (checked below: the request must declare it).
		listed: func(name, description string) string {
			return "<name>" + xmlEscape(name) + "</name>\n    <description>" + xmlEscape(description) + "</description>"
		},
		setup: func(t *testing.T, env map[string]string, srv *fakellm.Server) []string {
			// What the pi runner writes for a provider with a base URL;
			// apiKey names the variable pi reads the key from.
			writeFile(t, filepath.Join(env["PI_CODING_AGENT_DIR"], "models.json"),
				`{"providers":{"pilot":{"baseUrl":"`+srv.URL()+`/v1","api":"openai-completions","apiKey":"`+fakeKeyEnv+`","models":[{"id":"fake-model"}]}}}`+"\n")
			env[fakeKeyEnv] = fakeKey
			return []string{"-p", "--mode", "json", "--session", filepath.Join(t.TempDir(), "session.jsonl"),
				"--provider", "pilot", "--model", "fake-model"}
		},
	},
}

// TestInstalledIntegrationReachesTheHostAndDispatches checks pilot install
// end to end in two real hosts, Claude Code and pi: the skill pilot install
// writes reaches the model in the host's first request (its name and
// description, unasked), and a model that follows its instructions, running
// pilot dispatch through the host's own shell tool, gets pilot's verdict of
// the worker back as that tool's result. fakellm plays the model: it
// answers the turn that carries the prompt with the shell tool call and the
// turn that carries the tool result with a final text, by what each request
// holds (Script.Aside); anything else finds the script empty.
func TestInstalledIntegrationReachesTheHostAndDispatches(t *testing.T) {
	t.Parallel()
	pilotBin := buildPilot(t)
	for _, h := range installHosts {
		for _, c := range clisOf(h.cli) {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				runInstalledHost(t, h, c, pilotBin)
			})
		}
	}
}

// buildPilot builds the pilot command (examples/pilot) into a temporary
// directory and returns its path.
func buildPilot(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pilot")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./examples/pilot")
	cmd.Dir = ".." // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/pilot: %v\n%s", err, out)
	}
	return bin
}

func runInstalledHost(t *testing.T, h installHost, c cli, pilotBin string) {
	bin := c.binary(t)
	project := t.TempDir() // no git: dispatch's retry budget lives for the run
	guard := newNetGuard(t)
	env := isolatedEnv(t, guard)
	path := os.Getenv("PATH")
	if p := c.workerPath(t); p != "" {
		path = p // the node this CLI needs, first
	}
	env["PATH"] = filepath.Dir(pilotBin) + string(os.PathListSeparator) + path
	env["PILOT_PROVIDERS_FILE"] = filepath.Join(t.TempDir(), "providers.json")
	writeFile(t, env["PILOT_PROVIDERS_FILE"], `{"providers":{"`+installProvider+`":{"runner":"command","argv":["sh","-c","echo `+workerSays+`"]}}}`+"\n")
	// Every process the host starts carries this, pilot's worker included
	// (it inherits PATH only, but its pilot does carry it): none may
	// outlive the host.
	marker := "PILOT_E2E_HOST_RUN=" + randomHex(t)
	k, v, _ := strings.Cut(marker, "=")
	env[k] = v

	// 1. pilot install PROVIDER on HOST, as a person would run it.
	install := exec.CommandContext(t.Context(), pilotBin, "install", installProvider, "on", h.cli)
	install.Env, install.Dir = environ(env), project
	out, err := install.CombinedOutput()
	if err != nil {
		t.Fatalf("pilot install %s on %s: %v\n%s", installProvider, h.cli, err, out)
	}
	name := "pilot-" + installProvider
	skillPath := filepath.Join(env[h.configEnv], "skills", name, "SKILL.md")
	skill := readFile(t, skillPath)
	if !strings.HasPrefix(skill, "---\nname: "+name+"\n") {
		t.Fatalf("%s does not start with the frontmatter naming %s:\n%s", skillPath, name, skill)
	}
	if _, err := os.Stat(filepath.Join(env["XDG_DATA_HOME"], "pilot", "integrations.json")); err != nil {
		t.Errorf("pilot install recorded nothing in its manifest: %v", err)
	}
	description := skillDescription(t, skill)
	if !strings.Contains(description, `pilot worker "`+installProvider+`"`) {
		t.Errorf("the skill's description %q does not name the worker %q", description, installProvider)
	}

	// 2. What the model does with it: run the skill's own dispatch line
	// through the host's shell tool, with the task in a file of the
	// test's (the skill's /tmp/pilot-task.md would be shared).
	taskFile := filepath.Join(env["TMPDIR"], "pilot-task.md")
	dispatch := skillDispatchLine(t, skill, taskFile)
	command := "printf '%s\\n' 'say hello' > '" + taskFile + "' && " + dispatch
	const prompt = "Hand this task to the pilot worker: say hello"
	const final = "The pilot worker e2e-worker completed the task."
	srv := fakellm.New(fakellm.Script{Aside: func(r fakellm.Request) (fakellm.Step, bool) {
		if !declaresTool(r.Body, h.shell) || !strings.Contains(roleText(r.Body, "user"), prompt) {
			return fakellm.Step{}, false
		}
		switch assistantTurns(r.Body) {
		case 0:
			return fakellm.Tools(fakellm.Bash(h.shell, command)), true
		case 1:
			return fakellm.Text(final), true
		}
		return fakellm.Step{}, false // to the empty script: exhausted, HTTP 500
	}})
	t.Cleanup(srv.Close)
	args := h.setup(t, env, srv)

	// 3. The host, headless, in the project.
	stdout, stderr := &tailBuffer{max: 256 << 10}, &tailBuffer{max: 16 << 10}
	start := time.Now()
	code, err := runHost(t, bin, args, environ(env), project, prompt, stdout, stderr)
	if err != nil {
		t.Fatalf("%s: %v\nstderr: %s", h.cli, err, stderr)
	}
	t.Logf("%s ran in %v, exit %d", h.cli, time.Since(start).Round(time.Millisecond), code)
	if code != 0 {
		t.Errorf("%s exited %d, want 0\nstdout tail: %s\nstderr tail: %s", h.cli, code, stdout, stderr)
	}

	var answered []fakellm.Request
	for _, r := range srv.Requests() {
		switch {
		case r.Aside:
			answered = append(answered, r)
		case r.Exhausted:
			t.Errorf("a model request the script has no answer for: %s %s, %d assistant turns", r.Method, r.Path, assistantTurns(r.Body))
		}
	}
	if len(answered) != 2 {
		t.Fatalf("%d model requests carried the prompt, want 2 (the tool call's turn, the final text's)\nstdout tail: %s\nstderr tail: %s",
			len(answered), stdout, stderr)
	}

	// (a) The first request lists the skill, name and description.
	first := strings.Join(bodyStrings(answered[0].Body), "\n")
	if want := h.listed(name, description); !strings.Contains(first, want) {
		t.Errorf("the first model request does not list the skill as %q", want)
		if i := strings.Index(first, name); i >= 0 {
			t.Logf("where it names %s: %q", name, first[max(0, i-200):min(len(first), i+400)])
		}
	}
	if h.cli == "pi" && !declaresTool(answered[0].Body, "read") {
		t.Errorf("pi's first request declares no read tool: pi lists skills only with it")
	}

	// (b) The second carries the tool's result: the skill's two JSON
	// lines, the verdict completed.
	started, verdict := pilotLines(answered[1].Body)
	switch {
	case verdict == nil:
		t.Fatalf("the second model request carries no worker_runner.verdict line: the host's %s did not run pilot dispatch, or its output did not reach the model\nstdout tail: %s",
			h.shell, stdout)
	case started == nil:
		t.Errorf("the tool result has the verdict but no worker_runner.started line before it")
	case started["run_id"] != verdict["run_id"]:
		t.Errorf("started run %v, verdict run %v: want one run", started["run_id"], verdict["run_id"])
	case started["workdir"] != project:
		// The skill's --workdir "$PWD": the host's shell runs in the project.
		t.Errorf("the worker's workdir %v, want the project the host runs in, %s", started["workdir"], project)
	}
	t.Logf("verdict: %v", verdict)
	if verdict["verdict"] != string(pilot.Completed) || verdict["provider"] != installProvider || verdict["exit_code"] != float64(0) {
		t.Errorf("verdict %v provider %v exit %v, want completed by %s with exit 0", verdict["verdict"], verdict["provider"], verdict["exit_code"], installProvider)
	}
	if record, _ := verdict["record"].(string); record != "" {
		if log := readFile(t, filepath.Join(filepath.Dir(record), "stream.log")); !strings.Contains(log, workerSays) {
			t.Errorf("the worker's stream.log lacks %q: the worker did not run\n%s", workerSays, log)
		}
	} else {
		t.Errorf("the verdict names no record")
	}
	if !strings.Contains(stdout.String(), final) {
		t.Errorf("%s's output lacks the model's final answer %q\nstdout tail: %s", h.cli, final, stdout)
	}

	// Nothing of the run outlives the host, nothing left 127.0.0.1.
	if id, _ := verdict["run_id"].(string); id != "" {
		if left := procfs.WithEnv(pilot.EnvRunID + "=" + id); len(left) > 0 {
			t.Errorf("processes of the worker's run %s still alive: %v", id, left)
		}
	}
	if left := procfs.WithEnv(marker); len(left) > 0 {
		t.Errorf("processes the host started still alive after it exited: %v", left)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if g := guard.escapes(); len(g) > 0 {
		t.Errorf("%s asked beyond 127.0.0.1 (refused by the guard): %q", h.cli, g)
	}
}

// runHost runs the host CLI bin with args in dir, the prompt on stdin, in
// a process group of its own that is killed on the test's deadline and
// swept after it exits. It returns the exit code; err is a failure to
// run it or to wait for it.
func runHost(t *testing.T, bin string, args, env []string, dir, prompt string, stdout, stderr *tailBuffer) (int, error) {
	t.Helper()
	timeout := 3 * time.Minute
	if d, ok := t.Deadline(); ok && time.Until(d)-10*time.Second < timeout {
		timeout = time.Until(d) - 10*time.Second
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin = strings.NewReader(prompt)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	err := cmd.Wait()
	killGroup(cmd.Process.Pid) // the sweep: anything left in its group
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// killGroup sends SIGKILL to process group pgid; a group already gone is
// os.ErrProcessDone.
func killGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// skillDescription is the description in skill's frontmatter, which pilot
// writes as a Go-quoted string.
func skillDescription(t *testing.T, skill string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^description: (".*")$`).FindStringSubmatch(skill)
	if m == nil {
		t.Fatalf("the skill has no quoted description line:\n%s", skill)
	}
	d, err := strconv.Unquote(m[1])
	if err != nil {
		t.Fatalf("the skill's description %s: %v", m[1], err)
	}
	return d
}

// skillDispatchLine is the pilot dispatch command the skill tells the
// model to run, with its task file replaced by taskFile.
func skillDispatchLine(t *testing.T, skill, taskFile string) string {
	t.Helper()
	m := regexp.MustCompile("`(pilot dispatch --provider " + regexp.QuoteMeta(installProvider) + " [^`]*)`").FindStringSubmatch(skill)
	if m == nil {
		t.Fatalf("the skill gives no `pilot dispatch --provider %s ...` command:\n%s", installProvider, skill)
	}
	re := regexp.MustCompile(`--task-file \S+`)
	if !re.MatchString(m[1]) {
		t.Fatalf("the skill's dispatch command %q has no --task-file", m[1])
	}
	return re.ReplaceAllLiteralString(m[1], "--task-file '"+taskFile+"'")
}

// pilotLines finds pilot dispatch's two JSON lines in the strings of a
// request body (a tool result): the last worker_runner.started and
// worker_runner.verdict objects, nil when absent.
func pilotLines(body any) (started, verdict map[string]any) {
	for _, s := range bodyStrings(body) {
		for line := range strings.Lines(s) {
			var v map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(line)), &v) != nil {
				continue
			}
			switch v["type"] {
			case "worker_runner.started":
				started = v
			case "worker_runner.verdict":
				verdict = v
			}
		}
	}
	return started, verdict
}

// bodyStrings returns every string in a decoded JSON body, in order.
func bodyStrings(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// roleText is the text of a request's messages of role (Chat Completions
// and Messages alike: content a string or a list of parts).
func roleText(body any, role string) string {
	msgs, _ := field(body, "messages").([]any)
	var b strings.Builder
	for _, m := range msgs {
		if field(m, "role") == role {
			b.WriteString(strings.Join(bodyStrings(field(m, "content")), "\n"))
			b.WriteString("\n")
		}
	}
	return b.String()
}

// assistantTurns is how many assistant messages a request carries.
func assistantTurns(body any) int {
	msgs, _ := field(body, "messages").([]any)
	n := 0
	for _, m := range msgs {
		if field(m, "role") == "assistant" {
			n++
		}
	}
	return n
}

// declaresTool reports whether a request offers the model the tool name:
// Messages' tools[].name, Chat Completions' tools[].function.name.
func declaresTool(body any, name string) bool {
	tools, _ := field(body, "tools").([]any)
	for _, tool := range tools {
		if field(tool, "name") == name || field(field(tool, "function"), "name") == name {
			return true
		}
	}
	return false
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// environ is env as os/exec wants it.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// A tailBuffer keeps the last max bytes written to it: a bounded copy of
// a process's output for assertions and diagnostics.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
