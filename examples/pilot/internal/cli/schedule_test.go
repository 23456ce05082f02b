package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/sandbox"
)

func (f fixture) writeGraph(t *testing.T, jobs ...map[string]any) string {
	t.Helper()
	path := filepath.Join(f.dir, "graph.json")
	data, err := json.Marshal(map[string]any{"jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (f fixture) scheduleArgs(graph string, extra ...string) []string {
	return append([]string{"schedule", "--graph", graph, "--workdir", f.workdir, "--providers-file", f.providers,
		"--run-dir", f.runDir, "--state", filepath.Join(f.dir, "state")}, extra...)
}

func gjob(id, provider string, f fixture, deps ...string) map[string]any {
	return map[string]any{"id": id, "provider": provider, "mode": "code", "task_file": f.taskFile, "deps": deps}
}

// schedule prints one JSON array in graph order, each verdict with its id
// and status, waiting_on where it applies; exit 1 when any job did not
// complete.
func TestScheduleRunsAGraph(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}, "bad": {"err=boom", "exit=1"}})
	graph := f.writeGraph(t, gjob("a", "ok", f), gjob("b", "ok", f, "a"), gjob("c", "bad", f), gjob("d", "ok", f, "c"))
	code, out, errOut := runCLI(f.scheduleArgs(graph)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		t.Fatalf("stdout is not one JSON array: %v\n%s", err, out)
	}
	type row struct {
		ID, Status, Verdict, Waiting, Why string
		Attempts                          float64
	}
	var got []row
	for _, v := range vs {
		w, _ := json.Marshal(v["waiting_on"])
		why, _ := v["waiting_reason"].(string)
		n, _ := v["attempts"].(float64)
		got = append(got, row{v["id"].(string), v["status"].(string), v["verdict"].(string), string(w), why, n})
	}
	want := []row{
		{"a", "complete", "completed", "null", "", 1},
		{"b", "complete", "completed", "null", "", 1},
		{"c", "failed", "error", "null", "", 1},
		{"d", "waiting", "error", `["c"]`, "waiting on c because c failed", 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if vs[3]["synthesized"] != true {
		t.Errorf("d never ran: its verdict must be synthesized: %v", vs[3])
	}
	// Off a terminal, each job that ran ends in one line on stderr.
	ends := regexp.MustCompile(`(?m)^pilot schedule: ([a-d]) \((ok|bad):code\): (completed|error \(generic-error\)) after \d+s$`).FindAllStringSubmatch(errOut, -1)
	var ended []string
	for _, m := range ends {
		ended = append(ended, m[1]+" "+m[3])
	}
	sort.Strings(ended)
	if diff := cmp.Diff([]string{"a completed", "b completed", "c error (generic-error)"}, ended); diff != "" {
		t.Errorf("end lines (-want +got):\n%s\nstderr:\n%s", diff, errOut)
	}
	// A second run picks up where the first stopped: a and b are not run
	// again.
	runs, _ := os.ReadDir(f.runDir)
	code, out, _ = runCLI(f.scheduleArgs(graph)...)
	again, _ := os.ReadDir(f.runDir)
	if code != 1 || len(again)-len(runs) != 1 {
		t.Errorf("second run: exit %d, %d new runs (want 1: c again)\n%s", code, len(again)-len(runs), out)
	}
}

// --memory-budget bounds schedule as it does fanout: under a budget no
// job's expected peak fits, one job runs at a time, and all complete.
func TestScheduleMemoryBudgetRunsOneAtATime(t *testing.T) {
	f := newFixture(t, nil)
	log := filepath.Join(f.dir, "overlap.log")
	script := fmt.Sprintf("echo start $$ >> '%s'; sleep 0.02; echo end $$ >> '%s'; echo done", log, log)
	writeProviders(t, f.providers, map[string]map[string]any{
		"sh": {"runner": "command", "argv": []string{"/bin/sh", "-c", script}},
	})
	graph := f.writeGraph(t, gjob("a", "sh", f), gjob("b", "sh", f), gjob("c", "sh", f))
	code, out, errOut := runCLI(f.scheduleArgs(graph, "--memory-budget", "1MiB")...)
	if code != 0 {
		t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	running, most := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(l, "start") {
			running++
		} else {
			running--
		}
		most = max(most, running)
	}
	if most != 1 || strings.Count(string(data), "start") != 3 {
		t.Errorf("log %q: want 3 runs, one at a time", data)
	}
}

// with sets one field of a graph job.
func with(j map[string]any, field string, v any) map[string]any {
	j[field] = v
	return j
}

// Bad input exits 2 with a message naming the problem, after one prefix
// ("pilot schedule: ", never "pilot schedule: schedule: " or ": pilot: "),
// and runs nothing.
func TestScheduleBadGraphExits2(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	badState := filepath.Join(f.dir, "bad-state")
	os.MkdirAll(badState, 0o755)
	os.WriteFile(filepath.Join(badState, "schedule.json"), []byte("not json"), 0o644)
	for _, tt := range []struct {
		name  string
		jobs  []map[string]any
		extra []string
		want  string
	}{
		{"unknown field", []map[string]any{with(gjob("a", "ok", f), "dependencies", []string{})}, nil,
			`unknown field "dependencies" (a graph is {"jobs": [...]}, a job has id, provider, mode, task_file, deps, write_set, worktree, sandbox, timeout, idle_timeout, max_tokens, max_cost_usd, estimate)`},
		{"cycle", []map[string]any{gjob("a", "ok", f, "b"), gjob("b", "ok", f, "a")}, nil, "pilot schedule: the graph is not valid: the dependencies have a cycle: a -> b -> a"},
		{"unknown dep", []map[string]any{gjob("a", "ok", f, "zz")}, nil, `depends on "zz"`},
		{"unknown provider", []map[string]any{gjob("a", "nobody", f)}, nil, "pilot schedule: job a: unknown provider: nobody"},
		{"missing field", []map[string]any{{"id": "a", "provider": "ok"}}, nil, "job 1 lacks mode, task_file"},
		{"negative timeout", []map[string]any{with(gjob("a", "ok", f), "timeout", "-5")}, nil, `job a: timeout: want a positive duration (30s, 5m, or seconds), got "-5"`},
		{"zero idle_timeout", []map[string]any{with(gjob("a", "ok", f), "idle_timeout", 0)}, nil, `job a: idle_timeout: want a positive duration (30s, 5m, or seconds), got "0"`},
		{"idle_timeout not a duration", []map[string]any{with(gjob("a", "ok", f), "idle_timeout", "soon")}, nil, `job a: idle_timeout: want a positive duration (30s, 5m, or seconds), got "soon"`},
		{"timeout of the wrong type", []map[string]any{with(gjob("a", "ok", f), "timeout", true)}, nil, `timeout and idle_timeout take a number of seconds or a duration such as "30s", got true`},
		{"bad --timeout", []map[string]any{gjob("a", "ok", f)}, []string{"--timeout", "soon"}, `pilot schedule: --timeout: want a positive duration (30s, 5m, or seconds), got "soon"`},
		{"bad --idle-timeout", []map[string]any{gjob("a", "ok", f)}, []string{"--idle-timeout", "0"}, `pilot schedule: --idle-timeout: want a positive duration`},
		{"state file not a store", []map[string]any{gjob("a", "ok", f)}, []string{"--state", badState}, "pilot schedule: state file " + filepath.Join(badState, "schedule.json") + " is not a schedule store"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(f.scheduleArgs(f.writeGraph(t, tt.jobs...), tt.extra...)...)
			if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and a message saying %q", code, out, errOut, tt.want)
			}
			if !strings.HasPrefix(errOut, "pilot schedule: ") || strings.Contains(errOut, ": schedule: ") || strings.Contains(errOut, ": pilot: ") || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stderr %q; want one line with one prefix, pilot schedule: ", errOut)
			}
			if entries, _ := os.ReadDir(f.runDir); len(entries) > 0 {
				t.Errorf("something ran: %d run dirs", len(entries))
			}
		})
	}
}

// A graph file that is not JSON says where; one that is an array says
// what a graph is.
func TestScheduleGraphFileErrorsSayWhere(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	for _, tt := range []struct{ name, content, want string }{
		{"comma too many", "{\"jobs\": [\n  {\"id\": \"a\",}\n]}", "line 2, column 14: invalid character '}'"},
		{"unclosed", "{\"jobs\": [\n", "the JSON ends too early"},
		{"an array", `[{"id": "a"}]`, `is a JSON array: a graph is an object, {"jobs": [...]}`},
		{"wrong type", "{\"jobs\": [\n  {\"id\": 7}]}", "line 2, column 10: json: cannot unmarshal number"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "graph.json")
			os.WriteFile(path, []byte(tt.content), 0o644)
			code, _, errOut := runCLI(f.scheduleArgs(path)...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.want)
			}
		})
	}
}

// A dry run prints the plan, with normalized write sets, and writes nothing.
func TestScheduleDryRunWritesNothing(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	a := gjob("a", "ok", f)
	a["write_set"] = []string{"./src/x.go"}
	b := gjob("b", "ok", f, "a")
	b["write_set"] = []string{"src/"}
	code, out, errOut := runCLI(f.scheduleArgs(f.writeGraph(t, a, b), "--dry-run")...)
	if code != 0 || !strings.Contains(out, `"write_set_known":false`) || !strings.Contains(out, filepath.Join("src", "x.go")) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	for _, d := range []string{f.runDir, filepath.Join(f.dir, "state")} {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a dry run created %s", d)
		}
	}
}

// FuzzLoadGraph: any graph file is read or refused with a message, never a
// panic; a graph that is read has every job's required fields.
func FuzzLoadGraph(f *testing.F) {
	f.Add([]byte(`{"jobs":[{"id":"a","provider":"p","mode":"code","task_file":"t.md","deps":["b"],"write_set":["x"],"worktree":true}]}`))
	f.Add([]byte(`{"jobs":[{"id":"a","provider":"p","mode":"code","task_file":"t.md","sandbox":"strict"}]}`))
	f.Add([]byte(`{"jobs":[{"id":"a","provider":"p","mode":"code","task_file":"t.md","sandbox":"jail"}]}`))
	f.Add([]byte(`{"jobs":[{"id":"a","bogus":1}]}`))
	f.Add([]byte(`{"jobs":[]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "graph.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		jobs, err := loadGraph(path)
		if err != nil {
			if !strings.Contains(err.Error(), "graph file") {
				t.Errorf("error %q does not say it is the graph file", err)
			}
			return
		}
		for _, j := range jobs {
			if j.ID == "" || j.Provider == "" || j.Mode == "" || j.TaskFile == "" {
				t.Errorf("a job lacks a required field: %+v", j)
			}
			if _, err := sandbox.ParseMode(j.Sandbox); err != nil {
				t.Errorf("a job's sandbox is no mode: %+v", j)
			}
		}
	})
}

// A worktree job runs in a git worktree of its own, even when its id is not
// a safe branch name (the default worktrees make the name safe), named
// after the job and the run: a second run, or a second pilot, never
// collides with the first.
func TestScheduleWorktreeJob(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	f.workdir = pilottest.GitRepo(t)
	j := gjob("grp/01 first", "ok", f)
	j["worktree"] = true
	graph := f.writeGraph(t, j)
	var names []string
	for run := range 2 {
		// A fresh state the second time: the job is not complete there.
		code, out, errOut := runCLI(f.scheduleArgs(graph, "--state", filepath.Join(f.dir, "state", strconv.Itoa(run)))...)
		var vs []map[string]any
		if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 1 {
			t.Fatalf("run %d: exit %d, %v\nstdout %s\nstderr %s", run+1, code, err, out, errOut)
		}
		wt, _ := vs[0]["worktree"].(map[string]any)
		name, _ := wt["name"].(string)
		if ok, _ := regexp.MatchString(`^schedule-grp-01-first-[0-9a-f]{6}$`, name); !ok {
			t.Errorf("run %d: worktree %v; want one named schedule-grp-01-first-<run>", run+1, vs[0]["worktree"])
		}
		names = append(names, name)
	}
	if names[0] == names[1] {
		t.Errorf("both runs named their worktree %s", names[0])
	}
}

// A job pilot itself could not run (here: its run directory cannot be
// made) fails as pilot-error with pilot's error as the evidence, in the
// JSON and on stderr.
func TestScheduleSynthesizedVerdictSaysWhy(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	notADir := filepath.Join(f.dir, "file")
	os.WriteFile(notADir, nil, 0o600)
	args := f.scheduleArgs(f.writeGraph(t, gjob("a", "ok", f)), "--run-dir", notADir)
	code, out, errOut := runCLI(args...)
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 1 || len(vs) != 1 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	ev, _ := vs[0]["failure_evidence_excerpt"].(string)
	if vs[0]["synthesized"] != true || vs[0]["failure_class"] != "pilot-error" || !strings.HasPrefix(ev, "pilot: ") || !strings.Contains(ev, notADir) {
		t.Errorf("verdict %v; want a synthesized pilot-error whose evidence says why the job did not run", vs[0])
	}
	if !strings.Contains(errOut, "pilot schedule: job a: "+ev) {
		t.Errorf("stderr does not say why job a failed:\n%s", errOut)
	}
}

// A worktree job in a workdir that is no git repository is refused before
// anything runs.
func TestScheduleWorktreeJobNeedsARepository(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=done"}})
	j := gjob("a", "ok", f)
	j["worktree"] = true
	code, out, errOut := runCLI(f.scheduleArgs(f.writeGraph(t, j))...)
	if code != 2 || out != "" || !strings.Contains(errOut, "is not a git repository") || !strings.Contains(errOut, f.workdir) {
		t.Errorf("exit %d\nstdout %s\nstderr %s; want exit 2 naming the workdir", code, out, errOut)
	}
}

// A job's own timeout and idle_timeout win over --timeout and
// --idle-timeout, which set the others': a silent worker ends as
// idle-timeout, and each record says the limits it ran with.
func TestScheduleJobTimeouts(t *testing.T) {
	f := newFixture(t, map[string][]string{"quiet": {"block"}})
	own := with(with(gjob("own", "quiet", f), "idle_timeout", "300ms"), "timeout", 90)
	graph := f.writeGraph(t, own, gjob("default", "quiet", f))
	code, out, errOut := runCLI(f.scheduleArgs(graph, "--idle-timeout", "0.2", "--timeout", "120")...)
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 1 || len(vs) != 2 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	type limits struct {
		ID, Status, Class    string
		Timeout, IdleTimeout float64
	}
	var got []limits
	for _, v := range vs {
		rec, err := pilot.ReadRecord(fmt.Sprint(v["record"]))
		if err != nil {
			t.Fatalf("job %v: %v", v["id"], err)
		}
		got = append(got, limits{v["id"].(string), v["status"].(string), fmt.Sprint(v["failure_class"]), rec.Timeout, rec.IdleTimeout})
	}
	want := []limits{{"own", "failed", "idle-timeout", 90, 0.3}, {"default", "failed", "idle-timeout", 120, 0.2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	// The plan says the limits each job would run with.
	code, out, _ = runCLI(f.scheduleArgs(graph, "--dry-run", "--idle-timeout", "5m")...)
	if code != 0 || !strings.Contains(out, `"id":"own"`) || !strings.Contains(out, `"timeout_s":90,"idle_timeout_s":0.3}`) || !strings.Contains(out, `"idle_timeout_s":300}`) {
		t.Errorf("--dry-run: exit %d\n%s", code, out)
	}
}

// --help names the limits' flags and the graph's fields.
func TestScheduleHelp(t *testing.T) {
	code, out, _ := runCLI("schedule", "--help")
	for _, want := range []string{"-timeout seconds", "-idle-timeout seconds", "timeout, idle_timeout, max_tokens, max_cost_usd, estimate}", "-max-cost-usd USD", `"timeout" and "idle_timeout" win over the flags`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d; the help lacks %q:\n%s", code, want, out)
		}
	}
}

// schedClock is the scheduler's clock in a test (scheduleNow,
// scheduleAfter): it starts at the real time and moves only when the
// scheduler waits, by the wait. A wait ends at once, unless the clock is
// held: then it ends when the test calls release.
type schedClock struct {
	mu    sync.Mutex
	now   time.Time
	held  chan time.Time // closed by release
	ahead time.Duration  // the longest wait asked for while held
}

func useSchedClock(t *testing.T, held bool) *schedClock {
	c := &schedClock{now: time.Now()}
	if held {
		c.held = make(chan time.Time)
	}
	scheduleNow, scheduleAfter = c.Now, c.After
	t.Cleanup(func() {
		c.release()
		scheduleNow, scheduleAfter = nil, nil
	})
	return c
}

func (c *schedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *schedClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		c.ahead = max(c.ahead, d)
		return c.held
	}
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// release ends the waits: the clock moves past the longest, and no longer
// holds.
func (c *schedClock) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		c.now = c.now.Add(c.ahead)
		close(c.held)
		c.held = nil
	}
}

// limitedProvider is a providers-file entry whose worker is rate limited
// ("429 Too Many Requests: retry after 3s") on its first n runs, then
// says done; it counts its runs in the file count.
func limitedProvider(count string, n int) map[string]any {
	script := fmt.Sprintf(`n=$(( $(cat '%[1]s' 2>/dev/null || echo 0) + 1 )); echo $n > '%[1]s'; `+
		`if [ $n -le %[2]d ]; then echo "429 Too Many Requests: retry after 3s" >&2; exit 1; fi; echo done`, count, n)
	return map[string]any{"runner": "command", "argv": []string{"/bin/sh", "-c", script}}
}

// A job its provider rate limits waits for the reset and runs again; its
// JSON counts the dispatches (attempts), and --log numbers each one's
// records, as its record does.
func TestScheduleRateLimitedJobCountsItsAttempts(t *testing.T) {
	useSchedClock(t, false)
	f := newFixture(t, nil)
	writeProviders(t, f.providers, map[string]map[string]any{"limited": limitedProvider(filepath.Join(f.dir, "count"), 2)})
	code, out, errOut := runCLI(f.scheduleArgs(f.writeGraph(t, gjob("api", "limited", f)), "--log", "json")...)
	var vs []map[string]any
	if err := json.Unmarshal([]byte(out), &vs); err != nil || code != 0 || len(vs) != 1 {
		t.Fatalf("exit %d, %v\nstdout %s\nstderr %s", code, err, out, errOut)
	}
	if v := vs[0]; v["status"] != "complete" || v["verdict"] != "completed" || v["attempts"] != 3.0 {
		t.Errorf("verdict %v; want complete after 3 attempts", v)
	}
	attempts := map[string][]float64{}
	for _, l := range strings.Split(errOut, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) != nil || rec["msg"] == nil {
			continue // the started lines, the notes
		}
		msg := rec["msg"].(string)
		n, _ := rec["attempt"].(float64)
		attempts[msg] = append(attempts[msg], n)
	}
	want := map[string][]float64{
		"worker_runner.started": {1, 2, 3}, "worker_runner.verdict": {1, 2, 3},
		"schedule.gated": {0, 0}, "schedule.selected": {0, 0, 0}, "schedule.done": {0},
	}
	if diff := cmp.Diff(want, attempts); diff != "" {
		t.Errorf("attempt of each record, by message (-want +got):\n%s\n%s", diff, errOut)
	}
	if n := strings.Count(errOut, "pilot schedule: api (limited:code): rate limit until "); n != 2 {
		t.Errorf("%d notes of the waits on stderr, want 2:\n%s", n, errOut)
	}
	rec, err := pilot.ReadRecord(vs[0]["record"].(string))
	if err != nil || rec.Attempt != 3 || rec.RetryKey != "api" || rec.PreviousRecord == "" {
		t.Fatalf("last record: attempt %d, key %q, previous %q (%v)", rec.Attempt, rec.RetryKey, rec.PreviousRecord, err)
	}
	if prev, err := pilot.ReadRecord(rec.PreviousRecord); err != nil || prev.Attempt != 2 || prev.FailureClass != pilot.FailProviderRateLimit {
		t.Errorf("the record before: attempt %d, class %q (%v)", prev.Attempt, prev.FailureClass, err)
	}
}

// TestScheduleOnATerminal runs a schedule with stderr on a
// pseudo-terminal. The live table, headed pilot schedule, shows a job its
// provider rate limits as waiting (not done, not running) until the reset,
// and a job whose dependency failed as waiting on it, and why; the summary
// that stays counts it waiting and says why under it. The JSON says the
// same, with the attempts.
func TestScheduleOnATerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "1")
	clock := useSchedClock(t, true)
	f := newFixture(t, nil)
	writeProviders(t, f.providers, map[string]map[string]any{
		"limited": limitedProvider(filepath.Join(f.dir, "count"), 1),
		"broken":  fakeProvider(t, "out=trying", "err=fatal: the model said no", "exit=3"),
		"ok":      fakeProvider(t, "out=done"),
	})
	graph := f.writeGraph(t, gjob("api", "limited", f), gjob("first", "broken", f), gjob("after", "ok", f, "first"))
	ptm, pts := openPTY(t, 150, 40)
	defer ptm.Close()
	term := readTerminal(ptm)
	var out bytes.Buffer
	code, ended := make(chan int, 1), make(chan struct{})
	go func() {
		defer close(ended)
		code <- run(context.Background(), f.scheduleArgs(graph), nil, &out, pts)
	}()
	defer func() { clock.release(); <-ended; pts.Close() }()
	for _, re := range []string{
		`api +limited:code +waiting +- +- +rate limit until \d\d:\d\d:\d\d\r\n`,
		`after +ok:code +waiting +- +- +waiting on first because first failed\r\n`,
		`pilot schedule: 1/3 done, 0 running, 2 waiting\r\n`,
	} {
		term.waitFor(t, regexp.MustCompile(re), ended)
	}
	clock.release() // the rate limit resets: api runs again
	if c := <-code; c != exitFailed {
		t.Errorf("exit %d, want 1 (first failed)", c)
	}
	pts.Close()
	<-term.done
	raw := term.String()
	if strings.Contains(raw, "pilot fanout") {
		t.Errorf("the terminal says pilot fanout:\n%q", raw)
	}
	screen := strings.Join(screenOf(t, raw), "\n")
	screen = regexp.MustCompile(`\b\d+(m\d\d)?s\b`).ReplaceAllString(screen, "Ns")
	want := `pilot schedule: 3 job(s) in Ns: 1 succeeded, 1 failed, 1 waiting
#  JOB    WORKER        VERDICT                 TIME  WORKTREE
1  api    limited:code  completed                 Ns  -
2  first  broken:code   error (generic-error)     Ns  -
   ↳ stderr: fatal: the model said no
3  after  ok:code       waiting                    -  -
   ↳ waiting on first because first failed`
	if diff := cmp.Diff(want, screen); diff != "" {
		t.Errorf("the screen at the end (-want +got):\n%s\nraw: %q", diff, raw)
	}
	var vs []map[string]any
	if err := json.Unmarshal(out.Bytes(), &vs); err != nil || len(vs) != 3 {
		t.Fatalf("stdout: %v\n%s", err, out.String())
	}
	if vs[0]["attempts"] != 2.0 || vs[0]["status"] != "complete" || vs[2]["status"] != "waiting" || vs[2]["waiting_reason"] != "waiting on first because first failed" {
		t.Errorf("verdicts %v", vs)
	}
}
