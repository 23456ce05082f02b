package landlock

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// A Policy is what a worker may reach, as paths: the planner turns it into
// a Ruleset's rules.
type Policy struct {
	// ReadAll grants FSRead everywhere but beneath Guard (and again
	// beneath Allow); WriteAll grants FSWrite the same way. Without
	// WriteAll, FSWrite is granted beneath Write only (and never beneath
	// Guard, unless Allow lifts it).
	ReadAll, WriteAll bool
	Guard             []string
	Allow             []string
	Write             []string
}

// Lister lists a directory's entries, as os.ReadDir does.
type Lister func(dir string) ([]fs.DirEntry, error)

// Plan returns the path rules that grant what p allows, for the rights in
// handled. Landlock only grants, beneath a path: to keep a worker out of
// ~/.ssh while it reads the rest of $HOME, each directory on the way to a
// guarded path gets no rule of its own, and each of its other entries gets
// one. So in $HOME (and in /, and in ~/.config, ...) a worker cannot list
// the directory or create a new entry in it; an entry created there after
// the worker started is out of its reach. Symbolic links get no rule: what
// they point to is reached by its own path. Guard, Allow and Write are
// made absolute and clean, with symbolic links resolved; a guarded or
// allowed path that does not exist is dropped.
func Plan(p Policy, handled uint64, list Lister) []PathRule {
	rules, _ := planOf(p, handled, list)
	return rules
}

// planOf is Plan; linked reports that a path of p it resolved exists
// through a symbolic link (or as a dangling one).
func planOf(p Policy, handled uint64, list Lister) (rules []PathRule, linked bool) {
	if list == nil {
		list = os.ReadDir
	}
	guard := resolveAll(p.Guard, &linked)
	allow := resolveAll(p.Allow, &linked)
	if p.ReadAll && p.WriteAll {
		return plan(rules, marksOf(guard, allow, nil), true, (FSRead|FSWrite)&handled, list), linked
	}
	if p.ReadAll {
		rules = plan(rules, marksOf(guard, allow, nil), true, FSRead&handled, list)
	}
	write := resolveAll(p.Write, &linked)
	switch {
	case p.WriteAll:
		rules = plan(rules, marksOf(guard, allow, nil), true, FSWrite&handled, list)
	case len(write) > 0:
		// Allow lifts a guard, but grants writing only where Write does.
		rules = plan(rules, marksOf(slices.DeleteFunc(slices.Clone(guard), func(g string) bool { return slices.Contains(allow, g) }), nil, write), false, FSWrite&handled, list)
	}
	return merge(rules), linked
}

// merge folds the rules on one path into one, in the order of their first.
func merge(rules []PathRule) []PathRule {
	at := map[string]int{}
	out := rules[:0]
	for _, r := range rules {
		if i, ok := at[string(r.Path)]; ok {
			out[i].Access |= r.Access
			continue
		}
		at[string(r.Path)] = len(out)
		out = append(out, r)
	}
	return out
}

// marksOf maps each path to whether it is granted: guards denied, allowed
// and written paths granted; an allowed path wins over a guard of the same
// path, a guard over a written one.
func marksOf(guard, allow, write []string) map[string]bool {
	m := map[string]bool{}
	for _, w := range write {
		m[w] = true
	}
	for _, g := range guard {
		m[g] = false
	}
	for _, a := range allow {
		m[a] = true
	}
	return m
}

// plan appends the rules granting rights beneath every path that marks and
// the root's grant leave granted, walking down only where a mark lies
// beneath.
func plan(rules []PathRule, marks map[string]bool, rootGranted bool, rights uint64, list Lister) []PathRule {
	if rights == 0 {
		return rules
	}
	keys := make([]string, 0, len(marks))
	for k := range marks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	below := func(dir string) bool {
		prefix := dir + string(filepath.Separator)
		if dir == string(filepath.Separator) {
			prefix = dir
		}
		i := sort.SearchStrings(keys, prefix)
		return i < len(keys) && strings.HasPrefix(keys[i], prefix)
	}
	var visit func(path string, granted, isDir bool)
	visit = func(path string, granted, isDir bool) {
		if !isDir || !below(path) {
			if granted && !isDir {
				rules = append(rules, PathRule{Path: []byte(path), Access: rights & FSFile, File: true})
			} else if granted {
				rules = append(rules, PathRule{Path: []byte(path), Access: rights})
			}
			return
		}
		if !granted {
			// Nothing here is granted but beneath the marks: go straight
			// to the outermost ones, without listing (/tmp may hold
			// thousands of entries).
			for _, m := range outermost(keys, path) {
				if st, err := os.Lstat(m); err == nil && st.Mode()&fs.ModeSymlink == 0 {
					visit(m, marks[m], st.IsDir())
				}
			}
			return
		}
		entries, err := list(path)
		if err != nil {
			return // nothing beneath a directory it cannot list is granted
		}
		for _, e := range entries {
			if e.Type()&fs.ModeSymlink != 0 {
				continue
			}
			child := filepath.Join(path, e.Name())
			g, ok := marks[child]
			if !ok {
				g = granted
			}
			visit(child, g, e.IsDir())
		}
	}
	visit(string(filepath.Separator), rootGranted, true)

	return rules
}

// outermost returns the paths of sorted beneath dir that no other path of
// sorted beneath dir contains.
func outermost(sorted []string, dir string) []string {
	prefix := dir + string(filepath.Separator)
	if dir == string(filepath.Separator) {
		prefix = dir
	}
	var out []string
	for i := sort.SearchStrings(sorted, prefix); i < len(sorted) && strings.HasPrefix(sorted[i], prefix); i++ {
		inner := false
		for _, o := range out { // not only the last: "a b" sorts between "a" and "a/c"
			inner = inner || strings.HasPrefix(sorted[i], o+string(filepath.Separator))
		}
		if !inner {
			out = append(out, sorted[i])
		}
	}
	return out
}

// resolveAll returns paths absolute, clean, with symbolic links resolved,
// without duplicates; a path that does not exist is dropped. A path whose
// link target differs is kept under both names: the literal name for the
// directories on its way, the target for what it reaches. It sets *linked
// when a path exists through a link, or is a dangling one.
func resolveAll(paths []string, linked *bool) []string {
	var out []string
	add := func(p string) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if _, err := os.Lstat(abs); err != nil {
			continue // most guarded paths do not exist: one call to learn it
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			*linked = true
			continue
		}
		*linked = *linked || real != abs
		add(real)
		if real != abs {
			add(abs)
		}
	}
	return out
}
