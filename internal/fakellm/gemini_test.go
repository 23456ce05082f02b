package fakellm

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The Gemini API tests drive the server with a plain HTTP client, as
// @google/genai (gemini-cli's SDK) calls it.

const (
	gStreamPath = "/v1beta/models/m1:streamGenerateContent?alt=sse"
	gPath       = "/v1beta/models/m1:generateContent"
)

// geminiResp is the part of a GenerateContentResponse the tests read.
type geminiResp struct {
	Candidates []struct {
		Content struct {
			Role  string
			Parts []map[string]any
		}
		FinishReason string
		Index        int
	}
	UsageMetadata map[string]float64
	ModelVersion  string
	ResponseID    string
}

// geminiAnswer is what a client makes of a list of responses: the text
// joined, the function calls, the last finish reason and usage.
type geminiAnswer struct {
	Text   string
	Calls  []map[string]any
	Finish string
	Usage  map[string]float64
	IDs    []string
}

func readGemini(t *testing.T, resps []geminiResp) geminiAnswer {
	t.Helper()
	var a geminiAnswer
	for _, r := range resps {
		if len(r.Candidates) != 1 {
			t.Fatalf("response with %d candidates: %+v", len(r.Candidates), r)
		}
		c := r.Candidates[0]
		if c.Content.Role != "model" || c.Index != 0 {
			t.Errorf("candidate role %q index %d", c.Content.Role, c.Index)
		}
		for _, p := range c.Content.Parts {
			if s, ok := p["text"].(string); ok {
				a.Text += s
			}
			if fc, ok := p["functionCall"].(map[string]any); ok {
				a.Calls = append(a.Calls, fc)
			}
		}
		if c.FinishReason != "" {
			a.Finish = c.FinishReason
		}
		if r.UsageMetadata != nil {
			a.Usage = r.UsageMetadata
		}
		a.IDs = append(a.IDs, r.ResponseID+"/"+r.ModelVersion)
	}
	return a
}

func TestGeminiStream(t *testing.T) {
	c := newClient(t)
	both := Tools(Bash("run_shell_command", "echo one"), Read("read_file", "file_path", "/etc/hostname"))
	both.Text = "two calls"
	s := start(t, both.WithUsage(usage), Text("done"))

	const key = "AIza-canary-key"
	resp := post(t, c, s, gStreamPath, map[string]any{"contents": []any{}}, "X-Goog-Api-Key", key)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	evs, err := newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	var resps []geminiResp
	for i, ev := range evs {
		if ev.Name != "" {
			t.Errorf("event %d has a name %q: the Gemini API sends data lines only", i, ev.Name)
		}
		resps = append(resps, decode[geminiResp](t, ev.Data))
	}
	// Text in two pieces, a response per call, the finishing response.
	if len(resps) != 5 {
		t.Fatalf("%d responses, want 5: %v", len(resps), evs)
	}
	for i, r := range resps[:4] {
		if r.Candidates[0].FinishReason != "" || r.UsageMetadata != nil {
			t.Errorf("response %d finishes early: %s", i, evs[i].Data)
		}
	}
	got := readGemini(t, resps)
	want := geminiAnswer{
		Text: "two calls",
		Calls: []map[string]any{
			{"name": "run_shell_command", "args": map[string]any{"command": "echo one"}},
			{"name": "read_file", "args": map[string]any{"file_path": "/etc/hostname"}},
		},
		Finish: "STOP",
		Usage:  map[string]float64{"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18, "cachedContentTokenCount": 3},
		IDs:    []string{"gemini_1/m1", "gemini_1/m1", "gemini_1/m1", "gemini_1/m1", "gemini_1/m1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streamed answer (-want +got):\n%s", diff)
	}

	// The base URL may end in /v1; the SDK then asks under /v1/v1beta.
	resp = post(t, c, s, "/v1"+gStreamPath, map[string]any{})
	evs, err = newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	resps = nil
	for _, ev := range evs {
		resps = append(resps, decode[geminiResp](t, ev.Data))
	}
	if a := readGemini(t, resps); a.Text != "done" || a.Finish != "STOP" || a.Usage["promptTokenCount"] != 100 {
		t.Errorf("second answer: %+v", a)
	}

	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].KeyHeader != "X-Goog-Api-Key" || reqs[0].Key != Fingerprint(key) ||
		reqs[0].Header.Get("X-Goog-Api-Key") != Fingerprint(key) || reqs[0].Turn != 1 || reqs[1].Turn != 2 ||
		reqs[0].Path != "/v1beta/models/m1:streamGenerateContent" || reqs[1].Path != "/v1/v1beta/models/m1:streamGenerateContent" {
		t.Errorf("records: %+v", reqs)
	}
}

func TestGeminiNotStreamed(t *testing.T) {
	c := newClient(t)
	s := start(t, Tools(Bash("run_shell_command", "ls")), Text("an array"), Text("late"))

	// generateContent: one response with every part.
	resp := post(t, c, s, gPath, map[string]any{"contents": []any{}})
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	got := decode[map[string]any](t, readBody(t, resp))
	want := map[string]any{
		"candidates": []any{map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{
				map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{"command": "ls"}}},
			}},
			"finishReason": "STOP", "index": 0.0,
		}},
		"usageMetadata": map[string]any{"promptTokenCount": 100.0, "candidatesTokenCount": 20.0, "totalTokenCount": 120.0, "cachedContentTokenCount": 0.0},
		"modelVersion":  "m1", "responseId": "gemini_1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generateContent (-want +got):\n%s", diff)
	}

	// streamGenerateContent without alt=sse: the responses as one JSON array.
	resp = post(t, c, s, "/v1beta/models/m1:streamGenerateContent", map[string]any{})
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	if a := readGemini(t, decode[[]geminiResp](t, readBody(t, resp))); a.Text != "an array" || a.Finish != "STOP" {
		t.Errorf("array answer: %+v", a)
	}

	// countTokens takes no step; other methods and bad paths are 404.
	ct := decode[map[string]any](t, readBody(t, post(t, c, s, "/v1beta/models/m1:countTokens", map[string]any{})))
	if ct["totalTokens"] != 100.0 {
		t.Errorf("countTokens: %v", ct)
	}
	for _, path := range []string{"/v1beta/models/m1:embedContent", "/v1beta/models/:generateContent", "/v1beta/models/a/b:generateContent", "/v1beta/models/m1"} {
		if resp := post(t, c, s, path, map[string]any{}); resp.StatusCode != 404 {
			t.Errorf("%s: status %d, want 404", path, resp.StatusCode)
		}
	}
	if n := s.Remaining(); n != 1 {
		t.Errorf("Remaining %d, want 1: countTokens and unknown paths take no step", n)
	}
}

func TestGeminiErrors(t *testing.T) {
	type gErr struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]any
		}
	}
	for _, tc := range []struct {
		name       string
		step       Step
		code       int
		status     string
		message    string
		retryAfter string
		details    []map[string]any
	}{
		{"429", RateLimited("3"), 429, "RESOURCE_EXHAUSTED", "Rate limit reached (fakellm)", "3",
			[]map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}}},
		{"500", Status(500, "boom"), 500, "INTERNAL", "boom", "", nil},
		{"503", Status(503, "busy"), 503, "UNAVAILABLE", "busy", "", nil},
		{"401", Status(401, "bad key"), 401, "UNAUTHENTICATED", "bad key", "", nil},
		{"403", Status(403, ""), 403, "PERMISSION_DENIED", "fakellm: scripted HTTP 403", "", nil},
		{"overflow", ContextOverflow(), 400, "INVALID_ARGUMENT",
			"The input token count (200000) exceeds the maximum number of tokens allowed (128000).", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			s := start(t, tc.step, tc.step)
			for _, path := range []string{gStreamPath, gPath} {
				resp := post(t, c, s, path, map[string]any{})
				body := readBody(t, resp)
				if resp.StatusCode != tc.code || resp.Header.Get("Retry-After") != tc.retryAfter ||
					resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: status %d retry-after %q content type %q", path, resp.StatusCode,
						resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
				}
				e := decode[gErr](t, body)
				if e.Error.Code != tc.code || e.Error.Status != tc.status || e.Error.Message != tc.message {
					t.Errorf("%s: body %s", path, body)
				}
				if diff := cmp.Diff(tc.details, e.Error.Details); diff != "" {
					t.Errorf("%s: details (-want +got):\n%s", path, diff)
				}
			}
		})
	}

	// An exhausted script and a bad body answer in the Gemini shape too.
	c := newClient(t)
	s := start(t)
	body := readBody(t, post(t, c, s, gStreamPath, map[string]any{}))
	if e := decode[gErr](t, body); e.Error.Code != 500 || e.Error.Status != "INTERNAL" ||
		!strings.Contains(e.Error.Message, "fakellm: script exhausted") {
		t.Errorf("exhausted: %s", body)
	}
	bad, err := c.Post(s.URL()+gPath, "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Body.Close()
	b, _ := io.ReadAll(bad.Body)
	if e := decode[gErr](t, string(b)); bad.StatusCode != 400 || e.Error.Status != "INVALID_ARGUMENT" ||
		!strings.Contains(e.Error.Message, "fakellm: body is not JSON") {
		t.Errorf("bad body: %d %s", bad.StatusCode, b)
	}
}

// TestGeminiCut checks held and dropped streams and answers on the Gemini
// API: some responses, none with the finish reason.
func TestGeminiCut(t *testing.T) {
	noFinish := func(t *testing.T, evs []event) {
		t.Helper()
		if len(evs) == 0 {
			t.Errorf("no response before the cut")
		}
		for _, ev := range evs {
			if strings.Contains(ev.Data, "finishReason") || strings.Contains(ev.Data, "usageMetadata") {
				t.Errorf("a cut stream has its end: %s", ev.Data)
			}
		}
	}
	c := newClient(t)
	release := make(chan struct{})
	s := start(t, Text("held answer").Held(release), Text("by close").Held(nil))
	noFinish(t, released(t, post(t, c, s, gStreamPath, map[string]any{}), release))
	heldUntilClose(t, post(t, c, s, gStreamPath, map[string]any{}), s)

	s = start(t, Text("dropped answer").Dropped(), Text("not streamed, dropped").Dropped())
	resp := post(t, c, s, gStreamPath, map[string]any{})
	evs, err := newSSE(resp.Body).all()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("dropped stream: error %v, want unexpected EOF", err)
	}
	noFinish(t, evs)
	resp = post(t, c, s, gPath, map[string]any{})
	b, err := io.ReadAll(resp.Body)
	if err == nil || len(b) == 0 || json.Valid(b) {
		t.Errorf("dropped generateContent: %q, %v; want its first half and a broken connection", b, err)
	}
}

func TestGeminiSilent(t *testing.T) {
	wake := make(chan struct{})
	s := start(t, Text("awake").Silenced(wake))
	conn := rawPost(t, s, gStreamPath, `{}`)
	// Nothing comes while the step is silent (the deadline bounds only
	// how long the test looks).
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var one [1]byte
	if n, err := conn.Read(one[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent step: read %d bytes, %v; want nothing", n, err)
	}
	conn.SetReadDeadline(time.Time{})
	close(wake)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := newSSE(resp.Body).all()
	if err != nil || len(evs) != 3 {
		t.Fatalf("woken answer: %v, %v", evs, err)
	}
	var resps []geminiResp
	for _, ev := range evs {
		resps = append(resps, decode[geminiResp](t, ev.Data))
	}
	if a := readGemini(t, resps); a.Text != "awake" {
		t.Errorf("woken answer: %+v", a)
	}
}

func TestGeminiRouter(t *testing.T) {
	c := newClient(t)
	s := New(Script{Steps: []Step{Text("the turn")}, Aside: GeminiRouter})
	defer s.Close()
	// gemini-cli 0.61's routing request: generateContent to a small model,
	// the classifier's system prompt (after a newline), a JSON schema.
	route := map[string]any{
		"contents":          []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "e2e task"}}}},
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "\nYou are a specialized Task Routing AI. Your sole function is..."}}},
		"generationConfig":  map[string]any{"responseMimeType": "application/json"},
	}
	got := decode[geminiResp](t, readBody(t, post(t, c, s, "/v1beta/models/gemini-3.5-flash-lite:generateContent", route)))
	var choice map[string]any
	if err := json.Unmarshal([]byte(readGemini(t, []geminiResp{got}).Text), &choice); err != nil {
		t.Fatalf("route answer is not JSON: %v", err)
	}
	if choice["model_choice"] != "flash" || choice["complexity_score"] != 10.0 {
		t.Errorf("route answer %v", choice)
	}
	turn := map[string]any{"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are Gemini CLI"}}}}
	evs, err := newSSE(post(t, c, s, gStreamPath, turn).Body).all()
	if err != nil || len(evs) == 0 {
		t.Fatalf("turn: %v %v", evs, err)
	}
	var asides []bool
	for _, r := range s.Requests() {
		asides = append(asides, r.Aside)
	}
	if diff := cmp.Diff([]bool{true, false}, asides); diff != "" {
		t.Errorf("Aside in records (-want +got):\n%s", diff)
	}
	if s.Remaining() != 0 {
		t.Errorf("the turn did not take the step")
	}
}
