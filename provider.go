package pilot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

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

// Modes lists every valid mode, in the order the CLI documents them.
var Modes = []Mode{ModeCode, ModeExplore, ModeTest, ModeReview, ModeResume}

// Valid reports whether m is one of [Modes].
func (m Mode) Valid() bool {
	for _, v := range Modes {
		if m == v {
			return true
		}
	}
	return false
}

// A Provider is one named worker configuration: which [Runner] starts it,
// which model it uses and which environment variable holds its credential.
//
// A Provider is a plain value; the zero value is not useful. Pilot has
// built-in providers ([DefaultProviders]); more come from a providers file
// ([LoadProviders], or [LoadRegistry] for the built-ins with a file over
// them) or are built in code and passed to [NewRegistry] or
// [Registry.With].
type Provider struct {
	// Name is the key the provider is known by ("glm", "kimi-k3").
	Name string `json:"-"`

	// Runner names the adapter that builds the worker command
	// ("command" for RunnerCommand).
	Runner string `json:"runner"`

	// Argv is the command line for the command runner, with placeholders
	// (see [CommandRunner]). Other runners ignore it.
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
}

// A Registry holds providers by name. Build one with [NewRegistry],
// [LoadProviders] or [LoadRegistry]; a nil *Registry holds nothing. A Registry is not changed
// after it is built and is safe for concurrent use.
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
	if p.Runner == RunnerCommand && len(p.Argv) == 0 {
		return fmt.Errorf("pilot: provider %q uses the command runner but has no argv: set \"argv\" to the worker's command line", p.Name)
	}
	if p.Runner != RunnerCommand && len(p.Argv) > 0 {
		return fmt.Errorf("pilot: provider %q sets argv, which only the command runner uses (its runner is %q)", p.Name, p.Runner)
	}
	if p.Runner == RunnerCommand && (p.Binary != "" || len(p.Args) > 0 || p.BaseURL != "") {
		return fmt.Errorf("pilot: provider %q uses the command runner, which takes its whole command line from argv: remove binary, args and base_url", p.Name)
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("pilot: provider %q: base_url %q is not an http(s) URL: write it like \"http://127.0.0.1:8080/v1\"", p.Name, p.BaseURL)
		}
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

// LoadProviders reads a providers file, and only it (see [LoadRegistry] for
// the built-in providers with a file over them):
//
//	{"providers": {
//	  "NAME": {"runner": "command", "argv": ["prog", "{task_file}"],
//	    "model": "m", "credential_env": "NAME_API_KEY", "env": {"K": "V"}},
//	  "local": {"runner": "codex", "model": "my-model",
//	    "base_url": "http://127.0.0.1:8080/v1", "credential_env": "LOCAL_API_KEY"}}}
//
// Every error names the file: unknown fields (with the known ones, or the
// right spelling when only the case differs), a provider or field given
// twice, a field of the wrong type, and an invalid provider.
func LoadProviders(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pilot: reading providers file: %w", err)
	}
	return ParseProviders(bytes.NewReader(data), path)
}

// ParseProviders is [LoadProviders] over a reader; name is used in errors.
func ParseProviders(r io.Reader, name string) (*Registry, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("pilot: reading providers file %s: %w", name, err)
	}
	fail := func(format string, a ...any) (*Registry, error) {
		return nil, fmt.Errorf("pilot: providers file %s: %s", name, fmt.Sprintf(format, a...))
	}
	top, err := jsonObject(data, "field", []string{"providers"}, `{"providers": {"NAME": {...}}}`)
	if err != nil {
		return fail("%v", err)
	}
	raw, ok := top.get("providers")
	if !ok || string(raw) == "null" {
		return fail("no \"providers\" object: the file must look like {\"providers\": {\"NAME\": {...}}}")
	}
	byName, err := jsonObject(raw, "provider", nil, `{"NAME": {"runner": ...}}`)
	if err != nil {
		return fail("\"providers\": %v", err)
	}
	ps := make([]Provider, 0, len(byName.keys))
	for i, key := range byName.keys {
		if _, err := jsonObject(byName.vals[i], "field", providerFields, `{"runner": "command", "argv": [...], ...}`); err != nil {
			return fail("provider %q: %v", key, err)
		}
		var p Provider
		if err := json.Unmarshal(byName.vals[i], &p); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				return fail("provider %q: field %q has the wrong type: got JSON %s, want %s", key, typ.Field, typ.Value, typ.Type)
			}
			return fail("provider %q: %v", key, err)
		}
		p.Name = key
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	reg, err := NewRegistry(ps...)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return reg, nil
}

// providerFields are the JSON keys of Provider, from its struct tags.
var providerFields = func() []string {
	var out []string
	t := reflect.TypeOf(Provider{})
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}()

// object is a JSON object's members in file order.
type object struct {
	keys []string
	vals []json.RawMessage
}

func (o object) get(key string) (json.RawMessage, bool) {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// jsonObject reads data, which must be exactly one JSON object, and
// returns its members. A key used twice is an error, and so is a key not
// in allowed (exact case) unless allowed is nil; what names the keys in
// errors ("field", "provider") and shape shows the expected form.
func jsonObject(data []byte, what string, allowed []string, shape string) (object, error) {
	var o object
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	switch {
	case err == io.EOF:
		return o, fmt.Errorf("empty input: expected a JSON object like %s", shape)
	case err != nil:
		return o, jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return o, fmt.Errorf("expected a JSON object like %s, got %s", shape, jsonKind(tok))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, jsonError(err)
		}
		key := tok.(string) // object keys are always strings
		if seen[key] {
			return o, fmt.Errorf("%s %q appears twice", what, key)
		}
		seen[key] = true
		if allowed != nil && !slices.Contains(allowed, key) {
			for _, a := range allowed {
				if strings.EqualFold(a, key) {
					return o, fmt.Errorf("unknown %s %q: did you mean %q?", what, key, a)
				}
			}
			return o, fmt.Errorf("unknown %s %q: remove it or check its spelling (known: %s)", what, key, strings.Join(allowed, ", "))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return o, jsonError(err)
		}
		o.keys = append(o.keys, key)
		o.vals = append(o.vals, raw)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return o, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return o, errors.New("unexpected data after the JSON object")
	}
	return o, nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at byte %d: %v", syn.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: the input ends too early")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return string(v)
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}
