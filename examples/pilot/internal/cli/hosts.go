package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
	"time"

	_ "embed"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/config"
)

// A host is an agent CLI a person works in, which can hand work to a
// pilot provider once pilot writes its integration: files in the host's
// own formats, in the host's config dir (user scope) or a project's.
//
// Every host (Claude Code 2.1, codex 0.171, opencode 1.18, gemini-cli
// 0.61, pi 0.73) loads a skill, <dir>/skills/<name>/SKILL.md with a
// name and a description in its frontmatter, and lists its name and
// description to the model in every request, without the user asking;
// a person can also invoke it (/pilot-glm in Claude Code and opencode,
// $pilot-glm in codex, /skill:pilot-glm in pi). gemini -p expands only
// TOML commands, so gemini gets one too (/pilot:glm).
type host struct {
	Name    string
	Program string // the CLI on PATH
	// Env is the variable that relocates the host's config dir.
	Env string
	// userDir is the config dir of user scope; projectSub the config dir
	// under a project of project scope ("" when the host has none).
	userDir    func() (string, error)
	projectSub string
	// files are the integration files for a provider, relative to the
	// config dir, and their templates.
	files func(provider string) []hostFile
}

type hostFile struct {
	Rel      string
	Template string // the name of a template in hostTemplates
}

//go:embed hosttemplates.txt
var hostTemplatesText string

var hostTemplates = template.Must(template.New("hosts").Parse(hostTemplatesText))

func homeDir() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory: %w (set HOME)", err)
	}
	return h, nil
}

// envOr is $env, else home/rel.
func envOr(env string, rel ...string) func() (string, error) {
	return func() (string, error) {
		if d := os.Getenv(env); d != "" {
			return d, nil
		}
		h, err := homeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(append([]string{h}, rel...)...), nil
	}
}

// skillName is the name of provider p's integration in every host.
func skillName(provider string) string { return "pilot-" + provider }

// hosts are the hosts pilot knows, by name.
func hosts() map[string]host {
	xdg := func() (string, error) {
		if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
			return filepath.Join(d, "opencode"), nil
		}
		h, err := homeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(h, ".config", "opencode"), nil
	}
	gemini := func() (string, error) {
		if d := os.Getenv("GEMINI_CLI_HOME"); d != "" {
			return filepath.Join(d, ".gemini"), nil
		}
		h, err := homeDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(h, ".gemini"), nil
	}
	skill := func(p string) []hostFile {
		return []hostFile{{Rel: filepath.Join("skills", skillName(p), "SKILL.md"), Template: "skill"}}
	}
	return map[string]host{
		"claude": {Name: "claude", Program: "claude", Env: "CLAUDE_CONFIG_DIR", userDir: envOr("CLAUDE_CONFIG_DIR", ".claude"), projectSub: ".claude", files: skill},
		// codex reads a project's skills from .agents/skills.
		"codex":    {Name: "codex", Program: "codex", Env: "CODEX_HOME", userDir: envOr("CODEX_HOME", ".codex"), projectSub: ".agents", files: skill},
		"opencode": {Name: "opencode", Program: "opencode", Env: "XDG_CONFIG_HOME", userDir: xdg, projectSub: ".opencode", files: skill},
		// gemini -p runs only a TOML command explicitly (/pilot:PROVIDER),
		// not a skill: both.
		"gemini": {Name: "gemini", Program: "gemini", Env: "GEMINI_CLI_HOME", userDir: gemini, projectSub: ".gemini",
			files: func(p string) []hostFile {
				return append(skill(p), hostFile{Rel: filepath.Join("commands", "pilot", p+".toml"), Template: "gemini-command"})
			}},
		"pi": {Name: "pi", Program: "pi", Env: "PI_CODING_AGENT_DIR", userDir: envOr("PI_CODING_AGENT_DIR", ".pi", "agent"), projectSub: ".pi", files: skill},
	}
}

func hostNames() []string {
	var names []string
	for n := range hosts() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// integrationData is what an integration's template is filled with.
type integrationData struct {
	Name        string // the integration's name: pilot-<provider>
	Provider    string
	Runner      string
	Model       string
	Description string
	Pilot       string // how to run pilot
	Host        string
}

func describe(p pilot.Provider) string {
	what := p.Runner
	if p.Model != "" {
		what += " " + p.Model
	}
	return fmt.Sprintf("Hand a bounded coding task (implement, explore, test or review) to the pilot worker %q (%s) and get back its verdict with evidence. Use for self-contained work that can run in the background.", p.Name, what)
}

// render fills f's template for provider p on host h.
func render(h host, f hostFile, p pilot.Provider) ([]byte, error) {
	d := integrationData{Name: skillName(p.Name), Provider: p.Name, Runner: p.Runner, Model: p.Model,
		Description: describe(p), Pilot: "pilot", Host: h.Name}
	var b bytes.Buffer
	if err := hostTemplates.ExecuteTemplate(&b, f.Template, d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// The manifest records every file pilot wrote for a host integration, with
// the hash of what it wrote, so that uninstall removes exactly those and
// never a file edited since.
type manifest struct {
	Version int             `json:"version"`
	Files   []manifestEntry `json:"files"`
}

type manifestEntry struct {
	Host      string    `json:"host"`
	Scope     string    `json:"scope"`
	Provider  string    `json:"provider"`
	Path      string    `json:"path"`
	SHA256    string    `json:"sha256"`
	WrittenAt time.Time `json:"written_at"`
}

func manifestPath() string { return filepath.Join(dataDir(), "integrations.json") }

func readManifest() (manifest, error) {
	m := manifest{Version: 1}
	data, err := os.ReadFile(manifestPath())
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("the install manifest %s cannot be read (%v): move it aside; pilot then treats the files it listed as not its own", manifestPath(), err)
	}
	return m, nil
}

func (m manifest) write() error {
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	data, _ := json.MarshalIndent(m, "", "  ")
	return writeFileAtomic(manifestPath(), append(data, '\n'), 0o644)
}

func (m *manifest) find(path string) (int, bool) {
	for i, e := range m.Files {
		if e.Path == path {
			return i, true
		}
	}
	return -1, false
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// writeFileAtomic writes data to path through a temporary file renamed
// over it, so that a reader sees the old file or the new one, never part,
// making path's directory. On error path is unchanged.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

type hostRequest struct {
	remove            bool
	provider, host    string
	scope, projectDir string
	dryRun            bool
	providersFile     string
}

// installOnHosts writes (or removes) the integrations of the requested
// providers on the requested hosts, and says what it did to each file.
func installOnHosts(ctx context.Context, req hostRequest, stdout, stderr io.Writer) int {
	name := "install"
	if req.remove {
		name = "uninstall"
	}
	if req.scope != "user" && req.scope != "project" {
		return badInput(stderr, name, "--scope: want user or project, got %q", req.scope)
	}
	reg, err := loadRegistry(req.providersFile)
	if err != nil {
		return badInput(stderr, name, "%v", err)
	}
	var provs []pilot.Provider
	switch req.provider {
	case "all":
		creds := config.DefaultCredentials()
		for _, n := range reg.Names() {
			p, _ := reg.Lookup(n)
			// Uninstalling all: whatever pilot wrote. Installing all:
			// the providers that can run, with their credential (or
			// needing none).
			info, err := creds.Info(ctx, p)
			if req.remove || p.CredentialEnv == "" || err == nil && info.Configured {
				provs = append(provs, p)
			}
		}
	default:
		p, ok := reg.Lookup(req.provider)
		if !ok {
			return badInput(stderr, name, "unknown provider %q (known: %s)", req.provider, strings.Join(reg.Names(), ", "))
		}
		provs = []pilot.Provider{p}
	}
	all := hosts()
	var hs []host
	switch req.host {
	case "all":
		for _, n := range hostNames() {
			h := all[n]
			if _, err := exec.LookPath(h.Program); err == nil || req.remove {
				hs = append(hs, h)
			}
		}
		if len(hs) == 0 {
			fmt.Fprintf(stdout, "no host CLI found on PATH (%s)\n", strings.Join(hostNames(), ", "))
			return exitOK
		}
	default:
		h, ok := all[req.host]
		if !ok {
			return badInput(stderr, name, "unknown host %q: want one of %s, or all", req.host, strings.Join(hostNames(), ", "))
		}
		hs = []host{h}
	}
	m, err := readManifest()
	if err != nil {
		return badInput(stderr, name, "%v", err)
	}
	changed, problems := false, 0
	for _, h := range hs {
		dir, err := h.configDir(req.scope, req.projectDir)
		if err != nil {
			fmt.Fprintf(stderr, "pilot %s: %s: %v\n", name, h.Name, err)
			problems++
			continue
		}
		for _, p := range provs {
			for _, f := range h.files(p.Name) {
				path := filepath.Join(dir, f.Rel)
				var msg string
				var did bool
				if req.remove {
					msg, did, err = removeFile(&m, path, req.dryRun)
				} else {
					var data []byte
					if data, err = render(h, f, p); err == nil {
						msg, did, err = installFile(&m, h, req.scope, p.Name, path, data, req.dryRun)
					}
				}
				if err != nil {
					fmt.Fprintf(stderr, "pilot %s: %s: %v\n", name, path, err)
					problems++
					continue
				}
				changed = changed || did
				fmt.Fprintf(stdout, "%-9s %-8s %s: %s\n", h.Name, p.Name, path, msg)
			}
		}
	}
	if changed && !req.dryRun {
		if err := m.write(); err != nil {
			fmt.Fprintf(stderr, "pilot %s: recording what was written: %v\n", name, err)
			return exitFailed
		}
	}
	if problems > 0 {
		return exitFailed
	}
	return exitOK
}

// configDir is where h keeps integrations for scope.
func (h host) configDir(scope, project string) (string, error) {
	if scope == "user" {
		return h.userDir()
	}
	if h.projectSub == "" {
		return "", fmt.Errorf("%s has no project scope: use --scope user", h.Name)
	}
	abs, err := filepath.Abs(project)
	if err != nil {
		return "", err
	}
	return filepath.Join(abs, h.projectSub), nil
}

// installFile writes data to path unless a file pilot did not write, or
// one edited since pilot wrote it, is there: those are left as they are.
func installFile(m *manifest, h host, scope, provider, path string, data []byte, dryRun bool) (msg string, did bool, err error) {
	want := sha(data)
	old, rerr := os.ReadFile(path)
	i, ours := m.find(path)
	switch {
	case rerr == nil && sha(old) == want:
		if !ours && !dryRun {
			// Identical to what pilot writes: take it on.
			m.Files = append(m.Files, manifestEntry{Host: h.Name, Scope: scope, Provider: provider, Path: path, SHA256: want, WrittenAt: time.Now().UTC()})
			return "unchanged", true, nil
		}
		return "unchanged", false, nil
	case rerr == nil && !ours:
		return "left alone: the file exists and pilot did not write it (move it aside to install)", false, nil
	case rerr == nil && sha(old) != m.Files[i].SHA256:
		return "left alone: edited since pilot wrote it (remove it to install afresh)", false, nil
	case rerr != nil && !errors.Is(rerr, fs.ErrNotExist):
		return "", false, rerr
	}
	verb := "written"
	if rerr == nil {
		verb = "updated"
	}
	if dryRun {
		return "would be " + verb, false, nil
	}
	if err := writeFileAtomic(path, data, 0o644); err != nil {
		return "", false, err
	}
	e := manifestEntry{Host: h.Name, Scope: scope, Provider: provider, Path: path, SHA256: want, WrittenAt: time.Now().UTC()}
	if ours {
		m.Files[i] = e
	} else {
		m.Files = append(m.Files, e)
	}
	return verb, true, nil
}

// removeFile removes path if pilot wrote it and it is as pilot wrote it,
// and the directories pilot made for it when they are left empty.
func removeFile(m *manifest, path string, dryRun bool) (msg string, did bool, err error) {
	i, ours := m.find(path)
	data, rerr := os.ReadFile(path)
	switch {
	case !ours && rerr == nil:
		return "left alone: pilot did not write it", false, nil
	case !ours:
		return "not installed", false, nil
	case errors.Is(rerr, fs.ErrNotExist):
		if !dryRun {
			m.Files = append(m.Files[:i], m.Files[i+1:]...)
		}
		return "already gone", !dryRun, nil
	case rerr != nil:
		return "", false, rerr
	case sha(data) != m.Files[i].SHA256:
		return "left alone: edited since pilot wrote it (remove it yourself if you no longer want it)", false, nil
	}
	if dryRun {
		return "would be removed", false, nil
	}
	if err := os.Remove(path); err != nil {
		return "", false, err
	}
	m.Files = append(m.Files[:i], m.Files[i+1:]...)
	// A skill's own directory goes too when it is empty.
	if dir := filepath.Dir(path); strings.HasPrefix(filepath.Base(dir), "pilot-") || filepath.Base(dir) == "pilot" {
		os.Remove(dir)
	}
	return "removed", true, nil
}
