package seatbelt

import (
	"errors"
	"flag"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sb from Profile")

const home = "/Users/u"

var cases = []struct {
	name string
	p    Policy
}{
	{"secrets", Policy{
		Guard:    []string{home + "/.ssh", home + "/.netrc", home + "/.config/gh", home + "/.claude", home + "/.codex", home + "/.docker/config.json"},
		Allow:    []string{home + "/.claude"},
		WriteAll: true,
	}},
	{"workspace", Policy{
		Guard: []string{home + "/.ssh", home + "/.config/gh", home + "/.claude", home + "/.codex"},
		Allow: []string{home + "/.claude", home + "/.config/gh"},
		Write: []string{home + "/src/app", "/private/var/runs/r1", "/private/var/runs/r1/tmp", home + "/.claude", "/dev/null", "/dev/fd"},
	}},
	{"nested", Policy{ // a guard within an allowed path within a guard
		Guard:    []string{"/a", "/a/b/c", "/z"},
		Allow:    []string{"/a/b", "/y"},
		WriteAll: true,
	}},
	{"quoting", Policy{
		Guard: []string{`/Users/u/my "quoted" dir`, `/Users/u/back\slash`, "/Users/u/naïve ☃", "/Users/u/new\nline", `/Users/u/x")) (allow default) ("`},
		Write: []string{`/w\"`},
	}},
	{"nothing", Policy{}},
	{"unclean", Policy{ // relative, NUL-holding and repeated paths
		Guard:    []string{"rel/ative", "/nul\x00byte", "/g/", "/g", "//g/./h/..", ""},
		WriteAll: true,
	}},
}

func TestProfileGolden(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Profile(tc.p)
			file := filepath.Join("testdata", tc.name+".sb")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Profile (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProfileDecides reads each case's profile back and evaluates it as
// SBPL does, last matching rule first, against what the Policy says.
func TestProfileDecides(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkDecisions(t, tc.p)
		})
	}
}

func checkDecisions(t *testing.T, p Policy) {
	t.Helper()
	prof := Profile(p)
	rules, err := parseProfile(prof)
	if err != nil {
		t.Fatalf("%v in\n%s", err, prof)
	}
	guard, allow, write := clean(p.Guard), clean(p.Allow), clean(p.Write)
	var probes []string
	for _, q := range slices.Concat(guard, allow, write) {
		probes = append(probes, q, q+"/f", q+"x", path.Dir(q))
	}
	probes = append(probes, "/", "/elsewhere")
	for _, x := range probes {
		read := mayRead(x, guard, allow)
		writeOK := read && (p.WriteAll || slices.ContainsFunc(write, func(w string) bool { return within(x, w) }))
		for op, want := range map[string]bool{"file-read-data": read, "file-write-data": writeOK} {
			if got := decide(rules, op, x); got != want {
				t.Errorf("%s %q: allowed %v, want %v; profile:\n%s", op, x, got, want, prof)
			}
		}
	}
	for _, g := range guard {
		if slices.Contains(allow, g) {
			continue
		}
		for d := path.Dir(g); d != "/"; d = path.Dir(d) {
			if decide(rules, "file-write-unlink", d) {
				t.Errorf("%q, on the way to guard %q, may be renamed; profile:\n%s", d, g, prof)
			}
		}
	}
}

// mayRead is the Policy's reading rule: the deepest guard or allowed path
// above x decides, an allowed one winning a tie.
func mayRead(x string, guard, allow []string) bool {
	best, ok := -1, true
	for _, g := range guard {
		if within(x, g) && len(g) > best {
			best, ok = len(g), false
		}
	}
	for _, a := range allow {
		if within(x, a) && len(a) >= best {
			best, ok = len(a), true
		}
	}
	return ok
}

// FuzzProfileQuoting checks that arbitrary paths stay string literals: the
// profile parses, its rules have the shape Profile writes, and its strings
// read back as the paths given (and the directories above the guards).
func FuzzProfileQuoting(f *testing.F) {
	f.Add("Users/u/.ssh", "x")
	f.Add(`a"b`, `c\d`)
	f.Add(`x")) (allow default) ("`, `\`)
	f.Add("na\u00efve/\u2603", "new\nline")
	f.Add("\xff\xfe", ";comment")
	f.Fuzz(func(t *testing.T, a, b string) {
		p := Policy{Guard: []string{"/" + a, "/" + b + "/" + a}, Allow: []string{"/" + b}, Write: []string{"/" + a + "/" + b}}
		prof := Profile(p)
		rules, err := parseProfile(prof)
		if err != nil {
			t.Fatalf("%v in\n%s", err, prof)
		}
		var lits []string
		for _, r := range rules {
			lits = append(lits, r.strings()...)
		}
		want := map[string]bool{}
		for _, q := range slices.Concat(p.Guard, p.Allow, p.Write) {
			if strings.IndexByte(q, 0) < 0 {
				want[path.Clean(q)] = true
			}
		}
		for q := range want {
			if !slices.Contains(lits, q) {
				t.Errorf("path %q is not among the profile's strings %q", q, lits)
			}
		}
		for _, l := range lits {
			above := func(g string) bool { return strings.IndexByte(g, 0) < 0 && strings.HasPrefix(path.Clean(g), l+"/") }
			if !want[l] && !slices.ContainsFunc(p.Guard, above) {
				t.Errorf("string %q is neither a path given nor above a guard; profile:\n%s", l, prof)
			}
		}
		checkDecisions(t, p)
	})
}

// A parsed rule: (allow|deny op... filter...).
type sbRule struct {
	allow   bool
	ops     []string
	filters []sbFilter
}

// A parsed filter: (subpath s), (literal s), (require-not f) or
// (require-any f...).
type sbFilter struct {
	kind string
	s    string
	subs []sbFilter
}

func (r sbRule) strings() []string {
	var out []string
	var walk func(fs []sbFilter)
	walk = func(fs []sbFilter) {
		for _, f := range fs {
			if f.kind == "subpath" || f.kind == "literal" {
				out = append(out, f.s)
			}
			walk(f.subs)
		}
	}
	walk(r.filters)
	return out
}

// decide evaluates op on x as SBPL does: the last rule that names op (or
// a wildcard over it) and has no filter or one that matches decides.
func decide(rules []sbRule, op, x string) bool {
	for i := len(rules) - 1; i >= 0; i-- {
		r := rules[i]
		named := false
		for _, o := range r.ops {
			named = named || o == op || o == "default" || strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*"))
		}
		if named && (len(r.filters) == 0 || anyMatch(r.filters, x)) {
			return r.allow
		}
	}
	return true // (allow default)
}

func anyMatch(fs []sbFilter, x string) bool {
	for _, f := range fs {
		if f.match(x) {
			return true
		}
	}
	return false
}

func (f sbFilter) match(x string) bool {
	switch f.kind {
	case "subpath":
		return within(x, f.s)
	case "literal":
		return x == f.s
	case "require-not":
		return !f.subs[0].match(x)
	}
	return anyMatch(f.subs, x) // require-any
}

// parseProfile reads a profile of the shape Profile writes, with SBPL's
// string syntax, and fails on anything else.
func parseProfile(src string) ([]sbRule, error) {
	forms, err := readAll(src)
	if err != nil {
		return nil, err
	}
	if len(forms) < 2 || !sameList(forms[0], "version", "1") || !sameList(forms[1], "allow", "default") {
		return nil, errors.New("the profile does not start (version 1) (allow default)")
	}
	var rules []sbRule
	for _, f := range forms[2:] {
		l, ok := f.([]any)
		if !ok || len(l) < 2 {
			return nil, errors.New("a rule is not a list")
		}
		verb, _ := l[0].(atom)
		if verb != "allow" && verb != "deny" {
			return nil, errors.New("a rule is neither allow nor deny")
		}
		r := sbRule{allow: verb == "allow"}
		i := 1
		for ; i < len(l); i++ {
			a, ok := l[i].(atom)
			if !ok {
				break
			}
			if a != "file-read*" && a != "file-write*" && a != "file-write-unlink" {
				return nil, errors.New("unknown operation " + string(a))
			}
			r.ops = append(r.ops, string(a))
		}
		if len(r.ops) == 0 {
			return nil, errors.New("a rule names no operation")
		}
		for ; i < len(l); i++ {
			fl, err := filter(l[i])
			if err != nil {
				return nil, err
			}
			r.filters = append(r.filters, fl)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func filter(v any) (sbFilter, error) {
	l, ok := v.([]any)
	if !ok || len(l) < 2 {
		return sbFilter{}, errors.New("a filter is not a list")
	}
	kind, _ := l[0].(atom)
	f := sbFilter{kind: string(kind)}
	switch kind {
	case "subpath", "literal":
		s, ok := l[1].(string)
		if !ok || len(l) != 2 {
			return f, errors.New(f.kind + " takes one string")
		}
		f.s = s
	case "require-not", "require-any":
		if kind == "require-not" && len(l) != 2 {
			return f, errors.New("require-not takes one filter")
		}
		for _, sub := range l[1:] {
			sf, err := filter(sub)
			if err != nil {
				return f, err
			}
			f.subs = append(f.subs, sf)
		}
	default:
		return f, errors.New("unknown filter " + f.kind)
	}
	return f, nil
}

func sameList(v any, atoms ...atom) bool {
	l, ok := v.([]any)
	if !ok || len(l) != len(atoms) {
		return false
	}
	for i, a := range atoms {
		if l[i] != a {
			return false
		}
	}
	return true
}

// An atom is a symbol or number; a string literal reads as a string.
type atom string

// readAll reads s-expressions as SBPL's TinyScheme reader does: a string
// ends at an unescaped double quote, a backslash takes the next byte as
// it is (\n, \t, \r, \x and octal escapes are refused: Quote writes none),
// and ';' starts a comment outside strings.
func readAll(src string) ([]any, error) {
	var stack [][]any
	var top []any
	push := func(v any) {
		if len(stack) == 0 {
			top = append(top, v)
		} else {
			stack[len(stack)-1] = append(stack[len(stack)-1], v)
		}
	}
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == ' ' || c == '\n' || c == '\t':
			i++
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(':
			stack = append(stack, []any{})
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, errors.New("unbalanced )")
			}
			l := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			push(l)
			i++
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, errors.New("unterminated string")
				}
				c := src[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' {
					i++
					if i >= len(src) {
						return nil, errors.New("unterminated string")
					}
					if e := src[i]; e != '\\' && e != '"' {
						return nil, errors.New("escape \\" + string(e) + " that Quote does not write")
					}
				}
				b.WriteByte(src[i])
				i++
			}
			push(b.String())
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \n\t()\";", rune(src[j])) {
				j++
			}
			push(atom(src[i:j]))
			i = j
		}
	}
	if len(stack) > 0 {
		return nil, errors.New("unbalanced (")
	}
	return top, nil
}
