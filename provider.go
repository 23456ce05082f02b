package pilot

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pilotworkers/pilot/sandbox"
	"github.com/pilotworkers/pilot/size"
)

// runnerCommand is the name of the command runner, a provider's when it
// names none.
const runnerCommand = "command"

// Mode says what kind of work a task is. The mode does not change how pilot
// supervises the worker; runners use it to pick flags (a read-only sandbox for
// review, say) and fanout uses it for its workdir guards.
type Mode string

// The modes a Task may have.
const (
	ModeCode    Mode = "code"
	ModeExplore Mode = "explore"
	ModeTest    Mode = "test"
	ModeReview  Mode = "review"
	ModeResume  Mode = "resume"
)

// modes lists every valid mode, in the order the CLI documents them.
var modes = []Mode{ModeCode, ModeExplore, ModeTest, ModeReview, ModeResume}

// valid reports whether m is one of the five modes.
func (m Mode) valid() bool {
	for _, v := range modes {
		if m == v {
			return true
		}
	}
	return false
}

// A Provider is one named worker configuration: which [Runner] starts it,
// which model it uses and which environment variable holds its credential.
//
// A Provider is a plain value; the zero value is not useful. The agents
// package has built-in providers (agents.Providers) and the config package
// reads providers files (config.LoadRegistry puts one over the built-ins);
// others are built in code and passed to [NewRegistry] or [Registry.With].
type Provider struct {
	// Name is the key the provider is known by ("glm", "kimi-k3").
	Name string `json:"-"`

	// Runner names the adapter that builds the worker command
	// ("command", or a name in Dispatcher.Runners).
	Runner string `json:"runner"`

	// Argv is the command line for the command runner, with placeholders
	// (see [NewCommandRunner]). Other runners ignore it.
	Argv []string `json:"argv,omitempty"`

	// Model is passed to the runner (and to the {model} placeholder).
	Model string `json:"model,omitempty"`

	// CredentialEnv names the environment variable that holds this
	// provider's secret, such as "ZHIPU_API_KEY": the Dispatcher gets the
	// secret from its CredentialSource (this variable in pilot's
	// environment, or the provider's credential file) and sets this
	// variable, in this provider's workers only. Empty means the provider
	// needs no credential (the CLI uses its own login, say).
	CredentialEnv string `json:"credential_env,omitempty"`

	// Env is extra environment for the worker. It is added after pilot's
	// allowlist and before the credential.
	Env map[string]string `json:"env,omitempty"`

	// Binary is the agent CLI to run: a path, or a name looked up in the
	// worker's PATH. Empty means the runner's own name ("pi", "codex",
	// "claude", "opencode", "gemini"). The command runner takes its
	// program from Argv instead.
	Binary string `json:"binary,omitempty"`
	// Args are extra arguments an agent CLI runner adds to the command
	// line it builds ("--thinking", "high", say).
	Args []string `json:"args,omitempty"`
	// BaseURL is a custom OpenAI- or Anthropic-compatible endpoint for a
	// runner whose CLI accepts one. Pilot writes that CLI's own
	// configuration for it into the worker's isolated config dir, so
	// BaseURL implies Isolated.
	BaseURL string `json:"base_url,omitempty"`
	// Isolated gives every worker its own config dir under its run
	// directory (PI_CODING_AGENT_DIR, CODEX_HOME, CLAUDE_CONFIG_DIR, ...),
	// so concurrent workers never share, and corrupt, one config. Such a
	// worker does not see the user's login state: its credential must
	// come from CredentialEnv.
	Isolated bool `json:"isolated,omitempty"`

	// MemoryLimit bounds the resident memory of each worker's process
	// tree, as Task.MemoryLimit does for a task that sets none; zero
	// means none. In a providers file: "memory_limit": "2GiB".
	MemoryLimit size.Bytes `json:"memory_limit,omitempty"`
	// MaxParallel bounds how many of this provider's workers a fleet (a
	// Fanout, a schedule) runs at once, for an account or a local model
	// server that allows only so many sessions; a job waiting for one of
	// its slots holds none of the fleet's. Zero means no bound beyond the
	// fleet's own. In a providers file: "max_parallel": 2.
	MaxParallel int `json:"max_parallel,omitempty"`

	// Sandbox is how far this provider's workers are confined when the
	// task names no mode (sandbox.Secrets when empty; see package
	// sandbox). A mode named here, or by the task, that the machine
	// cannot enforce fails the dispatch; the default runs unconfined and
	// says so in the record.
	Sandbox sandbox.Mode `json:"sandbox,omitempty"`
	// SandboxAllow lifts the sandbox's guard from these paths (an agent
	// that pushes over ssh needs "~/.ssh"); SandboxWrite adds paths a
	// workspace or strict worker may write; SandboxConnect adds the
	// endpoints ("host:port") a strict worker may connect to: a command
	// provider names its endpoint here. Paths are absolute or start
	// with "~/".
	SandboxAllow   []string `json:"sandbox_allow,omitempty"`
	SandboxWrite   []string `json:"sandbox_write,omitempty"`
	SandboxConnect []string `json:"sandbox_connect,omitempty"`
}

// A Registry holds providers by name. Build one with [NewRegistry] (or the
// config package's LoadRegistry); a nil *Registry holds nothing. A Registry
// is not changed after it is built and is safe for concurrent use.
type Registry struct {
	byName map[string]Provider
}

var providerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// NewRegistry returns a registry holding ps. It reports an error for a
// provider without a name or runner, a name used twice, or a command-runner
// provider without argv.
func NewRegistry(ps ...Provider) (*Registry, error) {
	r := &Registry{byName: make(map[string]Provider, len(ps))}
	for _, p := range ps {
		if err := p.validate(); err != nil {
			return nil, err
		}
		if _, dup := r.byName[p.Name]; dup {
			return nil, fmt.Errorf("pilot: provider %q is defined twice", p.Name)
		}
		r.byName[p.Name] = p.clone()
	}
	return r, nil
}

// With returns a new registry holding r's providers and ps, where a
// provider of ps replaces the one of the same name in r whole (its fields
// are not merged). r is not changed. It reports the errors [NewRegistry]
// does for ps, including a name used twice within ps.
func (r *Registry) With(ps ...Provider) (*Registry, error) {
	over, err := NewRegistry(ps...)
	if err != nil {
		return nil, err
	}
	return r.merge(over), nil
}

// merge returns a registry holding r's providers with over's replacing
// those of the same name.
func (r *Registry) merge(over *Registry) *Registry {
	out := &Registry{byName: map[string]Provider{}}
	for _, reg := range []*Registry{r, over} {
		if reg == nil {
			continue
		}
		for name, p := range reg.byName {
			out.byName[name] = p.clone()
		}
	}
	return out
}

func (p Provider) validate() error {
	if !providerName.MatchString(p.Name) {
		return fmt.Errorf("pilot: provider name %q is not valid: use letters, digits, '.', '_' and '-'", p.Name)
	}
	if p.Runner == "" {
		return fmt.Errorf("pilot: provider %q has no runner: set \"runner\" (for example \"command\")", p.Name)
	}
	if p.Runner == runnerCommand && len(p.Argv) == 0 {
		return fmt.Errorf("pilot: provider %q uses the command runner but has no argv: set \"argv\" to the worker's command line", p.Name)
	}
	if p.Runner != runnerCommand && len(p.Argv) > 0 {
		return fmt.Errorf("pilot: provider %q sets argv, which only the command runner uses (its runner is %q)", p.Name, p.Runner)
	}
	if p.Runner == runnerCommand && (p.Binary != "" || len(p.Args) > 0 || p.BaseURL != "") {
		return fmt.Errorf("pilot: provider %q uses the command runner, which takes its whole command line from argv: remove binary, args and base_url", p.Name)
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("pilot: provider %q: base_url %q is not an http(s) URL: write it like \"http://127.0.0.1:8080/v1\"", p.Name, p.BaseURL)
		}
	}
	if _, err := sandbox.ParseMode(string(p.Sandbox)); err != nil {
		return fmt.Errorf("pilot: provider %q: %v", p.Name, err)
	}
	for _, list := range [][]string{p.SandboxAllow, p.SandboxWrite} {
		for _, path := range list {
			if !strings.HasPrefix(path, "~/") && !filepath.IsAbs(path) {
				return fmt.Errorf("pilot: provider %q: sandbox path %q is relative: write it absolute or from the home directory (\"~/.ssh\")", p.Name, path)
			}
		}
	}
	for _, hp := range p.SandboxConnect {
		host, port, err := net.SplitHostPort(hp)
		if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || host == "" || n == 0 {
			return fmt.Errorf("pilot: provider %q: sandbox_connect %q is not host:port: write it like \"127.0.0.1:8080\"", p.Name, hp)
		}
	}
	if p.MemoryLimit < 0 {
		return fmt.Errorf("pilot: provider %q: memory_limit %d is negative: give a size like \"2GiB\", or leave it out for none", p.Name, int64(p.MemoryLimit))
	}
	if p.MaxParallel < 0 {
		return fmt.Errorf("pilot: provider %q: max_parallel %d is negative: give how many of its workers may run at once, or leave it out for no bound", p.Name, p.MaxParallel)
	}
	if p.CredentialEnv != "" && !envName.MatchString(p.CredentialEnv) {
		return fmt.Errorf("pilot: provider %q: credential_env %q is not an environment variable name", p.Name, p.CredentialEnv)
	}
	for k := range p.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("pilot: provider %q: env key %q is not an environment variable name", p.Name, k)
		}
		if k == p.CredentialEnv {
			return fmt.Errorf("pilot: provider %q: env sets %s, its own credential variable: keep secrets out of the providers file", p.Name, k)
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (p Provider) clone() Provider {
	p.Argv = append([]string(nil), p.Argv...)
	p.Args = append([]string(nil), p.Args...)
	p.SandboxAllow = append([]string(nil), p.SandboxAllow...)
	p.SandboxWrite = append([]string(nil), p.SandboxWrite...)
	p.SandboxConnect = append([]string(nil), p.SandboxConnect...)
	if p.Env != nil {
		env := make(map[string]string, len(p.Env))
		for k, v := range p.Env {
			env[k] = v
		}
		p.Env = env
	}
	return p
}

// Lookup returns the provider called name.
func (r *Registry) Lookup(name string) (Provider, bool) {
	if r == nil {
		return Provider{}, false
	}
	p, ok := r.byName[name]
	if !ok {
		return Provider{}, false
	}
	return p.clone(), true
}

// Names returns the provider names in sorted order.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// credentialEnvs returns the credential variable of every provider but
// except.
func (r *Registry) credentialEnvs(except string) map[string]bool {
	out := map[string]bool{}
	if r == nil {
		return out
	}
	for _, p := range r.byName {
		if p.CredentialEnv != "" && p.CredentialEnv != except {
			out[p.CredentialEnv] = true
		}
	}
	return out
}

// withCredential returns every provider but except that has a
// CredentialEnv, in no particular order.
func (r *Registry) withCredential(except string) []Provider {
	if r == nil {
		return nil
	}
	var out []Provider
	for name, p := range r.byName {
		if p.CredentialEnv != "" && name != except {
			out = append(out, p.clone())
		}
	}
	return out
}
