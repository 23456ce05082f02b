package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/pilottest"
)

func TestMain(m *testing.M) { pilottest.Main(m) }

// t0 is the fixtures' clock: runs started a few minutes ago.
var t0 = time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)

// fixtureRun is a run directory to write: its record and files.
type fixtureRun struct {
	rec    pilot.Record
	stream string // stream.log, "" for none
	events string // events.log
}

// writeRun writes run r into runDir and returns its directory.
func writeRun(t testing.TB, runDir string, r fixtureRun) string {
	t.Helper()
	dir := filepath.Join(runDir, r.rec.RunID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeRecord(t, dir, r.rec)
	if r.stream != "" {
		os.WriteFile(filepath.Join(dir, "stream.log"), []byte(r.stream), 0o600)
	}
	if r.events != "" {
		os.WriteFile(filepath.Join(dir, "events.log"), []byte(r.events), 0o600)
	}
	return dir
}

func writeRecord(t testing.TB, dir string, rec pilot.Record) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	// Replaced whole, as pilot does.
	tmp := filepath.Join(dir, ".record.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "record.json")); err != nil {
		t.Fatal(err)
	}
}

func ended(rec pilot.Record, after time.Duration, verdict pilot.Outcome) pilot.Record {
	e := rec.StartedAt.Add(after)
	rec.EndedAt, rec.Status, rec.Verdict = &e, string(verdict), verdict
	code := 0
	if verdict != pilot.Completed {
		code = 1
	}
	rec.ExitCode = &code
	return rec
}

func record(id, provider, job string, start time.Time) pilot.Record {
	rec := pilot.Record{RunID: id, Provider: provider, Mode: pilot.ModeCode, Runner: "command", Status: "running",
		Workdir: "/work/" + provider, StartedAt: start, GroupJob: job}
	rec.Provenance.Pid = os.Getpid()
	return rec
}

// get is the body of GET path on h, failing unless the status is want.
func get(t *testing.T, h http.Handler, path string, want int) string {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != want {
		t.Fatalf("GET %s: %d, want %d\n%s", path, w.Code, want, w.Body.String())
	}
	return w.Body.String()
}

// rowsOf is the run ids of a runs table, in order.
func rowsOf(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`data-run="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func TestRunsPageListsNewestFirstAndFilters(t *testing.T) {
	dir := t.TempDir()
	cost := 0.0123
	a := ended(record("a-glm", "glm", "fix", t0), 3*time.Second, pilot.Completed)
	a.Usage = &pilot.Usage{InputTokens: 1000, OutputTokens: 234, CostUSD: &cost}
	a.PeakRSSBytes = 300 << 20
	b := ended(record("b-kimi", "kimi", "review", t0.Add(time.Minute)), 2*time.Minute, pilot.Failed)
	b.FailureClass = pilot.FailTimeout
	c := ended(record("c-old", "glm", "old", t0.Add(-72*time.Hour)), time.Second, pilot.Completed)
	c.Workdir = "/elsewhere"
	for _, r := range []pilot.Record{a, b, c} {
		writeRun(t, dir, fixtureRun{rec: r})
	}
	h := Handler(Config{RunDir: dir})
	body := get(t, h, "/", 200)
	if got, want := strings.Join(rowsOf(body), " "), "b-kimi a-glm c-old"; got != want {
		t.Errorf("rows %q, want %q (newest first)", got, want)
	}
	for _, s := range []string{"1234", "$0.0123", "300MiB", "timeout", "3.0s", "fix"} {
		if !strings.Contains(body, s) {
			t.Errorf("the runs page lacks %q", s)
		}
	}
	for q, want := range map[string]string{
		"provider=glm":        "a-glm c-old",
		"status=failed":       "b-kimi",
		"status=timeout":      "b-kimi",
		"status=completed":    "a-glm c-old",
		"job=rev":             "b-kimi",
		"workdir=elsewhere":   "c-old",
		"age=1h":              "b-kimi a-glm",
		"age=7d&provider=glm": "a-glm c-old",
	} {
		if got := strings.Join(rowsOf(get(t, h, "/?"+q, 200)), " "); got != want {
			t.Errorf("?%s: rows %q, want %q", q, got, want)
		}
	}
	if body := get(t, h, "/?age=soon", 200); !strings.Contains(body, "age: want a duration") {
		t.Errorf("a bad age is not said")
	}
}

func TestRunPageMarksTheEvidenceLine(t *testing.T) {
	dir := t.TempDir()
	rec := ended(record("r1", "glm", "fix", t0), time.Second, pilot.Failed)
	rec.FailureClass, rec.EvidenceSource = pilot.FailProviderRateLimit, "command:stderr"
	rec.EvidenceExcerpt = "Error: 429 Too Many Requests <b>now</b>"
	writeRun(t, dir, fixtureRun{rec: rec,
		stream: "out working\nerr Error: 429 Too Many Requests <b>now</b>\nout bye\n",
		events: `{"type":"worker_runner.started","run_id":"r1","started_at":"2026-01-01T00:00:00Z"}` + "\n" +
			`{"type":"worker_runner.stall_inspection","time":"2026-01-01T00:00:01Z","message":"quiet"}` + "\n"})
	body := get(t, Handler(Config{RunDir: dir}), "/run/r1", 200)
	m := regexp.MustCompile(`<span class="line ([a-z ]+)" id="evidence"[^>]*><i>err</i> ([^<]*)</span>`).FindStringSubmatch(body)
	if m == nil || m[1] != "err evidence" || m[2] != "Error: 429 Too Many Requests &lt;b&gt;now&lt;/b&gt;" {
		t.Fatalf("no evidence line marked (got %q) in:\n%s", m, body)
	}
	if strings.Count(body, `id="evidence"`) != 1 {
		t.Errorf("more than one line is marked")
	}
	next := ended(record("r2", "glm", "fix", t0.Add(time.Minute)), time.Second, pilot.Completed)
	next.Attempt, next.PreviousRecord = 2, filepath.Join(dir, "r1", "record.json")
	writeRun(t, dir, fixtureRun{rec: next})
	if page := get(t, Handler(Config{RunDir: dir}), "/run/r2", 200); !strings.Contains(page, `<a href="/run/r1" class="previous">`) {
		t.Errorf("the second attempt's page does not link the first")
	}
	for _, s := range []string{"provider-rate-limit", "stall_inspection", "quiet", `href="#evidence"`, "Provenance", "Sandbox"} {
		if !strings.Contains(body, s) {
			t.Errorf("the run page lacks %q", s)
		}
	}
	if strings.Contains(body, "<b>now") {
		t.Errorf("the log's text is not escaped")
	}
	if strings.Contains(body, "data-live") {
		t.Errorf("an ended run's page is live")
	}
}

// A huge log is read in windows: the page holds the tail (or the window
// around the evidence), never the whole log, with links by byte offset.
func TestRunPageTailsAHugeLog(t *testing.T) {
	dir := t.TempDir()
	rec := ended(record("big", "glm", "", t0), time.Second, pilot.Failed)
	rec.EvidenceExcerpt = "fatal: the one line that matters"
	var b strings.Builder
	b.WriteString("out first line\n")
	for i := 0; b.Len() < 4<<20; i++ {
		b.WriteString("out filler line of a long run, more or less eighty bytes long, say ......\n")
		if i == 5000 {
			b.WriteString("err fatal: the one line that matters\n")
		}
	}
	b.WriteString("out last line\n")
	writeRun(t, dir, fixtureRun{rec: rec, stream: b.String()})
	const tail = 16 << 10
	h := Handler(Config{RunDir: dir, TailBytes: tail})
	body := get(t, h, "/run/big", 200)
	if len(body) > 4*tail {
		t.Errorf("the page is %d bytes for a window of %d", len(body), tail)
	}
	if !strings.Contains(body, `id="evidence"`) || !strings.Contains(body, "the one line that matters") {
		t.Errorf("the window is not around the evidence")
	}
	earlier := regexp.MustCompile(`href="/run/big\?from=(\d+)">show earlier`).FindStringSubmatch(body)
	later := regexp.MustCompile(`href="/run/big\?from=(\d+)">show later`).FindStringSubmatch(body)
	if earlier == nil || later == nil {
		t.Fatalf("no earlier/later links")
	}
	if first := get(t, h, "/run/big?from=0", 200); !strings.Contains(first, "first line") || strings.Contains(first, "last line") {
		t.Errorf("from=0 is not the start")
	}
	// A run without evidence shows its tail.
	rec.RunID, rec.EvidenceExcerpt = "big2", ""
	writeRun(t, dir, fixtureRun{rec: rec, stream: b.String()})
	if end := get(t, h, "/run/big2", 200); !strings.Contains(end, "last line") || strings.Contains(end, "first line") || len(end) > 4*tail {
		t.Errorf("the tail is not the end of the log")
	}
	get(t, h, "/run/big?from=-3", 400)
}

// sse reads server-sent events from a response body.
type sse struct{ r *bufio.Reader }

// next is the next event's name and data; it fails the test at EOF.
func (s sse) next(t *testing.T) (name, data string) {
	t.Helper()
	var lines []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && name != "":
			return name, strings.Join(lines, "\n")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			lines = append(lines, strings.TrimPrefix(line, "data: "))
		}
	}
}

func openSSE(t *testing.T, url string, header ...string) (sse, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	return sse{bufio.NewReader(resp.Body)}, func() { cancel(); resp.Body.Close() }
}

// A running run's page follows its log and status live, and the stream
// ends at the verdict, with the log's last lines out first.
func TestRunLiveFollowsUntilTheVerdict(t *testing.T) {
	dir := t.TempDir()
	rec := record("live1", "glm", "fix", t0)
	rd := writeRun(t, dir, fixtureRun{rec: rec, stream: "out one\n"})
	srv := httptest.NewServer(Handler(Config{RunDir: dir, Poll: 10 * time.Millisecond}))
	defer srv.Close()
	page := get(t, srv.Config.Handler, "/run/live1", 200)
	m := regexp.MustCompile(`data-live="(/run/live1/live\?offset=(\d+))"`).FindStringSubmatch(page)
	if m == nil || m[2] != "8" {
		t.Fatalf("the running run's page has no live stream from offset 8: %v", m)
	}
	ev, stop := openSSE(t, srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"))
	defer stop()
	if name, data := ev.next(t); name != "status" || !strings.Contains(data, `"status":"running"`) {
		t.Fatalf("first event %s %s, want the status", name, data)
	}
	log, err := os.OpenFile(filepath.Join(rd, "stream.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	log.WriteString("err two <script>\nout thr") // the last line is not whole yet
	if name, data := ev.next(t); name != "log" || data != `{"lines":[{"s":"err","t":"two \u003cscript\u003e"}],"offset":25}` {
		t.Fatalf("event %s %s, want line two", name, data)
	}
	log.WriteString("ee\n")
	log.Close()
	writeRecord(t, rd, ended(rec, time.Second, pilot.Completed))
	var names []string
	for {
		name, data := ev.next(t)
		names = append(names, name+" "+data)
		if name == "end" {
			break
		}
	}
	want := []string{`log {"lines":[{"s":"out","t":"three"}],"offset":35}`, `status {"class":"","status":"completed","verdict":"completed"}`, "end completed"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") && strings.Join(names, "\n") != strings.Join([]string{want[1], want[0], want[2]}, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if _, err := ev.r.ReadString('\n'); err != io.EOF {
		t.Errorf("the stream goes on after the end: %v", err)
	}
}

// writeGroup writes a graph's log: a completed, b running (on a), c
// waiting on b.
func writeGroup(t *testing.T, dir string) (id string, l *grouplog.Log) {
	t.Helper()
	id = grouplog.NewID(grouplog.KindGraph, t0)
	l, err := grouplog.New(dir, id, grouplog.KindGraph, []grouplog.Job{
		{Name: "a", Worker: "glm:code"}, {Name: "b", Worker: "kimi:code", Deps: []string{"a"}}, {Name: "c", Worker: "glm:test", Deps: []string{"b"}},
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l.Add(grouplog.Entry{Time: at(0), Type: grouplog.TypeStarting, Job: 0})
	l.Add(grouplog.Entry{Time: at(time.Second), Type: grouplog.TypeStarted, Job: 0, RunID: "ga"})
	l.Add(grouplog.Entry{Time: at(0), Type: grouplog.TypeWaiting, Job: 2, Why: "waiting on b"})
	l.Add(grouplog.Entry{Time: at(2 * time.Second), Type: grouplog.TypeVerdict, Job: 0, RunID: "ga", Status: "error", Class: "provider-rate-limit"})
	l.Add(grouplog.Entry{Time: at(2 * time.Second), Type: grouplog.TypeWaiting, Job: 0, Why: "rate limit until 10:42:03"})
	l.Add(grouplog.Entry{Time: at(4 * time.Second), Type: grouplog.TypeStarted, Job: 0, RunID: "ga2"})
	l.Add(grouplog.Entry{Time: at(5 * time.Second), Type: grouplog.TypeVerdict, Job: 0, RunID: "ga2", Status: "completed"})
	l.Add(grouplog.Entry{Time: at(6 * time.Second), Type: grouplog.TypeStarted, Job: 1, RunID: "gb"})
	ra := ended(record("ga", "glm", "a", at(time.Second)), time.Second, pilot.Failed)
	ra.FailureClass = pilot.FailProviderRateLimit
	for _, r := range []pilot.Record{ra, ended(record("ga2", "glm", "a", at(4*time.Second)), time.Second, pilot.Completed), record("gb", "kimi", "b", at(6*time.Second))} {
		r.Group = id
		writeRun(t, dir, fixtureRun{rec: r, stream: "out hi\n"})
	}
	return id, l
}

func TestGroupPageDrawsTheTimelineAndFollowsIt(t *testing.T) {
	dir := t.TempDir()
	id, l := writeGroup(t, dir)
	srv := httptest.NewServer(Handler(Config{RunDir: dir, Poll: 10 * time.Millisecond}))
	defer srv.Close()
	index := get(t, srv.Config.Handler, "/", 200)
	if !strings.Contains(index, `href="/group/`+id+`"`) {
		t.Errorf("the runs page does not list the group")
	}
	page := get(t, srv.Config.Handler, "/group/"+id, 200)
	states := regexp.MustCompile(`<tr class="job" data-job="(\w)" data-state="([^"]+)"`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, s := range states {
		got = append(got, s[1]+"="+s[2])
	}
	if strings.Join(got, " ") != "a=completed b=running c=waiting" {
		t.Errorf("job states %q", got)
	}
	// The SVG: a's two attempts (a failure, then a success) with its
	// rate-limit wait between them, b running, c waiting.
	for _, s := range []string{`<svg`, `class="seg seg-error"`, `class="seg seg-completed"`, `class="seg seg-running"`, `class="seg seg-waiting"`,
		`rate limit until 10:42:03`, `waiting on b`, `href="/run/ga"`, `href="/run/ga2"`, `class="deps"`, `marker-end`, `data-live="/group/` + id + `/live"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the group page lacks %s", s)
		}
	}
	ev, stop := openSSE(t, srv.URL+"/group/"+id+"/live")
	defer stop()
	if name, data := ev.next(t); name != "fragment" || !strings.Contains(data, `data-job="b" data-state="running"`) {
		t.Fatalf("first event %s, want the fragment with b running:\n%s", name, data)
	}
	// b ends, c is never run: the group is over, and so is the stream.
	writeRecord(t, filepath.Join(dir, "gb"), func() pilot.Record {
		r := ended(record("gb", "kimi", "b", t0.Add(6*time.Second)), time.Second, pilot.Completed)
		r.Group = id
		return r
	}())
	l.Add(grouplog.Entry{Time: t0.Add(7 * time.Second), Type: grouplog.TypeVerdict, Job: 1, RunID: "gb", Status: "completed"})
	l.Add(grouplog.Entry{Time: t0.Add(7 * time.Second), Type: grouplog.TypeEnded, Job: 2, Status: "interrupted"})
	l.Close(t0.Add(8 * time.Second))
	var last string
	for {
		name, data := ev.next(t)
		if name == "end" {
			break
		}
		last = data
	}
	if !strings.Contains(last, `data-job="b" data-state="completed"`) || !strings.Contains(last, `data-job="c" data-state="interrupted"`) {
		t.Errorf("the last fragment:\n%s", last)
	}
	if page := get(t, srv.Config.Handler, "/group/"+id, 200); strings.Contains(page, "data-live") {
		t.Errorf("an ended group's page is live")
	}
}

// Files are served only by run id from the run directory's listing: no
// path in a request, encoded or not, and no symlink reaches outside.
func TestNothingOutsideTheRunDirectoryIsServed(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	outside := filepath.Join(root, "outside")
	os.MkdirAll(outside, 0o700)
	const secret = "OUTSIDE-7c1e-not-for-the-page"
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("out "+secret+"\n"), 0o600)
	// A run directory elsewhere, symlinked into the run directory.
	elsewhere := writeRun(t, outside, fixtureRun{rec: ended(record("linked", "glm", "", t0), time.Second, pilot.Completed), stream: "out " + secret + "\n"})
	os.MkdirAll(dir, 0o700)
	if err := os.Symlink(elsewhere, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	// A run whose logs are symlinks out.
	rd := writeRun(t, dir, fixtureRun{rec: ended(record("r1", "glm", "", t0), time.Second, pilot.Completed)})
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(rd, "stream.log"))
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(rd, "events.log"))
	// A group log symlinked out, to a valid group log.
	gid := grouplog.NewID(grouplog.KindFanout, t0)
	l, _ := grouplog.New(outside, gid, grouplog.KindFanout, []grouplog.Job{{Name: secret, Worker: "glm:code"}}, t0)
	l.Add(grouplog.Entry{Time: t0, Type: grouplog.TypeStarted, Job: 0, RunID: "linked"})
	l.Close(t0)
	os.MkdirAll(filepath.Join(dir, grouplog.DirName), 0o700)
	os.Symlink(filepath.Join(outside, grouplog.DirName, gid+".jsonl"), filepath.Join(dir, grouplog.DirName, gid+".jsonl"))

	srv := httptest.NewServer(Handler(Config{RunDir: dir}))
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute} // a live stream that never ends fails, not hangs
	body := get(t, srv.Config.Handler, "/run/r1", 200)
	if strings.Contains(body, secret) || !strings.Contains(body, "cannot be served") {
		t.Errorf("a symlinked stream.log was served:\n%s", body)
	}
	for _, p := range []string{
		"/run/linked", "/run/linked/live?offset=0", "/group/" + gid, "/group/" + gid + "/live",
		"/run/..%2Foutside%2Flinked", "/run/%2e%2e", "/run/..", "/run/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
		"/run/r1%2F..%2F..%2Foutside%2Fsecret.txt", "/assets/..%2f..%2fserve.go", "/assets/%2e%2e/serve.go",
		"/group/..%2f..%2foutside%2fsecret", "/../outside/secret.txt", "/%2e%2e/outside/secret.txt",
		"/run/r1/../../outside/secret.txt", "/assets/../../outside/secret.txt",
	} {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.Contains(string(b), secret) || strings.Contains(string(b), secret) {
			t.Errorf("GET %s served the outside file (%s)", p, resp.Status)
		}
		if strings.HasPrefix(p, "/run/linked") || strings.HasPrefix(p, "/group/") {
			if resp.StatusCode != 404 {
				t.Errorf("GET %s: %s, want 404", p, resp.Status)
			}
		}
	}
	if index := get(t, srv.Config.Handler, "/", 200); strings.Contains(index, "linked") || strings.Contains(index, gid) {
		t.Errorf("the runs page lists a symlinked run or group")
	}
}

func TestATokenGuardsEveryRequest(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, fixtureRun{rec: ended(record("r1", "glm", "", t0), time.Second, pilot.Completed), stream: "out hi\n"})
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	srv := httptest.NewServer(Handler(Config{RunDir: dir, Token: token}))
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(path string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, p := range []string{"/", "/run/r1", "/run/r1/live?offset=0", "/assets/app.js", "/?token=wrong", "/?token=" + token[:63], "/?token=" + token + "0"} {
		if resp := status(p); resp.StatusCode != 401 {
			t.Errorf("GET %s without the token: %s, want 401", p, resp.Status)
		}
	}
	if resp := status("/", "Cookie", cookieName+"=wrong"); resp.StatusCode != 401 {
		t.Errorf("a wrong cookie: %s", resp.Status)
	}
	resp := status("/run/r1?token=" + token + "&from=0")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/run/r1?from=0" {
		t.Fatalf("the token in the address: %s to %q, want 303 to the address without it", resp.Status, resp.Header.Get("Location"))
	}
	c := resp.Header.Get("Set-Cookie")
	if !strings.Contains(c, cookieName+"="+token) || !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Strict") {
		t.Errorf("cookie %q, want the token, HttpOnly, SameSite=Strict", c)
	}
	if resp := status("/run/r1", "Cookie", cookieName+"="+token); resp.StatusCode != 200 {
		t.Errorf("with the cookie: %s", resp.Status)
	}
	// Any Host: the token is the guard.
	if resp := status("/", "Cookie", cookieName+"="+token, "Host", "pilot.example:8080"); resp.StatusCode != 200 {
		t.Errorf("with the cookie from another host name: %s", resp.Status)
	}
}

// Without a token only loopback host names are answered: a page of
// another name that resolves to 127.0.0.1 (DNS rebinding) reads nothing.
func TestLoopbackRefusesOtherHostNames(t *testing.T) {
	h := Handler(Config{RunDir: t.TempDir()})
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "localhost:1": 200, "[::1]:80": 200, "127.0.0.2": 200, "LOCALHOST": 200,
		"evil.example:8080": 403, "127.0.0.1.evil.example": 403, "10.0.0.1:80": 403, "": 403, "localhost.evil.example": 403,
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		req := httptest.NewRequest(m, "/", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 405 {
			t.Errorf("%s: %d, want 405 (read-only)", m, w.Code)
		}
	}
	w := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Host = "localhost"
	h.ServeHTTP(w, req)
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:0": true, "localhost:80": true, "[::1]:0": true, ":0": false, "0.0.0.0:80": false, "192.168.1.2:80": false, "nonsense": false} {
		if IsLoopback(addr) != want {
			t.Errorf("IsLoopback(%q) = %v", addr, !want)
		}
	}
}

// A line longer than a window is shown in pieces, on the page and live,
// and the lines after it still come.
func TestALineLongerThanAWindow(t *testing.T) {
	dir := t.TempDir()
	long := "out " + strings.Repeat("x", 3000) + "\n"
	rec := record("long", "glm", "", t0)
	rd := writeRun(t, dir, fixtureRun{rec: rec, stream: "out short\n" + long})
	srv := httptest.NewServer(Handler(Config{RunDir: dir, Poll: 10 * time.Millisecond, TailBytes: 1024}))
	defer srv.Close()
	page := get(t, srv.Config.Handler, "/run/long", 200)
	if !strings.Contains(page, strings.Repeat("x", 1000)) {
		t.Errorf("the tail of a log ending in a long line shows none of it")
	}
	ev, stop := openSSE(t, srv.URL+"/run/long/live?offset=10")
	defer stop()
	ev.next(t) // the status
	var got strings.Builder
	for got.Len() < len(long)-1 {
		name, data := ev.next(t)
		var m struct {
			Offset int64
			Lines  []struct {
				S, T string
				Cut  bool
			}
		}
		if err := json.Unmarshal([]byte(data), &m); name != "log" || err != nil {
			t.Fatalf("event %s %s", name, data)
		}
		for _, l := range m.Lines {
			if l.S != "" {
				got.WriteString(l.S + " ")
			}
			got.WriteString(l.T)
			if !l.Cut {
				got.WriteString("\n")
			}
		}
	}
	if got.String() != long {
		t.Errorf("the long line came as %d bytes, want %d", got.Len(), len(long))
	}
	f, _ := os.OpenFile(filepath.Join(rd, "stream.log"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("out after\n")
	f.Close()
	if name, data := ev.next(t); name != "log" || !strings.Contains(data, `"t":"after"`) {
		t.Errorf("event %s %s, want the line after", name, data)
	}
}

// A client far behind catches up window by window, at most 16 a look,
// and the stream ends only once it has all of an ended run's log.
func TestLiveCatchesUpBeforeItEnds(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "out line %03d %s\n", i, strings.Repeat(".", 80))
	}
	writeRun(t, dir, fixtureRun{rec: ended(record("behind", "glm", "", t0), time.Second, pilot.Completed), stream: b.String()})
	srv := httptest.NewServer(Handler(Config{RunDir: dir, Poll: 10 * time.Millisecond, TailBytes: 256}))
	defer srv.Close()
	ev, stop := openSSE(t, srv.URL+"/run/behind/live?offset=0")
	defer stop()
	lines, events := 0, 0
	for {
		name, data := ev.next(t)
		if name == "end" {
			break
		}
		if name == "log" {
			events++
			lines += strings.Count(data, `"s":"out"`)
		}
	}
	if lines != 100 || events < 17 {
		t.Errorf("%d lines in %d events, want 100 in more than 16", lines, events)
	}
}
