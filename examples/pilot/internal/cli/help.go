package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// reCommand is a command's line in usage: its name, then what it does.
var reCommand = regexp.MustCompile(`(?m)^  ([a-z]+) +(\S.*)$`)

// commands is the names of the commands usage lists, in its order.
func commands() []string {
	var names []string
	for _, m := range reCommand.FindAllStringSubmatch(usage, -1) {
		names = append(names, m[1])
	}
	return names
}

// didYouMean is " (did you mean "x"?)" for the one of names nearest to s,
// or "" when none is near.
func didYouMean(s string, names []string) string {
	if c := closest(s, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// unknownSubcommand says so, with the one meant, when arg (the first
// argument of command cmd, which takes subcommands subs) is a word that
// is none of them, and returns exit 2; ok is false for a flag or a
// subcommand.
func unknownSubcommand(stderr io.Writer, cmd, arg string, subs ...string) (code int, ok bool) {
	if strings.HasPrefix(arg, "-") || slices.Contains(subs, arg) {
		return 0, false
	}
	fmt.Fprintf(stderr, "pilot %s: unknown subcommand %q%s; its subcommands are %s (see pilot %s --help)\n", cmd, arg, didYouMean(arg, subs), strings.Join(subs, ", "), cmd)
	return exitBadInput, true
}

// cmdHelp is 'pilot help COMMAND': that command's usage and flags.
func cmdHelp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if !slices.Contains(commands(), args[0]) {
		fmt.Fprintf(stderr, "pilot help: no command %q%s; the commands are %s\n", args[0], didYouMean(args[0], commands()), strings.Join(commands(), ", "))
		return exitBadInput
	}
	return run(ctx, []string{args[0], "--help"}, nil, stdout, stderr)
}

// reFlag is a flag's line in a command's --help (the flag package's
// PrintDefaults): "  -name" and, maybe, its value's name.
var reFlag = regexp.MustCompile(`(?m)^  -([a-zA-Z0-9][a-zA-Z0-9-]*)`)

// flagsOf is command's flags, as its --help lists them.
func flagsOf(ctx context.Context, command string) []string {
	var out bytes.Buffer
	run(ctx, []string{command, "--help"}, nil, &out, io.Discard)
	var flags []string
	for _, m := range reFlag.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// cmdCompletion is 'pilot completion bash|zsh|fish': a script that
// completes pilot's commands, and each command's flags, in that shell.
// The lists are taken from the commands' own usage when it runs.
func cmdCompletion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	shells := []string{"bash", "zsh", "fish"}
	if helpAsked(args) {
		fmt.Fprint(stdout, "usage: pilot completion bash|zsh|fish\n\nPrints a script that completes pilot's commands and their flags:\n"+
			"  eval \"$(pilot completion bash)\"    # in ~/.bashrc (zsh: the same with zsh, in ~/.zshrc)\n"+
			"  pilot completion fish | source     # in ~/.config/fish/config.fish\n")
		return exitOK
	}
	if len(args) != 1 || !slices.Contains(shells, args[0]) {
		fmt.Fprintf(stderr, "pilot completion: want one shell, bash, zsh or fish (eval \"$(pilot completion bash)\" in ~/.bashrc)\n")
		return exitBadInput
	}
	names := commands()
	flags := map[string][]string{}
	for _, c := range names {
		flags[c] = flagsOf(ctx, c)
	}
	var b strings.Builder
	switch args[0] {
	case "zsh":
		// zsh runs bash's completion functions through bashcompinit,
		// which needs compinit's compdef.
		b.WriteString("(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n")
		b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
		fallthrough
	case "bash":
		b.WriteString("# pilot's completion: eval \"$(pilot completion bash)\"\n_pilot() {\n")
		b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]}\n")
		fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W '%s help' -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
		b.WriteString("\tcase $cur in -*) ;; *) return ;; esac\n\tcase ${COMP_WORDS[1]} in\n")
		for _, c := range names {
			if len(flags[c]) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\t%s) COMPREPLY=($(compgen -W '--%s' -- \"$cur\")) ;;\n", c, strings.Join(flags[c], " --"))
		}
		b.WriteString("\tesac\n}\ncomplete -o default -F _pilot pilot\n")
	case "fish":
		b.WriteString("# pilot's completion: pilot completion fish | source\n")
		for _, m := range reCommand.FindAllStringSubmatch(usage, -1) {
			fmt.Fprintf(&b, "complete -c pilot -f -n __fish_use_subcommand -a %s -d %s\n", m[1], fishQuote(firstSentence(m[2])))
		}
		for _, c := range names {
			for _, f := range flags[c] {
				fmt.Fprintf(&b, "complete -c pilot -n '__fish_seen_subcommand_from %s' -l %s\n", c, f)
			}
		}
	}
	io.WriteString(stdout, b.String())
	return exitOK
}

// firstSentence is s up to its first ". " or ";", without the stop.
func firstSentence(s string) string {
	if i := strings.IndexAny(s, ";:"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// fishQuote quotes s for fish, in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
