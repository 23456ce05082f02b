// Package seatbelt writes the macOS sandbox profiles (SBPL, the Scheme-like
// language sandbox-exec reads) that keep a worker from files.
package seatbelt

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// A Policy is what a worker may reach, as absolute paths. It reads
// everywhere but beneath Guard, where Allow lifts the guard again. With
// WriteAll it writes wherever it reads; without it, only where it reads
// and beneath Write.
//
// Paths are matched as the kernel resolves them, so the caller passes
// them with symbolic links resolved (/private/tmp, not /tmp); a relative
// path, or one holding a NUL byte, names no file and is dropped.
type Policy struct {
	Guard    []string
	Allow    []string
	WriteAll bool
	Write    []string
}

// Profile returns the sandbox-exec profile that enforces p. It allows by
// default and then denies, so that what p does not name (processes,
// sockets, IPC) is as without a sandbox.
//
// SBPL's last matching rule wins. Guards and allowed paths are written in
// layers, outer before inner, so that the deepest of them decides a path,
// as the Landlock planner has it; an allowed path wins over a guard of the
// same path. Every path is a subpath filter, which matches the path itself
// and everything beneath it: a guarded file is matched whether it exists,
// is a file or later becomes a directory, and no stat is needed. Renaming
// a directory on the way to a guard is denied, since a renamed ~/.config
// would take ~/.config/gh out of its guard's reach.
//
// Strings are quoted with only backslash and double quote escaped; every
// other byte (newlines, UTF-8) stands for itself, as SBPL's reader takes it.
func Profile(p Policy) string {
	guard, allow, write := clean(p.Guard), clean(p.Allow), clean(p.Write)
	var b strings.Builder
	b.WriteString("(version 1)\n(allow default)\n")
	for i, paths := range layers(guard, allow) {
		if len(paths) == 0 {
			continue
		}
		verb := "deny"
		if i%2 == 1 {
			verb = "allow"
		}
		rule(&b, "("+verb+" file-read* file-write*", "  ", "subpath", paths, ")")
	}
	if anc := ancestors(slices.DeleteFunc(slices.Clone(guard), func(g string) bool { return slices.Contains(allow, g) })); len(anc) > 0 {
		rule(&b, "(deny file-write-unlink", "  ", "literal", anc, ")")
	}
	if !p.WriteAll {
		if len(write) == 0 {
			b.WriteString("(deny file-write*)\n")
		} else {
			rule(&b, "(deny file-write*\n  (require-not\n    (require-any", "      ", "subpath", write, ")))")
		}
	}
	return b.String()
}

// rule writes head, a filter of kind for each path, each on its own line
// after indent, and tail.
func rule(b *strings.Builder, head, indent, kind string, paths []string, tail string) {
	b.WriteString(head)
	for _, p := range paths {
		b.WriteString("\n" + indent + "(" + kind + " ")
		b.WriteString(Quote(p))
		b.WriteString(")")
	}
	b.WriteString(tail + "\n")
}

// Quote returns s as an SBPL string literal.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// layers returns the guards and allowed paths as alternating rules, deny
// first: each path goes in the first layer of its kind after every layer
// holding a path of the other kind above it (for a guard, strictly above:
// an allowed path wins over a guard of the same path). Layers are sorted;
// some may be empty (layer 0, when nothing is guarded).
func layers(guard, allow []string) [][]string {
	depth := map[string]int{} // keyed by kind and path
	var of func(p string, isGuard bool) int
	of = func(p string, isGuard bool) int {
		key := "a" + p
		if isGuard {
			key = "g" + p
		}
		if d, ok := depth[key]; ok {
			return d
		}
		d := 1 // allow layers are odd
		others := guard
		if isGuard {
			d, others = 0, allow
		}
		for _, q := range others {
			if within(p, q) && (p != q || !isGuard) {
				d = max(d, of(q, !isGuard)+1)
			}
		}
		depth[key] = d
		return d
	}
	var out [][]string
	add := func(p string, isGuard bool) {
		d := of(p, isGuard)
		for len(out) <= d {
			out = append(out, nil)
		}
		out[d] = append(out[d], p)
	}
	for _, g := range guard {
		add(g, true)
	}
	for _, a := range allow {
		add(a, false)
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}

// ancestors returns the directories above paths, "/" left out, sorted.
func ancestors(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		for d := path.Dir(p); d != "/" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// clean returns paths cleaned, sorted, without duplicates, and without
// those that name no file.
func clean(paths []string) []string {
	var out []string
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") || strings.IndexByte(p, 0) >= 0 {
			continue
		}
		out = append(out, path.Clean(p))
	}
	sort.Strings(out)
	return slices.Compact(out)
}
