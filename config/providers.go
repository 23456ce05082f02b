// Package config reads pilot's configuration files: the providers file (over
// the built-in providers of package agents) and the per-provider credential
// files, and chains credential sources.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/size"
)

// DefaultProvidersFile returns the providers file [LoadRegistry] reads when
// given no path: $XDG_CONFIG_HOME/pilot/providers.json, or
// ~/.config/pilot/providers.json when XDG_CONFIG_HOME is unset or not an
// absolute path. It returns "" when neither gives a directory.
func DefaultProvidersFile() string {
	dir := configDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "pilot", "providers.json")
}

// LoadProviders reads a providers file, and only it (see [LoadRegistry] for
// the built-in providers with a file over them):
//
//	{"providers": {
//	  "NAME": {"runner": "command", "argv": ["prog", "{task_file}"],
//	    "model": "m", "credential_env": "NAME_API_KEY", "env": {"K": "V"}},
//	  "local": {"runner": "codex", "model": "my-model",
//	    "base_url": "http://127.0.0.1:8080/v1", "credential_env": "LOCAL_API_KEY",
//	    "memory_limit": "2GiB"}}}
//
// Every error names the file: unknown fields (with the known ones, or the
// right spelling when only the case differs), a provider or field given
// twice, a field of the wrong type, and an invalid provider.
func LoadProviders(path string) (*pilot.Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pilot: reading providers file: %w", err)
	}
	return ParseProviders(bytes.NewReader(data), path)
}

// ParseProviders is [LoadProviders] over a reader; name is used in errors.
func ParseProviders(r io.Reader, name string) (*pilot.Registry, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("pilot: reading providers file %s: %w", name, err)
	}
	fail := func(format string, a ...any) (*pilot.Registry, error) {
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
	ps := make([]pilot.Provider, 0, len(byName.keys))
	for i, key := range byName.keys {
		fields, err := jsonObject(byName.vals[i], "field", providerFields, `{"runner": "command", "argv": [...], ...}`)
		if err != nil {
			return fail("provider %q: %v", key, err)
		}
		if raw, ok := fields.get("memory_limit"); ok {
			var b size.Bytes
			if err := json.Unmarshal(raw, &b); err != nil {
				return fail("provider %q: memory_limit: %v", key, err)
			}
		}
		var p pilot.Provider
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
	reg, err := pilot.NewRegistry(ps...)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, name)
	}
	return reg, nil
}

// providerFields are the JSON keys of Provider, from its struct tags.
var providerFields = func() []string {
	var out []string
	t := reflect.TypeOf(pilot.Provider{})
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
		return o, jsonError(data, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return o, fmt.Errorf("expected a JSON object like %s, got %s", shape, jsonKind(tok))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, jsonError(data, err)
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
			return o, jsonError(data, err)
		}
		o.keys = append(o.keys, key)
		o.vals = append(o.vals, raw)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return o, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return o, errors.New("unexpected data after the JSON object")
	}
	return o, nil
}

func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		line, col := lineColumn(data, syn.Offset, err.Error())
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("invalid JSON: the input ends too early")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// lineColumn is where, 1-based, a JSON syntax error at offset of data
// (msg, its text) stands: the byte before offset, or, when msg names an
// "invalid character" that is not there (json.Decoder's Token counts
// from the token before), the first of that character after it.
func lineColumn(data []byte, offset int64, msg string) (line, col int) {
	at := int(max(min(offset, int64(len(data)))-1, 0))
	if c, ok := strings.CutPrefix(msg, "invalid character '"); ok && len(c) > 1 && c[1] == '\'' && at < len(data) && data[at] != c[0] {
		if i := bytes.IndexByte(data[at:], c[0]); i >= 0 {
			at += i
		}
	}
	before := data[:at]
	return 1 + bytes.Count(before, []byte{'\n'}), at - bytes.LastIndexByte(before, '\n')
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

// LoadRegistry returns the built-in providers ([agents.Providers]) with the
// providers file at path over them: an entry of the file replaces the
// built-in entry of the same name whole, and adds one of a new name.
//
// An empty path means [DefaultProvidersFile], which may be missing (then
// the registry holds the built-ins alone). A path given explicitly must
// exist: a missing one is an error that names it and matches
// fs.ErrNotExist. Errors in the file are [LoadProviders]'s, and name it.
func LoadRegistry(path string) (*pilot.Registry, error) {
	builtin, err := pilot.NewRegistry(agents.Providers()...)
	if err != nil {
		return nil, err // a bug in DefaultProviders
	}
	explicit := path != ""
	if !explicit {
		if path = DefaultProvidersFile(); path == "" {
			return builtin, nil
		}
	}
	file, err := LoadProviders(path)
	switch {
	case err == nil:
		return builtin.With(providersOf(file)...)
	case !explicit && errors.Is(err, fs.ErrNotExist):
		return builtin, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("pilot: providers file %s does not exist: %w", path, os.ErrNotExist)
	}
	return nil, err
}

// providersOf lists the providers of r.
func providersOf(r *pilot.Registry) []pilot.Provider {
	var ps []pilot.Provider
	for _, n := range r.Names() {
		p, _ := r.Lookup(n)
		ps = append(ps, p)
	}
	return ps
}
