package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"text/tabwriter"

	"golang.org/x/sync/errgroup"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/templates"
)

// providerStatus is one provider as 'pilot providers' lists it: never a
// secret value.
type providerStatus struct {
	Name          string `json:"name"`
	Runner        string `json:"runner"`
	Model         string `json:"model"`
	BaseURL       string `json:"base_url,omitempty"`
	CredentialEnv string `json:"credential_env"`
	// From is "built-in", or the providers file that defines or
	// redefines the provider.
	From string `json:"from"`
	// Binary is the program the provider runs: the path found, or its
	// name when it is not on PATH (BinaryFound false); BinaryFrom says
	// where it comes from ("provider", "installed by pilot", "PATH"), and
	// BinaryVersion is what its --version says.
	Binary        string `json:"binary"`
	BinaryFound   bool   `json:"binary_found"`
	BinaryFrom    string `json:"binary_from"`
	BinaryVersion string `json:"binary_version,omitempty"`
	// CredentialConfigured is whether its credential is there; Configured
	// (of Info) whether the provider can run: its credential and its CLI.
	CredentialConfigured bool `json:"credential_configured"`
	config.Info
	// Error is why the credential source refused the credential it found
	// (a credential file others may read, say), with the fix.
	Error string `json:"error,omitempty"`
}

func cmdProviders(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("providers", "[--providers-file F] [--wide | --json]", stdout, stderr)
	providersFile := providersFlag(fs)
	asJSON := fs.Bool("json", false, "print the providers as one JSON array")
	wide := fs.Bool("wide", false, "print every column: the credential's source and security, where the provider and its CLI come from")
	if code := fs.parse(args); code >= 0 {
		return code
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return badInput(stderr, "providers", "%v", err)
	}
	statuses := providerStatuses(ctx, reg, providersPath(*providersFile))
	if *asJSON {
		writeJSON(stdout, statuses)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if *wide {
		fmt.Fprintln(tw, "NAME\tRUNNER\tMODEL\tCREDENTIAL\tCONFIGURED\tSECURE\tSOURCE\tFROM\tBINARY\tVERSION")
	} else {
		fmt.Fprintln(tw, "NAME\tRUNNER\tMODEL\tCREDENTIAL\tREADY\tCLI")
	}
	var problems []string
	for _, st := range statuses {
		model := orDash(st.Model)
		if st.BaseURL != "" {
			model += " at " + st.BaseURL
		}
		configured := yesNo(st.Configured)
		switch {
		case !st.BinaryFound && st.CredentialConfigured:
			configured = "no CLI"
			problems = append(problems, st.Name+": "+st.Error)
		case st.Error != "":
			configured = "refused"
			problems = append(problems, st.Name+": "+st.Error)
		}
		bin := st.Binary
		if !st.BinaryFound {
			bin += " (not found)"
		}
		if *wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.Runner, model, orDash(st.CredentialEnv),
				configured, yesNo(st.SecureMode), st.Source, st.From, bin, orDash(st.BinaryVersion))
			continue
		}
		cli := "not found"
		if st.BinaryFound {
			cli = strings.TrimSpace(filepath.Base(st.Binary) + " " + st.BinaryVersion)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.Runner, cut(model, 32), orDash(st.CredentialEnv), configured, cut(cli, 24))
	}
	tw.Flush()
	if len(problems) > 0 {
		fmt.Fprintf(stdout, "\n%s\n", strings.Join(problems, "\n"))
	}
	return exitOK
}

// binaryOf is the program provider p runs, whether it is found, and where
// it comes from.
func binaryOf(p pilot.Provider, installed map[string]installedRunner) (bin string, found bool, from string) {
	switch {
	case p.Binary != "":
		bin, from = p.Binary, "provider"
		if r, ok := installed[p.Runner]; ok && r.Binary == p.Binary {
			from = "installed by pilot"
		}
	case p.Runner == "command" && len(p.Argv) > 0:
		bin, from = p.Argv[0], "provider"
	default:
		bin, from = p.Runner, "PATH"
	}
	if path, err := exec.LookPath(bin); err == nil {
		return path, true, from
	}
	return bin, false, from
}

// binaryVersions fills in the versions of the agent CLIs found, asking
// each distinct one its --version at once (an installed runner's is its
// record's).
func binaryVersions(ctx context.Context, sts []providerStatus, installed map[string]installedRunner) {
	known := map[string]string{} // read only while the questions run
	for _, r := range installed {
		known[r.Binary] = r.Version
	}
	versions := map[string]string{} // the answers, under mu
	var mu sync.Mutex
	var g errgroup.Group
	asked := map[string]bool{}
	for _, st := range sts {
		if !st.BinaryFound || st.Runner == "command" || asked[st.Binary] || known[st.Binary] != "" {
			continue
		}
		asked[st.Binary] = true
		g.Go(func() error {
			v, err := binaryVersion(ctx, st.Binary)
			if err != nil {
				v = "? (" + err.Error() + ")"
			}
			mu.Lock()
			versions[st.Binary] = v
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	for i := range sts {
		sts[i].BinaryVersion = known[sts[i].Binary]
		if v, ok := versions[sts[i].Binary]; ok {
			sts[i].BinaryVersion = v
		}
	}
}

func cmdTemplate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("template", "MODE (code|explore|test|review)", stdout, stderr)
	var mode string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if mode == "" {
		return badInput(stderr, "template", "a mode is required: pilot template code|explore|test|review")
	}
	text, err := templates.For(pilot.Mode(mode))
	if err != nil {
		return badInput(stderr, "template", "%v", strings.TrimPrefix(err.Error(), "pilot: "))
	}
	io.WriteString(stdout, text)
	return exitOK
}

// maxSecretInput is the most 'pilot credentials' reads from stdin.
const maxSecretInput = 64 << 10

// errInterrupted is a secret prompt ended by a signal or the context.
var errInterrupted = errors.New("interrupted; nothing was stored")

func cmdCredentials(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("credentials", "PROVIDER [--status] [--providers-file F]\n\n"+
		"Reads the provider's secret from stdin (typed at a terminal without echo, or piped in)\n"+
		"and stores it in "+credentialsDirForHelp()+"/PROVIDER (mode 0600).\n"+
		"With --status, stores nothing and prints whether the credential is configured.", stdout, stderr)
	providersFile := providersFlag(fs)
	status := fs.Bool("status", false, "store nothing; print the credential's status (configured, secure_mode, source; never the value), a table on a terminal, else JSON, and exit 1 when it is not configured")
	asJSON := fs.Bool("json", false, "with --status: print JSON on a terminal too")
	// The provider comes first, flags after it.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if name == "" {
		return badInput(stderr, "credentials", "a provider name is required: pilot credentials PROVIDER")
	}
	reg, err := loadRegistry(*providersFile)
	if err != nil {
		return badInput(stderr, "credentials", "%v", err)
	}
	p, ok := reg.Lookup(name)
	if !ok {
		return badInput(stderr, "credentials", "unknown provider: %s (known: %s)", name, strings.Join(reg.Names(), ", "))
	}
	if *status {
		return credentialStatus(ctx, p, forPerson(stdout, *asJSON), stdout, stderr)
	}
	if p.CredentialEnv == "" {
		return badInput(stderr, "credentials", "provider %s needs no credential (it has no credential_env), so pilot would never use a stored one: "+
			"to give it a key, define it in the providers file with \"credential_env\" first", p.Name)
	}
	value, err := readSecret(ctx, stdin, stderr, fmt.Sprintf("Secret for %s (%s; input is not echoed): ", p.Name, p.CredentialEnv))
	if errors.Is(err, errInterrupted) {
		fmt.Fprintf(stderr, "pilot credentials: %v\n", err)
		return exitFailed
	}
	if err != nil {
		return badInput(stderr, "credentials", "reading the secret: %v", err)
	}
	if value == "" {
		return badInput(stderr, "credentials", "no secret on stdin, so nothing was stored: type it at the prompt or pipe it in "+
			"(pilot credentials %s < FILE); to see whether one is configured, run: pilot credentials %s --status", p.Name, p.Name)
	}
	path, err := config.FileCredentials{}.Store(p.Name, value)
	if err != nil {
		return badInput(stderr, "credentials", "%v", strings.TrimPrefix(err.Error(), "pilot: "))
	}
	fmt.Fprintf(stdout, "stored the credential for %s in %s (mode 0600)\n", p.Name, path)
	if v, ok := os.LookupEnv(p.CredentialEnv); ok && v != "" {
		fmt.Fprintf(stderr, "pilot credentials: note: %s is set in this environment and takes precedence over the stored file\n", p.CredentialEnv)
	}
	return exitOK
}

func credentialsDirForHelp() string {
	if dir := config.DefaultCredentialsDir(); dir != "" {
		return dir
	}
	return "$XDG_CONFIG_HOME/pilot/credentials"
}

// credentialStatus prints p's credential status as one JSON line: the
// behaviour of 'pilot credentials PROVIDER' before it stored secrets.
func credentialStatus(ctx context.Context, p pilot.Provider, person bool, stdout, stderr io.Writer) int {
	info, err := config.DefaultCredentials().Info(ctx, p)
	if err != nil {
		info.Configured, info.SecureMode = false, false
	}
	if person {
		table(stdout, []string{"PROVIDER", "CREDENTIAL", "CONFIGURED", "SECURE", "SOURCE"},
			[][]string{{p.Name, p.CredentialEnv, yesNo(info.Configured), yesNo(info.SecureMode), info.Source}})
	} else {
		writeJSON(stdout, struct {
			Provider string `json:"provider"`
			config.Info
		}{p.Name, info})
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "pilot credentials: %v\n", strings.TrimPrefix(err.Error(), "pilot: "))
		return exitFailed
	case !info.Configured:
		fmt.Fprintf(stderr, "pilot credentials: no credential for %s: export %s=... in the environment pilot runs in, or store one with: pilot credentials %s\n",
			p.Name, p.CredentialEnv, p.Name)
		return exitFailed
	}
	return exitOK
}

// readSecret reads a secret from in: one line typed at a terminal, with
// echo off and prompt shown on promptTo, or all of in when it is not a
// terminal. One trailing newline is dropped. It returns errInterrupted
// when ctx ends first.
func readSecret(ctx context.Context, in io.Reader, promptTo io.Writer, prompt string) (string, error) {
	if f, ok := in.(*os.File); ok && isTerminal(f) {
		return readTerminalSecret(ctx, f, promptTo, prompt)
	}
	data, err := readInterruptibly(ctx, func() ([]byte, error) {
		return io.ReadAll(io.LimitReader(in, maxSecretInput+1))
	})
	if err != nil {
		return "", err
	}
	if len(data) > maxSecretInput {
		return "", fmt.Errorf("stdin holds more than %d KiB, too much for one credential", maxSecretInput>>10)
	}
	return trimNewline(data), nil
}

func trimNewline(data []byte) string {
	s := strings.TrimSuffix(string(data), "\n")
	return strings.TrimSuffix(s, "\r")
}

// readInterruptibly runs read and returns its result, or errInterrupted as
// soon as ctx is done. A read from a terminal or a pipe cannot be
// cancelled, so on interruption the read is left running: the command
// returns and the process exits, which ends it.
func readInterruptibly(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := read()
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, errInterrupted
	}
}

// providerStatuses is every provider of reg as 'pilot providers' and
// 'pilot doctor' show it, file being the providers file in effect ("" for
// the default). A provider whose credential is configured but whose CLI is
// not found is not configured: it cannot run.
func providerStatuses(ctx context.Context, reg *pilot.Registry, file string) []providerStatus {
	if file == "" {
		file = config.DefaultProvidersFile()
	}
	builtin := map[string]pilot.Provider{}
	for _, p := range agents.Providers() {
		builtin[p.Name] = p
	}
	creds := config.DefaultCredentials()
	installed := installedRunners()
	statuses := []providerStatus{}
	for _, name := range reg.Names() {
		p, _ := reg.Lookup(name)
		st := providerStatus{Name: p.Name, Runner: p.Runner, Model: p.Model, BaseURL: p.BaseURL, CredentialEnv: p.CredentialEnv, From: file}
		if b, ok := builtin[name]; ok && reflect.DeepEqual(b, p) {
			st.From = "built-in"
		}
		st.Binary, st.BinaryFound, st.BinaryFrom = binaryOf(p, installed)
		info, err := creds.Info(ctx, p)
		st.Info = info
		if err != nil {
			st.Configured, st.SecureMode = false, false
			st.Error = err.Error()
		}
		st.CredentialConfigured = st.Configured
		statuses = append(statuses, st)
	}
	binaryVersions(ctx, statuses, installed)
	for i, st := range statuses {
		if st.Configured && !st.BinaryFound {
			statuses[i].Configured = false
			fix := "install it, or name it in the provider's binary"
			if _, ok := runnerPackages()[st.Runner]; ok {
				fix = "install it, or run: pilot install runner " + st.Runner
			}
			statuses[i].Error = fmt.Sprintf("its CLI %s is not found on PATH: %s", st.Binary, fix)
		}
	}
	return statuses
}
