package pilot

// A worker's environment: what it inherits, the secrets kept from it, and
// where its program is found.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Secret-looking variable names: Dispatch refuses one in EnvAllow unless a
// provider names it as its CredentialEnv, for the allowlist would pass it
// to every worker. This is the one list of them; names are compared in
// upper case.
var (
	// secretSuffixes match a whole name, or its last words after an "_".
	secretSuffixes = []string{
		"API_KEY",     // the model providers' convention: OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY
		"ACCESS_KEY",  // S3-style key pairs: AWS_SECRET_ACCESS_KEY, MINIO_ACCESS_KEY
		"SECRET_KEY",  // MINIO_SECRET_KEY, Django's SECRET_KEY
		"PRIVATE_KEY", // signing keys in CI: COSIGN_PRIVATE_KEY, TAURI_PRIVATE_KEY
		"TOKEN",       // GITHUB_TOKEN, NPM_TOKEN, HF_TOKEN, claude's ANTHROPIC_AUTH_TOKEN
		"SECRET",      // OAuth client secrets: AZURE_CLIENT_SECRET, GOOGLE_CLIENT_SECRET
		"PASSWORD",    // logins: POSTGRES_PASSWORD, DOCKER_PASSWORD
	}
	// secretNames are well-known credentials, some of which match no
	// suffix above.
	secretNames = []string{
		"AWS_ACCESS_KEY_ID",                 // AWS CLI and SDKs' environment credentials
		"AWS_SECRET_ACCESS_KEY",             // (ditto)
		"AWS_SESSION_TOKEN",                 // (ditto)
		"GOOGLE_APPLICATION_CREDENTIALS",    // Google Cloud ADC: the path of a service-account key
		"AZURE_CLIENT_SECRET",               // Azure Identity's EnvironmentCredential
		"AZURE_CLIENT_CERTIFICATE_PASSWORD", // (ditto)
		"GH_TOKEN", "GITHUB_TOKEN",          // the gh CLI; GitHub Actions
		"PGPASSWORD", // libpq (psql)
		"MYSQL_PWD",  // the mysql client
	}
)

// secretLooking reports whether the variable name looks like it holds a
// secret (secretSuffixes, secretNames).
func secretLooking(name string) bool {
	name = strings.ToUpper(name)
	for _, s := range secretNames {
		if name == s {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if name == s || strings.HasSuffix(name, "_"+s) {
			return true
		}
	}
	return false
}

// checkEnvAllow refuses a secret-looking variable in the allowlist that no
// provider names as its credential: pilot would pass it on to every worker,
// whatever its provider. A provider's own credential variable may be there;
// environ keeps it from every other worker.
func (d *Dispatcher) checkEnvAllow() error {
	creds := d.Providers.credentialEnvs("")
	for _, k := range d.EnvAllow {
		if secretLooking(k) && !creds[k] {
			return fmt.Errorf("pilot: EnvAllow names %s, which looks like a secret: give it to the provider that needs it as its credential_env (Provider.CredentialEnv) or in its env, not to every worker", k)
		}
	}
	return nil
}

// awaitSecrets takes the other providers' secrets, resolved while the run
// started, into the redactor, and sizes the output tails for the longest
// secret. It fails when ctx ended before they were all resolved; later
// calls do nothing more.
func (r *run) awaitSecrets() error {
	others, err := r.others.wait()
	if r.redacting {
		return err
	}
	r.redacting = true
	r.red = newRedactor(append(others, r.secret)...)
	// Enough bytes for 500 characters of any width, plus room to redact a
	// secret cut by the window's start.
	r.stderrTail.N = 4*stderrTailRunes + 2*r.red.longest + 64
	r.streamTail.N = stallTailBytes + 2*r.red.longest + 64
	return err
}

// commandMentions reports whether the worker's argv, environment or stdin
// refers to path.
func commandMentions(cmd *Command, env []string, path string) bool {
	for _, s := range append(append([]string(nil), cmd.Argv...), env...) {
		if strings.Contains(s, path) {
			return true
		}
	}
	return bytes.Contains(cmd.Stdin, []byte(path))
}

// environ builds the worker's whole environment: the allowlist from pilot's
// environment, the provider's env, the runner's env, EnvRunID, and last the
// provider's own credential. Other providers' credential variables never
// pass.
func (r *run) environ(runnerEnv map[string]string, secretEnv []string) []string {
	others := r.d.Providers.credentialEnvs(r.prov.CredentialEnv)
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if others[k] {
			return
		}
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, k := range r.d.EnvAllow {
		if v, ok := r.d.LookupEnv(k); ok {
			set(k, v)
		}
	}
	// A private temp dir in every mode: the CLIs write conversations and
	// shared libraries to the temp dir and leave them there.
	set("TMPDIR", r.tmpDir())
	for _, m := range []map[string]string{r.prov.Env, runnerEnv} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(k, m[k])
		}
	}
	set(EnvRunID, r.id)
	if r.prov.CredentialEnv != "" {
		set(r.prov.CredentialEnv, r.secret)
		for _, k := range secretEnv {
			if envName.MatchString(k) {
				delete(others, k) // the runner asked for it by name
				set(k, r.secret)
			}
		}
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env
}

// lookPath finds prog in the PATH of env, the worker's environment.
func lookPath(prog string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // never the current directory
		}
		p := filepath.Join(dir, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in the worker's PATH (%s)", prog, path)
}

// otherSecrets resolves the secret of every provider in the registry but
// own, for redaction. A provider without a CredentialEnv needs none, and
// a credential that is missing or refused is left out: another provider's
// credential never fails this dispatch nor shows in its error. It fails
// only when ctx ends before it could ask for them all, for then a key the
// worker could print may be missing.
func (d *Dispatcher) otherSecrets(ctx context.Context, own string) ([]string, error) {
	var out []string
	for _, p := range d.Providers.withCredential(own) {
		s, err := d.Credentials.Secret(ctx, p)
		if err != nil && ctx.Err() != nil {
			return out, fmt.Errorf("pilot: dispatch not started: %w", context.Cause(ctx))
		}
		if err == nil && len(s) >= minSecretLen {
			out = append(out, s)
		}
	}
	return out, nil
}
