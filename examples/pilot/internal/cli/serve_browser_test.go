//go:build unix

package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
)

// envBrowserRequire makes the browser test fail, not skip, without
// Chromium (.ci/run sets it once it installed Chromium).
const envBrowserRequire = "PILOT_BROWSER_REQUIRE"

// envScreenshotDir is where the browser test saves its screenshots;
// unset, a temporary directory it names in its log.
const envScreenshotDir = "PILOT_SCREENSHOT_DIR"

// The page in a real browser over a real fanout while it runs: headless
// Chromium, driven over the DevTools protocol on a pipe, sees the jobs
// appear, go from running to their verdicts without a reload, and a failed
// run's page with its evidence line marked.
func TestServeInABrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv(envBrowserRequire) != "" {
			t.Fatalf("%s is set and no chromium is on PATH", envBrowserRequire)
		}
		t.Skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it)")
	}
	shots := os.Getenv(envScreenshotDir)
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)

	// Two workers that wait for the test's word, one that fails at once
	// with an evidence line.
	f := newFixture(t, nil)
	release := filepath.Join(f.dir, "release")
	writeProviders(t, f.providers, map[string]map[string]any{
		"glm":  fakeProvider(t, "out=working", "await="+release, "out=done"),
		"kimi": fakeProvider(t, "out=looking", "err=Error: 500 Internal Server Error: upstream overloaded", "exit=1"),
	})
	fanoutDone := make(chan string, 1)
	go func() {
		code, out, errOut := runCLI(f.fanoutArgs("--job", "first=glm:review:"+f.taskFile, "--job", "second=glm:review:"+f.taskFile,
			"--job", "broken=kimi:review:"+f.taskFile)...)
		fanoutDone <- fmt.Sprintf("exit %d\n%s\n%s", code, out, errOut)
	}()
	released := false
	defer func() {
		if !released {
			os.WriteFile(release, nil, 0o600)
		}
		<-fanoutDone
	}()
	url, _ := startServe(t, "--run-dir", f.runDir)

	b := startBrowser(t, chromium)
	b.navigate(t, url)
	// The jobs appear on the runs page, live.
	b.waitFor(t, "the runs page lists first and second running and broken failed", `(() => {
		const s = j => { const r = document.querySelector('tr.run[data-job="' + j + '"]'); return r && r.dataset.status; };
		return s("first") === "running" && s("second") === "running" && s("broken") === "error";
	})()`)
	b.screenshot(t, filepath.Join(shots, "1-runs-running.png"))

	ids, _ := grouplog.List(f.runDir)
	if len(ids) != 1 {
		t.Fatalf("group logs %q", ids)
	}
	b.navigate(t, url+"group/"+ids[0])
	states := `(() => Object.fromEntries([...document.querySelectorAll("tr.job")].map(r => [r.dataset.job, r.dataset.state])))()`
	b.waitFor(t, "the group page shows first and second running, broken failed", `(() => {
		const s = `+states+`;
		return s.first === "running" && s.second === "running" && s.broken === "error" &&
			document.querySelectorAll("svg.timeline rect.seg-running").length === 2;
	})()`)
	b.eval(t, `window.pilotNoReload = true`)
	b.screenshot(t, filepath.Join(shots, "2-group-running.png"))

	os.WriteFile(release, nil, 0o600)
	released = true
	b.waitFor(t, "the group page shows first and second completed, without a reload", `(() => {
		const s = `+states+`;
		return window.pilotNoReload === true && s.first === "completed" && s.second === "completed" && s.broken === "error" &&
			document.querySelectorAll("svg.timeline rect.seg-completed").length === 2 &&
			document.getElementById("group-state").dataset.over === "true";
	})()`)
	b.screenshot(t, filepath.Join(shots, "3-group-done.png"))
	if res := <-fanoutDone; !strings.HasPrefix(res, "exit 1\n") {
		t.Errorf("the fanout: %s", res)
	}
	fanoutDone <- ""

	href := b.eval(t, `document.querySelector('tr.job[data-job="broken"] a').getAttribute("href")`)
	b.navigate(t, url+strings.TrimPrefix(fmt.Sprint(href), "/"))
	b.waitFor(t, "the failed run's page marks its evidence line", `(() => {
		const e = document.getElementById("evidence");
		return !!e && e.classList.contains("evidence") && e.textContent.includes("500 Internal Server Error: upstream overloaded") &&
			document.querySelectorAll(".line.evidence").length === 1;
	})()`)
	b.screenshot(t, filepath.Join(shots, "4-run-evidence.png"))
}

// findChromium is the Chromium on PATH, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless Chromium spoken to over --remote-debugging-pipe:
// JSON messages ended by a NUL byte, commands on its fd 3, replies and
// events on its fd 4.
type browser struct {
	cmd     *exec.Cmd
	in      *os.File // our end of its fd 3
	session string

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	readErr error
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe() // its fd 3: our commands
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe() // its fd 4: its replies
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--window-size=1280,900",
		"--user-data-dir="+t.TempDir(), "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	var stderr lockedBuf
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	b := &browser{cmd: cmd, in: cmdW, waiting: map[int]chan cdpReply{}}
	readDone := make(chan struct{})
	go b.read(outR, readDone)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.call(ctx, "", "Browser.close", nil) // its reply may not come: it exits
		cmdW.Close()
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Logf("chromium: %v\n%s", err, stderr.String())
		}
		<-readDone
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var target struct{ TargetID string }
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatalf("Target.createTarget: %v\n%s", err, stderr.String())
	}
	var att struct{ SessionID string }
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		t.Fatalf("Target.attachToTarget: %v", err)
	}
	b.session = att.SessionID
	if err := b.call(ctx, b.session, "Page.enable", nil); err != nil {
		t.Fatalf("Page.enable: %v", err)
	}
	// A size of its own: a new headless target may have none yet, and a
	// screenshot of it fails ("0 width").
	if err := b.call(ctx, b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}); err != nil {
		t.Fatalf("Emulation.setDeviceMetricsOverride: %v", err)
	}
	return b
}

// read hands each reply to its caller; events are left unread.
func (b *browser) read(r *os.File, done chan struct{}) {
	defer close(done)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, c := range b.waiting {
				close(c)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID *int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == nil {
			continue
		}
		b.mu.Lock()
		c := b.waiting[*m.ID]
		delete(b.waiting, *m.ID)
		b.mu.Unlock()
		if c != nil {
			c <- m.cdpReply
		}
	}
}

// call sends method with params (to session, or the browser for "") and
// decodes its result into out, if given.
func (b *browser) call(ctx context.Context, session, method string, params any, out ...any) error {
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return b.readErr
	}
	b.nextID++
	id := b.nextID
	c := make(chan cdpReply, 1)
	b.waiting[id] = c
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(data, 0)); err != nil {
		return err
	}
	select {
	case r, ok := <-c:
		if !ok {
			return fmt.Errorf("chromium went away")
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if len(out) > 0 {
			return json.Unmarshal(r.Result, out[0])
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deadline is how long a step may wait: the test's deadline, at most two
// minutes.
func deadline(t *testing.T) time.Time {
	d := time.Now().Add(2 * time.Minute)
	if td, ok := t.Deadline(); ok && td.Before(d) {
		d = td.Add(-5 * time.Second)
	}
	return d
}

func (b *browser) navigate(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline(t))
	defer cancel()
	if err := b.call(ctx, b.session, "Page.navigate", map[string]any{"url": url}); err != nil {
		t.Fatalf("Page.navigate %s: %v", url, err)
	}
}

// eval is expr's value in the page.
func (b *browser) eval(t *testing.T, expr string) any {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline(t))
	defer cancel()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(ctx, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		t.Fatalf("Runtime.evaluate: %v", err)
	}
	if r.ExceptionDetails != nil {
		return nil // the page is not there yet
	}
	return r.Result.Value
}

// waitFor polls the page until expr is true: the browser has nothing to
// signal a DOM change to the test with.
func (b *browser) waitFor(t *testing.T, what, expr string) {
	t.Helper()
	end := deadline(t)
	for {
		if b.eval(t, expr) == true {
			return
		}
		if time.Now().After(end) {
			body := b.eval(t, `document.body ? document.body.innerText : ""`)
			t.Fatalf("%s: not so by the deadline; the page says:\n%v", what, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) screenshot(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline(t))
	defer cancel()
	var r struct{ Data string }
	if err := b.call(ctx, b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		t.Errorf("Page.captureScreenshot: %v", err)
		return
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Errorf("saving the screenshot: %v", err)
	}
}
