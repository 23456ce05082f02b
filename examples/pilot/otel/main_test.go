package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/pilotworkers/pilot/config"
	"github.com/pilotworkers/pilot/examples/pilot/internal/cli"
	"github.com/pilotworkers/pilot/pilottest"
)

// envRunMain makes the test binary run this command's main, as a built
// binary would: the demo's fake agents re-execute it too.
const envRunMain = "PILOT_OTEL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	cli.ServeFakeAgent()
	if os.Getenv(envRunMain) != "" {
		main()
	}
	// A race-detector build waits a second at exit by default; the fake
	// agents are this binary.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	os.Exit(m.Run())
}

// receiver is an OTLP/HTTP endpoint on 127.0.0.1: it takes POST
// /v1/traces and /v1/metrics (protobuf, as otlptracehttp and
// otlpmetrichttp send them) and keeps what they carried.
type receiver struct {
	*httptest.Server

	mu      sync.Mutex
	traces  []*coltracepb.ExportTraceServiceRequest
	metrics []*colmetricpb.ExportMetricsServiceRequest
	bodies  [][]byte // every request body, decoded from gzip when it was
	bad     []string // requests it refused, and why
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve)) // on 127.0.0.1
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	refuse := func(why string) {
		r.mu.Lock()
		r.bad = append(r.bad, req.Method+" "+req.URL.Path+": "+why)
		r.mu.Unlock()
		http.Error(w, why, http.StatusBadRequest)
	}
	if req.Method != http.MethodPost {
		refuse("not a POST")
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		refuse("content type " + ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			refuse(err.Error())
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		refuse(err.Error())
		return
	}
	var resp proto.Message
	r.mu.Lock()
	r.bodies = append(r.bodies, data)
	switch req.URL.Path {
	case "/v1/traces":
		m := &coltracepb.ExportTraceServiceRequest{}
		if err = proto.Unmarshal(data, m); err == nil {
			r.traces = append(r.traces, m)
		}
		resp = &coltracepb.ExportTraceServiceResponse{}
	case "/v1/metrics":
		m := &colmetricpb.ExportMetricsServiceRequest{}
		if err = proto.Unmarshal(data, m); err == nil {
			r.metrics = append(r.metrics, m)
		}
		resp = &colmetricpb.ExportMetricsServiceResponse{}
	default:
		r.mu.Unlock()
		refuse("unknown path")
		return
	}
	r.mu.Unlock()
	if err != nil {
		refuse("decoding: " + err.Error())
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// exported is a span as the receiver got it, with its resource's
// service.name.
type exported struct {
	service string
	span    *tracepb.Span
}

func (r *receiver) spans() []exported {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []exported
	for _, req := range r.traces {
		for _, rs := range req.ResourceSpans {
			service := attr(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, exported{service, s})
				}
			}
		}
	}
	return out
}

func (r *receiver) metricNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, req := range r.metrics {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if !slices.Contains(names, m.Name) {
						names = append(names, m.Name)
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

func (r *receiver) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Errorf("the receiver refused requests: %q", r.bad)
	}
}

// attr is the string value of key among kvs, "" when it is not there.
func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			if s, ok := kv.Value.GetValue().(*commonpb.AnyValue_StringValue); ok {
				return s.StringValue
			}
			return kv.Value.String()
		}
	}
	return ""
}

// otelEnv is the environment of a command that exports to r: the
// endpoint, nothing else of OTEL_* from the test's environment, and dirs
// of the test's own for config and state.
func otelEnv(t *testing.T, r *receiver) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	dir := t.TempDir()
	return append(env, envEndpoint+"="+r.URL, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_DATA_HOME="+filepath.Join(dir, "data"))
}

// TestDemoExportsOverOTLP runs the command as a process ("demo", its
// built-in fake agents, no API key) with OTEL_EXPORTER_OTLP_ENDPOINT set
// to a receiver: once the process has exited, the receiver has a
// pilot.task span and an invoke_agent child span for each of the demo's
// workers, and pilot's metrics. Nothing waits for them: the command
// flushes before it exits.
func TestDemoExportsOverOTLP(t *testing.T) {
	r := newReceiver(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "demo", "--json", "--run-dir", t.TempDir())
	cmd.Env = append(otelEnv(t, r), envRunMain+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pilot demo: %v\nstderr:\n%s", err, stderr.String())
	}
	var verdicts []struct {
		Provider     string `json:"provider"`
		Verdict      string `json:"verdict"`
		FailureClass string `json:"failure_class"`
		RunID        string `json:"run_id"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &verdicts); err != nil || len(verdicts) == 0 {
		t.Fatalf("pilot demo --json: %v: %q", err, stdout.String())
	}
	r.check(t)

	tasks := map[string]*tracepb.Span{}    // provider → its pilot.task span
	attempts := map[string]*tracepb.Span{} // provider → its invoke_agent span
	for _, e := range r.spans() {
		if e.service != "pilot" {
			t.Errorf("span %s: service.name %q, want pilot", e.span.Name, e.service)
		}
		provider := attr(e.span.Attributes, "gen_ai.provider.name")
		switch {
		case e.span.Name == "pilot.task":
			tasks[provider] = e.span
		case strings.HasPrefix(e.span.Name, "invoke_agent"):
			attempts[provider] = e.span
		}
	}
	for _, v := range verdicts {
		task, attempt := tasks[v.Provider], attempts[v.Provider]
		if task == nil || attempt == nil {
			t.Errorf("%s: no pilot.task span or no invoke_agent span exported (pilot.task %v, invoke_agent %v)", v.Provider, task != nil, attempt != nil)
			continue
		}
		if !bytes.Equal(attempt.ParentSpanId, task.SpanId) || !bytes.Equal(attempt.TraceId, task.TraceId) {
			t.Errorf("%s: the invoke_agent span is not the pilot.task span's child", v.Provider)
		}
		if got := attr(attempt.Attributes, "pilot.run_id"); got != v.RunID {
			t.Errorf("%s: invoke_agent pilot.run_id %q, want the verdict's %q", v.Provider, got, v.RunID)
		}
		wantErr := v.Verdict != "completed" && v.Verdict != "step_capped_partial"
		if gotErr := task.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR; gotErr != wantErr {
			t.Errorf("%s: verdict %s, task span status %v", v.Provider, v.Verdict, task.GetStatus())
		}
		if v.FailureClass != "" {
			if got := attr(attempt.Attributes, "error.type"); got != v.FailureClass {
				t.Errorf("%s: invoke_agent error.type %q, want the failure class %q", v.Provider, got, v.FailureClass)
			}
		}
	}
	names := r.metricNames()
	for _, want := range []string{"pilot.attempts", "pilot.verdicts", "pilot.attempt.duration", "pilot.jobs.running"} {
		if !slices.Contains(names, want) {
			t.Errorf("metric %s not exported; got %q", want, names)
		}
	}
}

// TestFailedDispatchExportsAndKeepsSecrets is a dispatch that fails (exit
// status 1), in this process: its spans and metrics are exported before
// run returns, and the worker's secret, printed in its stderr line that
// is the failure's evidence, is in none of the requests.
func TestFailedDispatchExportsAndKeepsSecrets(t *testing.T) {
	const secret = "sk-otlp-canary-7f3a9c"
	// Another provider's key, in pilot's credential store, which the
	// worker found and prints: redacted from everything.
	const storedKey = "sk-otlp-stored-2c8e41"
	r := newReceiver(t)
	dir := t.TempDir()
	for _, kv := range otelEnv(t, r) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "XDG_") || k == envEndpoint {
			t.Setenv(k, v)
		}
	}
	workdir, taskFile, provs := filepath.Join(dir, "work"), filepath.Join(dir, "task.md"), filepath.Join(dir, "providers.json")
	os.Mkdir(workdir, 0o755)
	os.WriteFile(taskFile, []byte("# task\nsay hello\n"), 0o644)
	os.WriteFile(filepath.Join(workdir, "found-key"), []byte(storedKey), 0o600)
	if _, err := (config.FileCredentials{}).Store("stored", storedKey); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"providers": map[string]any{
		"denied": map[string]any{
			"runner": "command",
			"argv":   []string{"sh", "-c", "echo \"found a key: $(cat found-key)\" >&2; echo 'Error: 401 Unauthorized: invalid x-api-key " + secret + "' >&2; exit 1"},
		},
		"stored": map[string]any{"runner": "command", "argv": []string{"true"}, "credential_env": "STORED_API_KEY"},
	}})
	os.WriteFile(provs, data, 0o644)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"dispatch", "--provider", "denied", "--mode", "review", "--task-file", taskFile,
		"--workdir", workdir, "--providers-file", provs, "--run-dir", filepath.Join(dir, "runs"), "--log", "json"},
		nil, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	r.check(t)
	var task *tracepb.Span
	for _, e := range r.spans() {
		if e.span.Name == "pilot.task" {
			task = e.span
		}
	}
	if task == nil {
		t.Fatalf("no pilot.task span exported; spans: %v", r.spans())
	}
	if got := task.GetStatus(); got.GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(got.GetMessage(), "auth") {
		t.Errorf("pilot.task status %v, want Error with the auth failure class", got)
	}
	if names := r.metricNames(); !slices.Contains(names, "pilot.verdicts") {
		t.Errorf("pilot.verdicts not exported; got %q", names)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(storedKey)) {
			t.Errorf("an OTLP request carries the worker's secret")
		}
	}
	// The evidence itself does reach the verdict (stdout): the canary is
	// live.
	if !strings.Contains(stdout.String(), "401") {
		t.Errorf("the verdict has no evidence of the 401: %s", stdout.String())
	}
	// The stored key reached the verdict's stderr tail, redacted, and
	// nothing else.
	if !strings.Contains(stdout.String(), "found a key: [REDACTED]") {
		t.Errorf("the verdict's stderr tail does not show the stored key redacted: %s", stdout.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), storedKey) {
		t.Errorf("the command's output holds the stored key:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	pilottest.NoSecretIn(t, filepath.Join(dir, "runs"), storedKey)
}

// TestNoEndpointNoTelemetry: without OTEL_EXPORTER_OTLP_ENDPOINT (or with
// OTEL_SDK_DISABLED=true) the command is examples/pilot as it is: no hooks.
func TestNoEndpointNoTelemetry(t *testing.T) {
	for _, env := range [][2]string{{"", ""}, {"http://127.0.0.1:1", "true"}} {
		t.Setenv(envEndpoint, env[0])
		t.Setenv("OTEL_SDK_DISABLED", env[1])
		h, shutdown, err := setup(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.Dispatcher != nil || h.Task != nil || h.Fanout != nil || h.Schedule != nil {
			t.Errorf("%s=%q OTEL_SDK_DISABLED=%q: hooks set", envEndpoint, env[0], env[1])
		}
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

// TestFanoutAndScheduleSpans: fanout's and schedule's tasks are children
// of a pilot.fanout and a pilot.schedule span, one pilot.task span per job
// (the hooks wrap each dispatch once), exported before run returns.
func TestFanoutAndScheduleSpans(t *testing.T) {
	dir := t.TempDir()
	workdir, taskFile, provs := filepath.Join(dir, "work"), filepath.Join(dir, "task.md"), filepath.Join(dir, "providers.json")
	os.Mkdir(workdir, 0o755)
	os.WriteFile(taskFile, []byte("# task\nsay hello\n"), 0o644)
	entries := map[string]any{}
	for name, script := range map[string][]string{"ok": {"out=done"}, "bad": {"err=API error: 500 Internal Server Error", "exit=1"}} {
		p, err := pilottest.FakeAgent(name, script...)
		if err != nil {
			t.Fatal(err)
		}
		entries[name] = map[string]any{"runner": p.Runner, "argv": p.Argv, "env": p.Env}
	}
	data, _ := json.Marshal(map[string]any{"providers": entries})
	os.WriteFile(provs, data, 0o644)
	graph := filepath.Join(dir, "graph.json")
	data, _ = json.Marshal(map[string]any{"jobs": []map[string]any{
		{"id": "first", "provider": "ok", "mode": "review", "task_file": taskFile},
		{"id": "second", "provider": "ok", "mode": "review", "task_file": taskFile, "deps": []string{"first"}},
	}})
	os.WriteFile(graph, data, 0o644)

	for _, c := range []struct {
		root  string
		args  []string
		code  int
		tasks int
	}{
		{"pilot.fanout", []string{"fanout", "--workdir", workdir, "--job", "ok:review:" + taskFile, "--job", "bad:review:" + taskFile}, 1, 2},
		{"pilot.schedule", []string{"schedule", "--graph", graph, "--workdir", workdir, "--state", filepath.Join(dir, "state")}, 0, 2},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			r := newReceiver(t)
			for _, kv := range otelEnv(t, r) {
				k, v, _ := strings.Cut(kv, "=")
				if strings.HasPrefix(k, "XDG_") || k == envEndpoint {
					t.Setenv(k, v)
				}
			}
			var stdout, stderr bytes.Buffer
			args := append(c.args, "--providers-file", provs, "--run-dir", filepath.Join(dir, "runs"))
			if code := run(context.Background(), args, nil, &stdout, &stderr); code != c.code {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout.String(), stderr.String())
			}
			r.check(t)
			var root *tracepb.Span
			var tasks []*tracepb.Span
			for _, e := range r.spans() {
				switch e.span.Name {
				case c.root:
					root = e.span
				case "pilot.task":
					tasks = append(tasks, e.span)
				}
			}
			if root == nil {
				t.Fatalf("no %s span exported", c.root)
			}
			if len(tasks) != c.tasks {
				t.Errorf("%d pilot.task spans, want %d (one per job)", len(tasks), c.tasks)
			}
			for _, s := range tasks {
				if !bytes.Equal(s.ParentSpanId, root.SpanId) {
					t.Errorf("pilot.task %s is not a child of %s", attr(s.Attributes, "pilot.job"), c.root)
				}
			}
		})
	}
}
