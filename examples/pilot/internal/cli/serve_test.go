package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/runs"
)

// startServe runs 'pilot serve args' until the test ends and returns the
// address it printed.
func startServe(t *testing.T, args ...string) (url string, stderr *lockedBuf) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr = &lockedBuf{}
	done := make(chan int)
	go func() {
		code := run(ctx, append([]string{"serve"}, args...), nil, pw, stderr)
		pw.Close()
		done <- code
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("pilot serve exited %d: %s", code, stderr.String())
		}
	})
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "pilot serve: ")
	if err != nil || !ok {
		t.Fatalf("pilot serve printed %q (%v), stderr %q", line, err, stderr.String())
	}
	return url, stderr
}

// getBody is GET url's status and body.
func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The secret canary over the page: a fanout whose failing worker prints
// its provider's key leaves it in no page and no live stream, and the
// page shows the redaction; the records name their fanout and job.
func TestServeCanaryAndFanoutMembership(t *testing.T) {
	const key = "canary-serve-4b9d1f03-secret"
	f := newFixture(t, nil)
	glm := fakeProvider(t, "out=working", "err=Error: 401 Unauthorized: invalid api key "+key, "exit=1")
	glm["credential_env"] = "PILOT_TEST_SERVE_KEY"
	t.Setenv("PILOT_TEST_SERVE_KEY", key)
	writeProviders(t, f.providers, map[string]map[string]any{"glm": glm, "kimi": fakeProvider(t, "out=fine")})
	code, out, errOut := runCLI(f.fanoutArgs("--job", "leak=glm:review:"+f.taskFile, "--job", "kimi:review:"+f.taskFile)...)
	if code != 1 {
		t.Fatalf("fanout: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	list, err := runs.List(f.runDir)
	if err != nil || len(list) != 2 {
		t.Fatalf("%d runs (%v)", len(list), err)
	}
	ids, _ := grouplog.List(f.runDir)
	if len(ids) != 1 {
		t.Fatalf("group logs %q, want one", ids)
	}
	jobs := map[string]string{}
	for _, r := range list {
		if r.Record.Group != ids[0] {
			t.Errorf("run %s: group %q, want %q", r.ID, r.Record.Group, ids[0])
		}
		jobs[r.Record.GroupJob] = r.ID
	}
	if jobs["leak"] == "" || jobs["kimi:review"] == "" {
		t.Errorf("the records' jobs: %v", jobs)
	}

	url, _ := startServe(t, "--run-dir", f.runDir)
	pages := []string{"", "run/" + jobs["leak"], "run/" + jobs["leak"] + "/live?offset=0", "run/" + jobs["kimi:review"],
		"group/" + ids[0], "group/" + ids[0] + "/live", "?status=failed"}
	var all strings.Builder
	for _, p := range pages {
		code, body := getBody(t, url+p)
		if code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
		all.WriteString(body)
	}
	if strings.Contains(all.String(), key) {
		t.Errorf("a page holds the secret")
	}
	_, leak := getBody(t, url+"run/"+jobs["leak"])
	if !regexp.MustCompile(`id="evidence"[^>]*><i>err</i> Error: 401 Unauthorized: invalid api key \[REDACTED\]`).MatchString(leak) {
		t.Errorf("the failed run's page does not mark its redacted evidence:\n%s", leak)
	}
	_, group := getBody(t, url+"group/"+ids[0])
	for _, s := range []string{`data-job="leak" data-state="error"`, `data-job="kimi:review" data-state="completed"`} {
		if !strings.Contains(group, s) {
			t.Errorf("the group page lacks %s", s)
		}
	}
}

func TestServeAddressesAndToken(t *testing.T) {
	dir := t.TempDir()
	url, stderr := startServe(t, "--run-dir", dir)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.Contains(url, "token") || stderr.String() != "" {
		t.Errorf("loopback: %q, stderr %q", url, stderr.String())
	}
	if code, body := getBody(t, url); code != 200 || !strings.Contains(body, "no runs") {
		t.Errorf("GET /: %d", code)
	}
	// Every address: a token, printed once, that every request needs.
	url, stderr = startServe(t, "--run-dir", dir, "--addr", "0.0.0.0:0")
	host, _ := os.Hostname()
	m := regexp.MustCompile(`^http://` + regexp.QuoteMeta(host) + `:(\d+)/\?token=([0-9a-f]{64})$`).FindStringSubmatch(url)
	if m == nil || !strings.Contains(stderr.String(), "token") {
		t.Fatalf("0.0.0.0: %q, stderr %q", url, stderr.String())
	}
	if code, _ := getBody(t, "http://127.0.0.1:"+m[1]+"/"); code != 401 {
		t.Errorf("without the token: %d, want 401", code)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	for _, u := range []string{"/?token=" + m[2], "/"} { // the token once, then its cookie
		resp, err := browser.Get("http://127.0.0.1:" + m[1] + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Request.URL.RawQuery != "" {
			t.Errorf("GET %s: %s at %s, want 200 at an address without the token", u, resp.Status, resp.Request.URL)
		}
	}
	for _, args := range [][]string{{"--addr", "nonsense"}, {"--addr", "127.0.0.1:99999"}, {"stray"}} {
		if code, _, errOut := runCLI(append([]string{"serve"}, args...)...); code != 2 || !strings.Contains(errOut, "pilot serve") {
			t.Errorf("serve %q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// lockedBuf is a strings.Builder safe for a writer and a reader.
type lockedBuf struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A graph's page: its dependencies drawn, a job that waited on another
// shown waiting (with why) before its run, one never run because its
// dependency failed, and the state file's jobs on the runs page.
func TestServeAGraph(t *testing.T) {
	f := newFixture(t, map[string][]string{"ok": {"out=fine"}, "bad": {"err=fatal: no", "exit=1"}})
	graph := f.writeGraph(t, gjob("a", "ok", f), gjob("b", "ok", f, "a"), gjob("c", "bad", f), gjob("d", "ok", f, "c"))
	if code, out, errOut := runCLI(f.scheduleArgs(graph, "--max-parallel", "1")...); code != 1 {
		t.Fatalf("schedule: exit %d\n%s\n%s", code, out, errOut)
	}
	ids, _ := grouplog.List(f.runDir)
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "graph-") {
		t.Fatalf("group logs %q", ids)
	}
	g, err := grouplog.Read(f.runDir, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	waits := map[string][]string{}
	for _, e := range g.Entries {
		if e.Type == grouplog.TypeWaiting {
			waits[g.Jobs[e.Job].Name] = append(waits[g.Jobs[e.Job].Name], e.Why)
		}
	}
	if len(waits["b"]) == 0 || len(g.Jobs[1].Deps) != 1 {
		t.Errorf("the log says no wait of b, or not its dependency: %v %+v", waits, g.Jobs)
	}
	url, _ := startServe(t, "--run-dir", f.runDir, "--state", filepath.Join(f.dir, "state"))
	_, page := getBody(t, url+"group/"+ids[0])
	for _, s := range []string{`class="deps"`, `<g class="node" data-job="b">`, `marker-end`, `class="seg seg-waiting"`,
		`data-job="a" data-state="completed"`, `data-job="b" data-state="completed"`, `data-job="c" data-state="error"`, `data-job="d" data-state="waiting"`,
		`waiting on c because c failed`, `data-over="true"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the graph's page lacks %s", s)
		}
	}
	_, index := getBody(t, url)
	if !strings.Contains(index, "schedule.json") || !strings.Contains(index, "<td>a</td><td>complete</td>") {
		t.Errorf("the runs page does not show the state file's jobs:\n%s", index)
	}
}
