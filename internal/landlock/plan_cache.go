package landlock

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A dirStamp identifies a directory and the last change to its entries:
// its device and inode, and its status change time (ctime), which the
// kernel moves whenever an entry is created, removed or renamed in it and
// whenever its mode changes, and which no process can set.
type dirStamp struct {
	dev, ino uint64
	ctime    int64 // nanoseconds since the epoch
}

// planMargin is how long before a plan began every directory it rests on
// must have last changed for the plan to be kept: on a kernel whose file
// timestamps move once a clock tick, a change made in the tick a directory
// was stamped in would leave its ctime as it was (the second plan does not
// see such a change either). Tests shorten it.
var planMargin = time.Second

// planCacheMax bounds the policies remembered: past it those seen once
// are forgotten, then every one.
const planCacheMax = 32

// A keptPlan is a plan and what it rests on: the directories it listed or
// looked a path up in, and their stamps taken after the plan.
type keptPlan struct {
	rules  []PathRule
	dirs   []string
	stamps []dirStamp
}

var plans struct {
	sync.Mutex
	m    map[string]*keptPlan
	hits int // for tests
}

// CachedPlan is Plan over the file system, reusing an earlier plan of the
// same policy and rights while every directory that plan rests on is the
// same directory, unchanged (its dirStamp): a stat of each of a dozen
// directories instead of a walk that lists the ones on the way to every
// guarded path and resolves each guarded path's links. The plan must be
// the same as Plan's: no stale plan may grant what a fresh one would not.
// A plan rests on the directories it listed and on every directory on the
// way to each path of the policy (a guarded path created since is an
// entry created in one of them; a link on the way retargeted is another
// directory at that path, or an entry replaced in one of them).
//
// A plan is kept only for a policy planned before (a policy naming the
// run's own directory never comes again), after a second plan made once
// its directories were stamped gives the same rules from the same
// listings, with the stamps unchanged after it: so the rules kept are
// those of the state the stamps show, whatever a clock did. A policy with
// a relative path, or one of whose paths exists through a link, is planned
// every time, as is any plan on a system without stamps.
//
// The rules returned are the caller's; their paths are shared and must
// not be changed.
func CachedPlan(p Policy, handled uint64) []PathRule {
	key, ok := planKey(p, handled)
	if !ok {
		return Plan(p, handled, nil)
	}
	plans.Lock()
	kept, seen := plans.m[key]
	plans.Unlock()
	if kept != nil && kept.fresh() {
		plans.Lock()
		plans.hits++
		plans.Unlock()
		return slices.Clone(kept.rules)
	}
	begun := time.Now()
	rules, listed, linked := planListing(p, handled)
	kept = nil
	if seen && !linked {
		if planHook != nil {
			planHook()
		}
		kept = keep(rules, restsOn(p, listed), begun)
	}
	if kept != nil {
		again, relisted, linked := planListing(p, handled)
		if linked || !slices.Equal(relisted, listed) || !sameRules(again, rules) || !kept.fresh() {
			kept = nil
		}
	}
	plans.Lock()
	if _, ok := plans.m[key]; !ok && len(plans.m) >= planCacheMax {
		// Policies seen once go first (each workspace dispatch's is
		// one), then the rest.
		maps.DeleteFunc(plans.m, func(_ string, k *keptPlan) bool { return k == nil })
		if len(plans.m) >= planCacheMax {
			clear(plans.m)
		}
	}
	if plans.m == nil {
		plans.m = map[string]*keptPlan{}
	}
	plans.m[key] = kept // nil: seen, not kept
	plans.Unlock()
	return slices.Clone(rules)
}

// planHook, when set (tests), runs between a plan and its stamps.
var planHook func()

// planListing is planOf over the file system, with the directories it
// listed, in order.
func planListing(p Policy, handled uint64) (rules []PathRule, listed []string, linked bool) {
	rules, linked = planOf(p, handled, func(dir string) ([]fs.DirEntry, error) {
		listed = append(listed, dir)
		return os.ReadDir(dir)
	})
	return rules, listed, linked
}

// sameRules reports whether a and b are the same rules in the same order.
func sameRules(a, b []PathRule) bool {
	return slices.EqualFunc(a, b, func(x, y PathRule) bool {
		return string(x.Path) == string(y.Path) && x.Access == y.Access && x.File == y.File
	})
}

// planKey is the cache's key for p and handled; ok is false for a policy
// with a relative path (its meaning depends on the working directory).
func planKey(p Policy, handled uint64) (key string, ok bool) {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(handled, 16))
	b.WriteString(strconv.FormatBool(p.ReadAll))
	b.WriteString(strconv.FormatBool(p.WriteAll))
	for _, list := range [][]string{p.Guard, p.Allow, p.Write} {
		b.WriteByte(1)
		for _, path := range list {
			if path != "" && !filepath.IsAbs(path) {
				return "", false
			}
			b.WriteString(path)
			b.WriteByte(0)
		}
	}
	return b.String(), true
}

// restsOn lists the directories a plan of p that listed listed rests on:
// those, and every directory on the way to each path of p.
func restsOn(p Policy, listed []string) []string {
	dirs := slices.Clone(listed)
	for _, list := range [][]string{p.Guard, p.Allow, p.Write} {
		for _, path := range list {
			if path == "" {
				continue
			}
			for dir := filepath.Dir(filepath.Clean(path)); ; dir = filepath.Dir(dir) {
				dirs = append(dirs, dir)
				if dir == filepath.Dir(dir) {
					break
				}
			}
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// keep returns rules as a keptPlan resting on dirs, stamped now, or nil
// when it cannot be kept: a directory that cannot be stamped, or one
// that changed less than planMargin before the plan began. A directory
// on the way that does not exist is left out: its parent's stamp moves
// when it is created.
func keep(rules []PathRule, dirs []string, begun time.Time) *keptPlan {
	k := &keptPlan{rules: rules}
	limit := begun.Add(-planMargin).UnixNano()
	for _, d := range dirs {
		s, err := stampOf(d)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil
		}
		if s.ctime >= limit {
			return nil
		}
		k.dirs = append(k.dirs, d)
		k.stamps = append(k.stamps, s)
	}
	return k
}

// fresh reports whether every directory k rests on is as k stamped it.
func (k *keptPlan) fresh() bool {
	for i, d := range k.dirs {
		if s, err := stampOf(d); err != nil || s != k.stamps[i] {
			return false
		}
	}
	return true
}
