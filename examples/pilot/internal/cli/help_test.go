package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every command usage lists is one Run knows, with --help of its own.
func TestEveryListedCommandHasHelp(t *testing.T) {
	names := commands()
	if len(names) < 15 || names[0] != "dispatch" {
		t.Fatalf("commands() = %v; want usage's list", names)
	}
	for _, c := range names {
		code, out, errOut := runCLI(c, "--help")
		if code != 0 || !strings.Contains(out, "usage: pilot "+c) {
			t.Errorf("pilot %s --help: exit %d, stdout %q, stderr %q", c, code, out, errOut)
		}
	}
}

func TestMisspellingsGetTheOneMeant(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"dispach"}, `pilot: unknown command "dispach" (did you mean "dispatch"?)`},
		{[]string{"dispatch", "--tiemout", "5"}, "unknown flag --tiemout (did you mean --timeout?)"},
		{[]string{"help", "fanot"}, `pilot help: no command "fanot" (did you mean "fanout"?)`},
		{[]string{"zzz"}, `pilot: unknown command "zzz"`},
		{[]string{"runs", "shwo", "last"}, `pilot runs: unknown subcommand "shwo" (did you mean "show"?); its subcommands are show, logs, prune`},
		{[]string{"worktrees", "remvoe", "x"}, `pilot worktrees: unknown subcommand "remvoe" (did you mean "remove"?)`},
	} {
		code, _, errOut := runCLI(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("pilot %v: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	if _, _, errOut := runCLI("zzz"); strings.Contains(errOut, "did you mean") {
		t.Errorf("nothing is near zzz, yet: %q", errOut)
	}
}

func TestHelpCommandPrintsItsUsage(t *testing.T) {
	code, out, _ := runCLI("help", "dispatch")
	_, wantOut, _ := runCLI("dispatch", "--help")
	if code != 0 || out != wantOut || !strings.Contains(out, "-timeout seconds") {
		t.Errorf("pilot help dispatch: exit %d:\n%s\nwant dispatch --help's:\n%s", code, out, wantOut)
	}
}

// The completion scripts list the commands and each one's flags, and
// the shells that are here read them without a syntax error; bash's
// completes a command and a flag.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runCLI("completion", sh)
		if code != 0 || !strings.Contains(out, "schedule") || !strings.Contains(out, "idle-timeout") {
			t.Fatalf("pilot completion %s: exit %d, stderr %q:\n%s", sh, code, errOut, out)
		}
		path := filepath.Join(t.TempDir(), "pilot."+sh)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath(sh); err != nil {
			t.Logf("no %s here: its script is not checked", sh)
			continue
		}
		if b, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v\n%s", sh, err, b)
		}
	}
	_, script, _ := runCLI("completion", "bash")
	probe := script + `
COMP_WORDS=(pilot disp); COMP_CWORD=1; _pilot; echo "${COMPREPLY[*]}"
COMP_WORDS=(pilot dispatch --idle); COMP_CWORD=2; _pilot; echo "${COMPREPLY[*]}"
COMPREPLY=(); COMP_WORDS=(pilot dispatch task); COMP_CWORD=2; _pilot; echo "[${COMPREPLY[*]}]"
`
	b, err := exec.Command("bash", "-c", probe).CombinedOutput()
	if got := string(b); err != nil || got != "dispatch\n--idle-timeout\n[]\n" {
		t.Errorf("bash completion: %v, %q; want dispatch, --idle-timeout, then none (files)", err, got)
	}
	if code, _, errOut := runCLI("completion", "tcsh"); code != 2 || !strings.Contains(errOut, "bash, zsh or fish") {
		t.Errorf("completion tcsh: exit %d, %q", code, errOut)
	}
}
