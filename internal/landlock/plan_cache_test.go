package landlock

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// withMargin sets planMargin for a test and empties the cache.
func withMargin(t *testing.T, d time.Duration) {
	t.Helper()
	old := planMargin
	planMargin = d
	plans.Lock()
	plans.m = nil
	plans.Unlock()
	t.Cleanup(func() { planMargin = old })
}

func hits() int {
	plans.Lock()
	defer plans.Unlock()
	return plans.hits
}

// nextTick returns once the clock is well past since, so that a change
// made now gets a ctime no stamp taken before since holds, even where
// file timestamps move once a clock tick.
func nextTick(since time.Time) {
	for time.Since(since) < 20*time.Millisecond {
		time.Sleep(time.Millisecond)
	}
}

// covered reports whether a rule grants path: a rule on it or on a
// directory above it.
func covered(rules []PathRule, path string) bool {
	for _, r := range rules {
		p := string(r.Path)
		if p == path || strings.HasPrefix(path, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

// checkCached plans p with CachedPlan and fails unless its rules beneath
// home are a fresh Plan's (only beneath home: other tests change /tmp
// meanwhile) and it grants none of guarded that exists. step names the
// moment in the messages.
func checkCached(t *testing.T, step, home string, p Policy, handled uint64, guarded ...string) {
	t.Helper()
	got := CachedPlan(p, handled)
	if diff := cmp.Diff(rulesUnder(home, Plan(p, handled, nil)), rulesUnder(home, got)); diff != "" {
		t.Fatalf("%s: CachedPlan differs from Plan (-fresh +kept):\n%s", step, diff)
	}
	for _, g := range guarded {
		if _, err := os.Lstat(g); err == nil && covered(got, g) {
			t.Fatalf("%s: the plan grants guarded %s", step, g)
		}
	}
}

// TestCachedPlanIsPlanAsTheTreeChanges changes a home directory as a user
// (or a worker) might between dispatches and checks, after each change,
// that the kept plan is the fresh one and grants no guarded path: a
// guarded path created in a directory an earlier plan granted whole, one
// created with its parents, an entry removed, renamed, and a directory
// replaced by a link.
func TestCachedPlanIsPlanAsTheTreeChanges(t *testing.T) {
	withMargin(t, 0)
	home := tree(t, "a/", "b.txt", ".config/x/", ".config/y.txt", ".codex/auth.json", "other/")
	guards := []string{".config/gh", ".ssh", ".codex", "deep/er/cred", ".config/x/token"}
	p := Policy{ReadAll: true, WriteAll: true}
	for _, g := range guards {
		p.Guard = append(p.Guard, filepath.Join(home, g))
	}
	handled := FSRights(5)
	check := func(step string) time.Time {
		t.Helper()
		checkCached(t, step, home, p, handled, p.Guard...)
		return time.Now()
	}
	mark := check("first plan")
	before := hits()
	mark = check("unchanged")
	if runtime.GOOS == "linux" && hits() == before {
		// Another process may have changed a directory on the way (/tmp)
		// between the two; it cannot do so every time.
		for range 20 {
			before = hits()
			if check("unchanged"); hits() > before {
				break
			}
		}
		if hits() == before {
			t.Fatal("an unchanged tree's plan was never reused")
		}
	}
	for _, c := range []struct {
		step   string
		change func() error
	}{
		{"a guarded path created where the plan granted all", func() error {
			return os.WriteFile(filepath.Join(home, ".config/gh"), []byte("token"), 0o600)
		}},
		{"a guarded file created in a guarded path's sibling", func() error {
			return os.WriteFile(filepath.Join(home, ".config/x/token"), []byte("token"), 0o600)
		}},
		{"a guarded path created with its parents", func() error {
			if err := os.MkdirAll(filepath.Join(home, "deep/er"), 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(home, "deep/er/cred"), []byte("token"), 0o600)
		}},
		{"a guarded directory created", func() error { return os.Mkdir(filepath.Join(home, ".ssh"), 0o700) }},
		{"a guarded directory removed", func() error { return os.RemoveAll(filepath.Join(home, ".codex")) }},
		{"an entry renamed", func() error { return os.Rename(filepath.Join(home, "a"), filepath.Join(home, "a2")) }},
		{"an entry created", func() error { return os.Mkdir(filepath.Join(home, "new"), 0o700) }},
		{"a directory on the way replaced by a link", func() error {
			moved := filepath.Join(home, "other/config")
			if err := os.Rename(filepath.Join(home, ".config"), moved); err != nil {
				return err
			}
			return os.Symlink(moved, filepath.Join(home, ".config"))
		}},
		{"the link retargeted", func() error {
			if err := os.MkdirAll(filepath.Join(home, "third/gh"), 0o700); err != nil {
				return err
			}
			tmp := filepath.Join(home, "link.tmp")
			if err := os.Symlink(filepath.Join(home, "third"), tmp); err != nil {
				return err
			}
			return os.Rename(tmp, filepath.Join(home, ".config"))
		}},
	} {
		nextTick(mark)
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.step, err)
		}
		check(c.step)
		mark = check(c.step + ", planned again")
	}
}

// TestCachedPlanFollowsALinkChain retargets a link in the middle of a
// guarded path's chain, in a directory no plan lists nor passes through:
// the plan must guard the new target.
func TestCachedPlanFollowsALinkChain(t *testing.T) {
	withMargin(t, 0)
	home := tree(t, "a/", "other/", "third1/secret", "third2/secret")
	link := func(target, at string) {
		t.Helper()
		// Made beside where it goes, so that only that directory changes.
		tmp := filepath.Join(home, filepath.Dir(at), "link.tmp")
		if err := os.Symlink(filepath.Join(home, target), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(home, at)); err != nil {
			t.Fatal(err)
		}
	}
	link("third1/secret", "other/l2")
	link("other/l2", ".key")
	p := Policy{ReadAll: true, WriteAll: true, Guard: []string{filepath.Join(home, ".key")}}
	handled := FSRights(5)
	// secret is where the guarded link leads.
	check := func(step, secret string) time.Time {
		t.Helper()
		checkCached(t, step, home, p, handled, filepath.Join(home, secret))
		return time.Now()
	}
	check("first plan", "third1/secret")
	nextTick(check("again", "third1/secret"))

	link("third2/secret", "other/l2")
	check("the chain's middle link retargeted", "third2/secret")
}

// TestCachedPlanChecksItsStampsWithASecondPlan makes a guarded path
// between a plan and its stamps, as a stepped clock would hide from the
// margin: the stamps then show the change the plan missed, and only the
// second plan, made after them, can tell.
func TestCachedPlanChecksItsStampsWithASecondPlan(t *testing.T) {
	withMargin(t, 0)
	home := tree(t, "a/", ".config/y.txt")
	gh := filepath.Join(home, ".config/gh")
	p := Policy{ReadAll: true, WriteAll: true, Guard: []string{gh}}
	handled := FSRights(5)
	CachedPlan(p, handled) // seen
	planHook = func() {
		planHook = nil
		if err := os.WriteFile(gh, []byte("token"), 0o600); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { planHook = nil })
	CachedPlan(p, handled) // the change comes between its plan and its stamps
	checkCached(t, "after a guarded path made while the plan was made", home, p, handled, gh)
}

// TestCachedPlanKeepsOnlyAPolicySeenBefore: a policy's first plan is not
// kept (a policy naming the run's own directory never comes again, and
// keeping costs a second plan), its second is.
func TestCachedPlanKeepsOnlyAPolicySeenBefore(t *testing.T) {
	withMargin(t, 0)
	home := tree(t, "a/", ".ssh/")
	p := Policy{ReadAll: true, Guard: []string{filepath.Join(home, ".ssh")}}
	key, _ := planKey(p, FSRead)
	keptOf := func() (*keptPlan, bool) {
		plans.Lock()
		defer plans.Unlock()
		k, seen := plans.m[key]
		return k, seen
	}
	CachedPlan(p, FSRead)
	if k, seen := keptOf(); !seen || k != nil {
		t.Fatalf("after a first plan: kept %v, seen %v; want seen, not kept", k != nil, seen)
	}
	for range 20 {
		// Another process may change a directory on the way (/tmp)
		// during the second plan; it cannot do so every time.
		if CachedPlan(p, FSRead); func() bool { k, _ := keptOf(); return k != nil }() {
			return
		}
	}
	t.Fatal("a policy planned again was never kept")
}

// TestCachedPlanForgetsPoliciesSeenOnceFirst: policies planned once (a
// workspace dispatch's, naming its run's directory) fill the cache, and a
// kept plan outlives them.
func TestCachedPlanForgetsPoliciesSeenOnceFirst(t *testing.T) {
	withMargin(t, 0)
	home := tree(t, "a/", ".ssh/")
	p := Policy{ReadAll: true, Guard: []string{filepath.Join(home, ".ssh")}}
	key, _ := planKey(p, FSRead)
	kept := func() bool {
		plans.Lock()
		defer plans.Unlock()
		return plans.m[key] != nil
	}
	for i := 0; !kept(); i++ {
		if i == 20 {
			t.Fatal("the policy's plan was never kept")
		}
		CachedPlan(p, FSRead)
	}
	for i := range 3 * planCacheMax {
		once := Policy{ReadAll: true, Guard: []string{filepath.Join(home, ".ssh")}, Write: []string{filepath.Join(home, "run"+strconv.Itoa(i))}}
		CachedPlan(once, FSRead)
	}
	if !kept() {
		t.Error("policies seen once pushed a kept plan out")
	}
	plans.Lock()
	n := len(plans.m)
	plans.Unlock()
	if n > planCacheMax {
		t.Errorf("%d policies remembered, want at most %d", n, planCacheMax)
	}
}

// TestCachedPlanKeepsNoPlanOfAFreshChange checks the margin: a plan
// resting on a directory changed just before it began is not kept, for its
// listing may have missed a change made in the same tick.
func TestCachedPlanKeepsNoPlanOfAFreshChange(t *testing.T) {
	withMargin(t, time.Hour)
	home := tree(t, "a/", ".ssh/")
	p := Policy{ReadAll: true, Guard: []string{filepath.Join(home, ".ssh")}}
	CachedPlan(p, FSRead)
	before := hits()
	CachedPlan(p, FSRead)
	if hits() != before {
		t.Fatal("a plan resting on a directory changed a moment ago was reused")
	}
}

// TestPlanKeyRefusesRelativePaths: a relative path means another thing in
// another working directory, so its policy is never kept.
func TestPlanKeyRefusesRelativePaths(t *testing.T) {
	if _, ok := planKey(Policy{Guard: []string{"/a", "b"}}, FSRead); ok {
		t.Error("planKey accepted a relative guarded path")
	}
	k1, _ := planKey(Policy{Guard: []string{"/a"}, Allow: []string{"/b"}}, FSRead)
	k2, _ := planKey(Policy{Guard: []string{"/a", "/b"}}, FSRead)
	k3, _ := planKey(Policy{Guard: []string{"/a"}, Allow: []string{"/b"}}, FSRead|FSWrite)
	if k1 == k2 || k1 == k3 {
		t.Errorf("distinct policies share a key: %q %q %q", k1, k2, k3)
	}
}
