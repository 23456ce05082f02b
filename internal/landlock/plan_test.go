package landlock

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree makes the files (and, for names ending in "/", directories) beneath
// a temporary root and returns the root, with symbolic links resolved.
func tree(t *testing.T, names ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := filepath.Join(root, n)
		if strings.HasSuffix(n, "/") {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// rulesUnder returns the rules beneath root as "relative path=access"
// strings, sorted, with access as FSRead ("r"), FSWrite ("w") or both.
func rulesUnder(root string, rules []PathRule) []string {
	var out []string
	for _, r := range rules {
		p := string(r.Path)
		rel, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		acc := ""
		if r.Access&FSRead != 0 {
			acc += "r"
		}
		if r.Access&FSWrite != 0 {
			acc += "w"
		}
		out = append(out, rel+"="+acc)
	}
	sort.Strings(out)
	return out
}

func TestPlanGrantsEverySiblingOfAGuardedPath(t *testing.T) {
	root := tree(t, "home/.ssh/id_ed25519", "home/.bashrc", "home/projects/a.go",
		"home/.config/pilot/credentials/glm", "home/.config/pilot/providers.json", "home/.config/git/config",
		"home/.codex/auth.json", "work/")
	home := filepath.Join(root, "home")
	if err := os.Symlink(filepath.Join(home, ".ssh"), filepath.Join(home, "keys")); err != nil {
		t.Fatal(err)
	}
	guard := []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".config/pilot/credentials"),
		filepath.Join(home, ".codex"), filepath.Join(home, ".aws")} // .aws does not exist
	all := FSRead | FSWrite
	tests := []struct {
		name string
		p    Policy
		want []string
	}{{
		name: "secrets",
		p:    Policy{ReadAll: true, WriteAll: true, Guard: guard},
		want: []string{
			"home/.bashrc=rw", "home/.config/git=rw", "home/.config/pilot/providers.json=rw",
			"home/projects=rw", "work=rw",
		},
	}, {
		name: "secrets, the guard lifted from .codex",
		p:    Policy{ReadAll: true, WriteAll: true, Guard: guard, Allow: []string{filepath.Join(home, ".codex")}},
		want: []string{
			"home/.bashrc=rw", "home/.codex=rw", "home/.config/git=rw", "home/.config/pilot/providers.json=rw",
			"home/projects=rw", "work=rw",
		},
	}, {
		name: "workspace: writes beneath work and the home's projects only",
		p:    Policy{ReadAll: true, Guard: guard, Write: []string{filepath.Join(root, "work"), filepath.Join(home, "projects")}},
		want: []string{
			"home/.bashrc=r", "home/.config/git=r", "home/.config/pilot/providers.json=r",
			"home/projects=rw", "work=rw",
		},
	}, {
		name: "workspace with the home as workdir: its guards stay guarded",
		p:    Policy{ReadAll: true, Guard: guard, Write: []string{home}},
		want: []string{
			"home/.bashrc=rw", "home/.config/git=rw", "home/.config/pilot/providers.json=rw",
			"home/projects=rw", "work=r",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rulesUnder(root, Plan(tt.p, all, nil))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rules beneath the root (-want +got):\n%s", diff)
			}
		})
	}
}

// No rule lies on a guarded path, beneath one, or on a directory on the
// way to one (which would grant everything beneath it), whatever the
// policy.
func TestPlanNeverGrantsAGuardedPath(t *testing.T) {
	root := tree(t, "a/b/c/secret", "a/b/d", "a/e/", "f")
	guard := []string{filepath.Join(root, "a/b/c")}
	for _, p := range []Policy{
		{ReadAll: true, WriteAll: true, Guard: guard},
		{ReadAll: true, Guard: guard, Write: []string{root, filepath.Join(root, "a")}},
	} {
		for _, r := range Plan(p, FSRead|FSWrite, nil) {
			path := string(r.Path)
			if path == "/" || strings.HasPrefix(guard[0], path+"/") || path == guard[0] || strings.HasPrefix(path, guard[0]+"/") {
				t.Errorf("policy %+v: rule on %s grants the guarded %s", p, path, guard[0])
			}
		}
	}
}

func TestFSRightsByABI(t *testing.T) {
	for abi, want := range map[int]uint64{0: 0, 1: 0x1fff, 2: 0x3fff, 3: 0x7fff, 4: 0x7fff, 5: 0xffff, 7: 0xffff} {
		if got := FSRights(abi); got != want {
			t.Errorf("FSRights(%d) = %#x, want %#x", abi, got, want)
		}
	}
}

func TestOutermost(t *testing.T) {
	sorted := []string{"/x/a", "/x/a b", "/x/a/c", "/x/b", "/y"}
	if diff := cmp.Diff([]string{"/x/a", "/x/a b", "/x/b"}, outermost(sorted, "/x")); diff != "" {
		t.Errorf("outermost beneath /x (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/x/a", "/x/a b", "/x/b", "/y"}, outermost(sorted, "/")); diff != "" {
		t.Errorf("outermost beneath / (-want +got):\n%s", diff)
	}
}
