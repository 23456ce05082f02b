package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// event is one server-sent event.
type event struct {
	Name string // the event: field, "" if none
	Data string
}

// sseReader reads server-sent events from a response body.
type sseReader struct{ r *bufio.Reader }

func newSSE(r io.Reader) *sseReader { return &sseReader{bufio.NewReader(r)} }

// next reads the next event; io.EOF after the last one, another error if
// the stream broke.
func (s *sseReader) next() (event, error) {
	var ev event
	var seen bool
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if seen {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.Name, seen = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			ev.Data, seen = strings.TrimPrefix(line, "data: "), true
		default:
			return ev, fmt.Errorf("not an SSE line: %q", line)
		}
	}
}

// all reads every event up to the end of the stream.
func (s *sseReader) all() ([]event, error) {
	var evs []event
	for {
		ev, err := s.next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func start(t *testing.T, steps ...Step) *Server {
	t.Helper()
	s := New(Script{Model: "m1", Steps: steps})
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, c *http.Client, s *Server, path string, body any, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(mustJSON(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decode[T any](t *testing.T, data string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("decoding %q: %v", data, err)
	}
	return v
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

var (
	twoCalls = Tools(Bash("bash", "echo hi"), Read("read", "path", "/tmp/x"))
	usage    = Usage{Input: 11, Output: 7, Cached: 3}
)

func TestBindsLoopback(t *testing.T) {
	s := start(t)
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || host != "127.0.0.1" || port == "0" || port == "" {
		t.Errorf("URL %q: want http://127.0.0.1:PORT with a real port", s.URL())
	}
}

// chatChunk is the part of a Chat Completions chunk the tests read.
type chatChunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
		Details    struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// chatResult is a Chat Completions stream put back together.
type chatResult struct {
	Role, Text, Finish string
	Calls              []Call
	IDs                []string
	Usage              *Usage
	Done               bool
}

func readChat(t *testing.T, evs []event) chatResult {
	t.Helper()
	var r chatResult
	for i, ev := range evs {
		if r.Done {
			t.Fatalf("event after [DONE]: %q", ev.Data)
		}
		if ev.Name != "" {
			t.Errorf("chat event %d has an event name %q", i, ev.Name)
		}
		if ev.Data == "[DONE]" {
			r.Done = true
			continue
		}
		c := decode[chatChunk](t, ev.Data)
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Errorf("usage chunk with choices: %q", ev.Data)
			}
			if c.Usage.Total != c.Usage.Prompt+c.Usage.Completion {
				t.Errorf("usage total %d != %d + %d", c.Usage.Total, c.Usage.Prompt, c.Usage.Completion)
			}
			r.Usage = &Usage{Input: c.Usage.Prompt, Output: c.Usage.Completion, Cached: c.Usage.Details.Cached}
			continue
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk with %d choices: %q", len(c.Choices), ev.Data)
		}
		ch := c.Choices[0]
		if ch.Delta.Role != "" {
			r.Role = ch.Delta.Role
		}
		r.Text += ch.Delta.Content
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == len(r.Calls) {
				if tc.ID == "" || tc.Function.Name == "" || tc.Type != "function" {
					t.Errorf("first chunk of tool call %d lacks id, name or type: %q", tc.Index, ev.Data)
				}
				r.Calls = append(r.Calls, Call{Name: tc.Function.Name})
				r.IDs = append(r.IDs, tc.ID)
			} else if tc.Index != len(r.Calls)-1 {
				t.Fatalf("tool call index %d out of order: %q", tc.Index, ev.Data)
			}
			r.Calls[tc.Index].Arguments += tc.Function.Arguments
		}
		if ch.FinishReason != nil {
			r.Finish = *ch.FinishReason
		}
	}
	return r
}

func TestChatCompletions(t *testing.T) {
	c := newClient(t)
	s := start(t, Text("hello there").WithUsage(usage), twoCalls, Text("plain"), Text("whole"))

	resp := post(t, c, s, "/v1/chat/completions", map[string]any{
		"model": "m1", "stream": true, "stream_options": map[string]any{"include_usage": true}})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs, err := newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	want := chatResult{Role: "assistant", Text: "hello there", Finish: "stop", Usage: &usage, Done: true}
	if diff := cmp.Diff(want, readChat(t, evs)); diff != "" {
		t.Errorf("text answer (-want +got):\n%s", diff)
	}
	if n := len(evs); n < 5 {
		t.Errorf("%d events: want the text in more than one delta", n)
	}

	resp = post(t, c, s, "/chat/completions", map[string]any{"stream": true}) // no /v1, no usage asked
	evs, err = newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	want = chatResult{Role: "assistant", Finish: "tool_calls", Done: true,
		Calls: twoCalls.Calls, IDs: []string{"call_2_0", "call_2_1"}}
	if diff := cmp.Diff(want, readChat(t, evs)); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}

	// Not streamed: one JSON completion.
	resp = post(t, c, s, "/v1/chat/completions", map[string]any{"stream": false})
	got := decode[map[string]any](t, readBody(t, resp))
	wantJSON := map[string]any{
		"id": "chatcmpl-3", "object": "chat.completion", "created": 0.0, "model": "m1",
		"choices": []any{map[string]any{"index": 0.0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "plain"}}},
		"usage": map[string]any{"prompt_tokens": 100.0, "completion_tokens": 20.0, "total_tokens": 120.0,
			"prompt_tokens_details": map[string]any{"cached_tokens": 0.0}},
	}
	if diff := cmp.Diff(wantJSON, got); diff != "" {
		t.Errorf("non-streamed answer (-want +got):\n%s", diff)
	}

	// GET /v1/models names the model and takes no step.
	mresp, err := c.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	models := decode[struct {
		Data []struct{ ID string } `json:"data"`
	}](t, readBody(t, mresp))
	if len(models.Data) != 1 || models.Data[0].ID != "m1" {
		t.Errorf("models %+v: want one, m1", models)
	}
	if s.Remaining() != 1 {
		t.Errorf("Remaining %d after 3 turns of 4 steps", s.Remaining())
	}
}

// respEvent is the part of a Responses API event the tests read.
type respEvent struct {
	Type     string         `json:"type"`
	Seq      *int           `json:"sequence_number"`
	Delta    string         `json:"delta"`
	Item     map[string]any `json:"item"`
	Response *struct {
		ID     string         `json:"id"`
		Status string         `json:"status"`
		Output []any          `json:"output"`
		Error  map[string]any `json:"error"`
		Usage  *struct {
			Input   int `json:"input_tokens"`
			Output  int `json:"output_tokens"`
			Total   int `json:"total_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	} `json:"response"`
}

func readResponses(t *testing.T, evs []event) (names []string, text string, done []map[string]any, last respEvent) {
	t.Helper()
	for i, ev := range evs {
		e := decode[respEvent](t, ev.Data)
		if e.Type != ev.Name {
			t.Errorf("event %q carries type %q", ev.Name, e.Type)
		}
		if e.Seq == nil || *e.Seq != i {
			t.Errorf("event %d %q: sequence_number %v", i, ev.Name, e.Seq)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "response.output_text.delta":
			text += e.Delta
		case "response.output_item.done":
			done = append(done, e.Item)
		}
		last = e
	}
	return names, text, done, last
}

func TestResponses(t *testing.T) {
	c := newClient(t)
	both := Tools(Bash("shell", "ls -l"))
	both.Text = "let me look"
	s := start(t, both.WithUsage(usage), ContextOverflow(), Text("not streamed"))

	resp := post(t, c, s, "/v1/responses", map[string]any{"model": "m1", "stream": true})
	evs, err := newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	names, text, done, last := readResponses(t, evs)
	wantNames := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done",
		"response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	if text != "let me look" {
		t.Errorf("text deltas %q", text)
	}
	wantDone := []map[string]any{
		{"type": "message", "id": "msg_1_0", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "let me look", "annotations": []any{}}}},
		{"type": "function_call", "id": "fc_1_0", "status": "completed", "call_id": "call_1_0",
			"name": "shell", "arguments": `{"command":"ls -l"}`},
	}
	if diff := cmp.Diff(wantDone, done); diff != "" {
		t.Errorf("output_item.done items (-want +got):\n%s", diff)
	}
	if r := last.Response; r == nil || r.ID != "resp_1" || r.Status != "completed" || len(r.Output) != 2 || r.Usage == nil ||
		r.Usage.Input != 11 || r.Usage.Output != 7 || r.Usage.Total != 18 || r.Usage.Details.Cached != 3 {
		t.Errorf("response.completed: %+v", last.Response)
	}

	// A context overflow is a stream that fails with codex's code.
	resp = post(t, c, s, "/v1/responses", map[string]any{"stream": true})
	if resp.StatusCode != 200 {
		t.Errorf("overflow status %d, want 200 and response.failed", resp.StatusCode)
	}
	evs, err = newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	names, _, _, last = readResponses(t, evs)
	if diff := cmp.Diff([]string{"response.created", "response.in_progress", "response.failed"}, names); diff != "" {
		t.Errorf("overflow events (-want +got):\n%s", diff)
	}
	if r := last.Response; r == nil || r.Status != "failed" || r.Error["code"] != "context_length_exceeded" ||
		!strings.Contains(fmt.Sprint(r.Error["message"]), "maximum context length") {
		t.Errorf("response.failed: %+v", last.Response)
	}

	resp = post(t, c, s, "/v1/responses", map[string]any{})
	got := decode[map[string]any](t, readBody(t, resp))
	if got["status"] != "completed" || got["id"] != "resp_3" || len(got["output"].([]any)) != 1 {
		t.Errorf("non-streamed response: %v", got)
	}
}

// msgEvent is the part of an Anthropic stream event the tests read.
type msgEvent struct {
	Type         string         `json:"type"`
	Index        int            `json:"index"`
	Message      map[string]any `json:"message"`
	ContentBlock map[string]any `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage struct {
		Output int `json:"output_tokens"`
	} `json:"usage"`
}

func TestMessages(t *testing.T) {
	c := newClient(t)
	both := Tools(Bash("Bash", "echo one"), Bash("Bash", "echo two"))
	both.Text = "two commands"
	s := start(t, both.WithUsage(usage), Tools(Read("Read", "file_path", "/etc/hostname")))

	resp := post(t, c, s, "/v1/messages", map[string]any{"model": "m1", "stream": true, "max_tokens": 10})
	evs, err := newSSE(resp.Body).all()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var text string
	var blocks []map[string]any
	args := map[int]string{}
	var stop string
	var in, out int
	for _, ev := range evs {
		e := decode[msgEvent](t, ev.Data)
		if e.Type != ev.Name {
			t.Errorf("event %q carries type %q", ev.Name, e.Type)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "message_start":
			in = int(e.Message["usage"].(map[string]any)["input_tokens"].(float64))
			if e.Message["id"] != "msg_1" || e.Message["role"] != "assistant" || e.Message["model"] != "m1" {
				t.Errorf("message_start: %v", e.Message)
			}
		case "content_block_start":
			if e.Index != len(blocks) {
				t.Errorf("block index %d, want %d", e.Index, len(blocks))
			}
			blocks = append(blocks, e.ContentBlock)
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				text += e.Delta.Text
			case "input_json_delta":
				args[e.Index] += e.Delta.PartialJSON
			default:
				t.Errorf("delta type %q", e.Delta.Type)
			}
		case "message_delta":
			stop, out = e.Delta.StopReason, e.Usage.Output
		}
	}
	wantNames := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("event sequence (-want +got):\n%s", diff)
	}
	wantBlocks := []map[string]any{
		{"type": "text", "text": ""},
		{"type": "tool_use", "id": "toolu_1_0", "name": "Bash", "input": map[string]any{}},
		{"type": "tool_use", "id": "toolu_1_1", "name": "Bash", "input": map[string]any{}},
	}
	if diff := cmp.Diff(wantBlocks, blocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if text != "two commands" || args[1] != `{"command":"echo one"}` || args[2] != `{"command":"echo two"}` {
		t.Errorf("text %q, arguments %q", text, args)
	}
	if stop != "tool_use" || in != 11 || out != 7 {
		t.Errorf("stop_reason %q, usage %d in %d out", stop, in, out)
	}

	// count_tokens takes no step; stream false gets one JSON message.
	ct := decode[map[string]any](t, readBody(t, post(t, c, s, "/v1/messages/count_tokens", map[string]any{"model": "m1"})))
	if ct["input_tokens"] != 100.0 {
		t.Errorf("count_tokens: %v", ct)
	}
	got := decode[map[string]any](t, readBody(t, post(t, c, s, "/v1/messages", map[string]any{"stream": false})))
	want := map[string]any{
		"id": "msg_2", "type": "message", "role": "assistant", "model": "m1", "stop_reason": "tool_use", "stop_sequence": nil,
		"content": []any{map[string]any{"type": "tool_use", "id": "toolu_2_0", "name": "Read",
			"input": map[string]any{"file_path": "/etc/hostname"}}},
		"usage": map[string]any{"input_tokens": 100.0, "output_tokens": 20.0,
			"cache_read_input_tokens": 0.0, "cache_creation_input_tokens": 0.0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("non-streamed message (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	paths := []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"}
	for _, tc := range []struct {
		name       string
		step       Step
		status     int
		retryAfter string
		// the error type and code on the OpenAI APIs, the type on Messages
		openAIType, openAICode, anthropicType, message string
	}{
		{"429", RateLimited("3"), 429, "3", "rate_limit_error", "rate_limit_exceeded", "rate_limit_error", "Rate limit"},
		{"500", Status(500, "boom"), 500, "", "server_error", "", "api_error", "boom"},
		{"401", Status(401, "bad key"), 401, "", "invalid_request_error", "invalid_api_key", "authentication_error", "bad key"},
		{"529", Status(529, ""), 529, "", "server_error", "", "overloaded_error", "scripted HTTP 529"},
		{"overflow", ContextOverflow(), 400, "", "invalid_request_error", "context_length_exceeded", "invalid_request_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			s := start(t, tc.step, tc.step, tc.step)
			for i, path := range paths {
				resp := post(t, c, s, path, map[string]any{"stream": true})
				body := readBody(t, resp)
				if tc.name == "overflow" && path == "/v1/responses" {
					continue // a stream; TestResponses checks it
				}
				if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != tc.retryAfter {
					t.Errorf("%s: status %d retry-after %q, want %d %q", path, resp.StatusCode,
						resp.Header.Get("Retry-After"), tc.status, tc.retryAfter)
				}
				if i < 2 {
					e := decode[struct {
						Error struct {
							Message, Type string
							Code          *string
						}
					}](t, body)
					code := ""
					if e.Error.Code != nil {
						code = *e.Error.Code
					}
					if e.Error.Type != tc.openAIType || code != tc.openAICode || !strings.Contains(e.Error.Message, tc.message) {
						t.Errorf("%s: body %s", path, body)
					}
					if tc.name == "overflow" && !strings.HasPrefix(e.Error.Message, "This model's maximum context length is") {
						t.Errorf("%s: overflow message %q", path, e.Error.Message)
					}
					continue
				}
				e := decode[struct {
					Type  string
					Error struct{ Type, Message string }
				}](t, body)
				if e.Type != "error" || e.Error.Type != tc.anthropicType || !strings.Contains(e.Error.Message, tc.message) {
					t.Errorf("%s: body %s", path, body)
				}
				if tc.name == "overflow" && !strings.HasPrefix(e.Error.Message, "prompt is too long") {
					t.Errorf("%s: overflow message %q", path, e.Error.Message)
				}
			}
		})
	}
}

func TestForeverAndExhausted(t *testing.T) {
	c := newClient(t)
	limited := RateLimited("1")
	limited.Header = http.Header{"Retry-After-Ms": {"1000"}, "X-Should-Retry": {"true"}}
	s := start(t, Text("first"), limited.Forever(), Text("never reached"))
	post(t, c, s, "/v1/messages", map[string]any{})
	for i := range 5 {
		resp := post(t, c, s, "/v1/chat/completions", map[string]any{})
		h := resp.Header
		if resp.StatusCode != 429 || h.Get("Retry-After") != "1" || h.Get("Retry-After-Ms") != "1000" ||
			h.Get("X-Should-Retry") != "true" || h.Get("X-Request-Id") != fmt.Sprintf("req_fakellm_%d", i+2) {
			t.Fatalf("status %d, headers %v: want 429 every time with the scripted headers", resp.StatusCode, h)
		}
	}
	if n := s.Remaining(); n != 0 {
		t.Errorf("Remaining %d after a Forever step", n)
	}

	s = start(t, Text("only"))
	post(t, c, s, "/v1/messages", map[string]any{})
	resp := post(t, c, s, "/v1/messages", map[string]any{"stream": true})
	body := readBody(t, resp)
	if resp.StatusCode != 500 || !strings.Contains(body, "fakellm: script exhausted: turn request 2 has no step (the script has 1 steps)") {
		t.Errorf("exhausted: %d %s", resp.StatusCode, body)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Exhausted || !reqs[1].Exhausted || reqs[1].Step != -1 || reqs[1].Turn != 2 {
		t.Errorf("records: %+v", reqs)
	}
}

func TestRecording(t *testing.T) {
	c := newClient(t)
	const secret = "sk-canary-0123456789"
	s := start(t, Text("a"), Text("b"))
	post(t, c, s, "/v1/chat/completions", map[string]any{"model": "m1", "messages": []any{"hi"}},
		"Authorization", "Bearer "+secret, "X-Trace", "t1")
	post(t, c, s, "/v1/messages/count_tokens", map[string]any{"n": 1}, "X-Api-Key", secret)
	post(t, c, s, "/v1/messages", map[string]any{"stream": false})
	bad, err := c.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	bad.Body.Close()
	if bad.StatusCode != 400 {
		t.Errorf("bad JSON: status %d", bad.StatusCode)
	}
	nf, err := c.Get(s.URL() + "/v2/nothing")
	if err != nil {
		t.Fatal(err)
	}
	nf.Body.Close()
	if nf.StatusCode != 404 {
		t.Errorf("unknown path: status %d", nf.StatusCode)
	}

	reqs := s.Requests()
	if strings.Contains(fmt.Sprintf("%#v", reqs), secret) {
		t.Fatalf("a record holds the API key: %#v", reqs)
	}
	type row struct {
		Method, Path, KeyHeader, Key, Auth string
		Body                               any
		BodyError                          bool
		Turn, Step                         int
	}
	var got []row
	for _, r := range reqs {
		got = append(got, row{r.Method, r.Path, r.KeyHeader, r.Key, r.Header.Get("Authorization"), r.Body,
			r.BodyError != "", r.Turn, r.Step})
	}
	fp := Fingerprint(secret)
	want := []row{
		{"POST", "/v1/chat/completions", "Authorization", fp, fp, map[string]any{"model": "m1", "messages": []any{"hi"}}, false, 1, 0},
		{"POST", "/v1/messages/count_tokens", "X-Api-Key", fp, "", map[string]any{"n": 1.0}, false, 0, -1},
		{"POST", "/v1/messages", "", "", "", map[string]any{"stream": false}, false, 2, 1},
		{"POST", "/v1/responses", "", "", "", nil, true, 0, -1},
		{"GET", "/v2/nothing", "", "", "", nil, false, 0, -1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if reqs[0].Header.Get("X-Trace") != "t1" {
		t.Errorf("headers not recorded: %v", reqs[0].Header)
	}
	if s.Remaining() != 0 {
		t.Errorf("a bad request took a step")
	}
	// Requests returns a copy.
	reqs[0].Header.Set("X-Trace", "changed")
	if s.Requests()[0].Header.Get("X-Trace") != "t1" {
		t.Errorf("Requests shares its headers with the server")
	}
}

func TestDelay(t *testing.T) {
	c := newClient(t)
	const d = 150 * time.Millisecond
	s := start(t, Text("late").WithDelay(d))
	t0 := time.Now()
	resp := post(t, c, s, "/v1/chat/completions", map[string]any{"stream": true})
	if el := time.Since(t0); el < d {
		t.Errorf("headers after %v, want at least %v", el, d)
	}
	if evs, err := newSSE(resp.Body).all(); err != nil || readChat(t, evs).Text != "late" {
		t.Errorf("delayed answer: %v %v", evs, err)
	}
}

// TestHeld checks a stream held mid-way, ended by its release channel and
// by Close.
func TestHeld(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		t.Run(strings.TrimPrefix(path, "/v1/"), func(t *testing.T) {
			c := newClient(t)
			release := make(chan struct{})
			s := start(t, Text("held answer").Held(release), Text("by close").Held(nil))

			// Released: the stream ends cleanly but without its end.
			checkCut(t, released(t, post(t, c, s, path, map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}), release))
			heldUntilClose(t, post(t, c, s, path, map[string]any{"stream": true}), s)
		})
	}
}

// released reads the first event of resp's stream, held by its step, then
// releases the step and returns every event the stream had.
func released(t *testing.T, resp *http.Response, release chan struct{}) []event {
	t.Helper()
	r := newSSE(resp.Body)
	first, err := r.next()
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	rest, err := r.all()
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	return append([]event{first}, rest...)
}

// heldUntilClose checks that resp's stream, held by a step with no release
// channel, is broken by s.Close, and that Close returns.
func heldUntilClose(t *testing.T, resp *http.Response, s *Server) {
	t.Helper()
	r := newSSE(resp.Body)
	if _, err := r.next(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	if _, err := r.all(); err == nil {
		t.Errorf("stream held until Close ended cleanly, want a broken stream")
	}
	<-closed
}

// checkCut checks that evs is a stream cut mid-way: some events, none of the
// last ones.
func checkCut(t *testing.T, evs []event) {
	t.Helper()
	if len(evs) < 2 {
		t.Errorf("%d events before the cut, want at least 2", len(evs))
	}
	for _, ev := range evs {
		switch {
		case ev.Data == "[DONE]", ev.Name == "response.completed", ev.Name == "message_stop",
			strings.Contains(ev.Data, `"finish_reason":"stop"`):
			t.Errorf("a cut stream has its end: %v", ev)
		}
	}
}

func TestDropped(t *testing.T) {
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		t.Run(strings.TrimPrefix(path, "/v1/"), func(t *testing.T) {
			c := newClient(t)
			s := start(t, Tools(Bash("bash", "echo dropped")).Dropped(), Text("not streamed, dropped").Dropped())
			resp := post(t, c, s, path, map[string]any{"stream": true})
			evs, err := newSSE(resp.Body).all()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("dropped stream: error %v, want unexpected EOF", err)
			}
			checkCut(t, evs)

			resp = post(t, c, s, path, map[string]any{"stream": false})
			b, err := io.ReadAll(resp.Body)
			if err == nil {
				t.Errorf("dropped JSON answer read whole: %s", b)
			}
			if len(b) == 0 || json.Valid(b) {
				t.Errorf("dropped JSON answer: %q, want its first half", b)
			}
		})
	}
}

func TestConcurrent(t *testing.T) {
	const n = 40
	var steps []Step
	var want []string
	for i := range n {
		steps = append(steps, Text(fmt.Sprintf("answer %02d", i)))
		want = append(want, fmt.Sprintf("answer %02d", i))
	}
	s := start(t, steps...)
	c := newClient(t)
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			evs, err := newSSE(resp.Body).all()
			if err != nil {
				t.Error(err)
				return
			}
			var text string
			for _, ev := range evs {
				if ev.Data != "[DONE]" {
					var ch chatChunk
					json.Unmarshal([]byte(ev.Data), &ch)
					text += ch.Choices[0].Delta.Content
				}
			}
			mu.Lock()
			got = append(got, text)
			mu.Unlock()
			_ = s.Requests()
			_ = i
		})
	}
	wg.Wait()
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("each step answers once (-want +got):\n%s", diff)
	}
	turns := map[int]bool{}
	for _, r := range s.Requests() {
		turns[r.Turn] = true
	}
	if len(turns) != n || s.Remaining() != 0 {
		t.Errorf("%d distinct turns, %d steps left", len(turns), s.Remaining())
	}
}

func TestCloseTwiceAndAfter(t *testing.T) {
	s := New(Script{})
	s.Close()
	s.Close()
	if _, err := http.Get(s.URL() + "/v1/models"); err == nil {
		t.Errorf("a closed server answered")
	}
}

func TestAsideAndToolCall(t *testing.T) {
	c := newClient(t)
	shell := ToolCall("shell", map[string]any{"command": []string{"bash", "-lc", "ls"}})
	s := New(Script{
		Steps: []Step{Tools(shell), Text("done")},
		Aside: func(r Request) (Step, bool) {
			if field(r.Body, "model") == "small" {
				return Text("a title"), true
			}
			return Step{}, false
		},
	})
	defer s.Close()
	var got []string
	for _, model := range []string{"small", "big", "small", "big"} {
		m := decode[map[string]any](t, readBody(t, post(t, c, s, "/v1/messages", map[string]any{"model": model})))
		got = append(got, mustJSON(m["content"]))
	}
	want := []string{
		`[{"text":"a title","type":"text"}]`,
		`[{"id":"toolu_1_0","input":{"command":["bash","-lc","ls"]},"name":"shell","type":"tool_use"}]`,
		`[{"text":"a title","type":"text"}]`,
		`[{"text":"done","type":"text"}]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	var asides []bool
	for _, r := range s.Requests() {
		asides = append(asides, r.Aside)
	}
	if diff := cmp.Diff([]bool{true, false, true, false}, asides); diff != "" {
		t.Errorf("Aside in records (-want +got):\n%s", diff)
	}
}

// FuzzTurnRequest feeds any body to each turn endpoint: the server answers
// 200 with a whole answer or 400 naming the problem, and records it.
func FuzzTurnRequest(f *testing.F) {
	f.Add(0, []byte(`{"stream":true}`))
	f.Add(1, []byte(`{"stream":true,"stream_options":{"include_usage":true}}`))
	f.Add(2, []byte(`{"stream":false,"model":"x"}`))
	f.Add(0, []byte(`{"stream":"yes","stream_options":7}`))
	f.Add(1, []byte(`[1,2]`))
	f.Add(2, []byte(`{`))
	f.Add(2, []byte(``))
	f.Add(3, []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"x"}]}}`))
	f.Add(4, []byte(`{"systemInstruction":"\nYou are a specialized Task Routing AI."}`))
	f.Add(5, []byte(`{"systemInstruction":{"parts":"no"}}`))
	paths := []string{"/v1/chat/completions", "/v1/responses", "/v1/messages",
		"/v1beta/models/m:streamGenerateContent?alt=sse", "/v1beta/models/m:generateContent", "/v1beta/models/m:streamGenerateContent"}
	f.Fuzz(func(t *testing.T, which int, body []byte) {
		s := New(Script{Steps: []Step{Tools(Bash("bash", "ls")).Forever()}, Aside: GeminiRouter})
		defer s.Close()
		path := paths[(which%len(paths)+len(paths))%len(paths)]
		w := httptest.NewRecorder()
		s.serve(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		out := w.Body.String()
		switch w.Code {
		case 200:
			if !json.Valid([]byte(out)) && !strings.Contains(out, "[DONE]") &&
				!strings.Contains(out, "response.completed") && !strings.Contains(out, "message_stop") &&
				!strings.Contains(out, `"finishReason":"STOP"`) {
				t.Errorf("%s: an incomplete answer: %q", path, out)
			}
		case 400:
			if !strings.Contains(out, "fakellm: body is not JSON") {
				t.Errorf("%s: 400 without the reason: %q", path, out)
			}
		default:
			t.Errorf("%s: status %d: %q", path, w.Code, out)
		}
		if n := len(s.Requests()); n != 1 {
			t.Errorf("%d records", n)
		}
	})
}

// rawPost sends a POST on a raw connection, so a test can see whether any
// byte of the answer came.
func rawPost(t *testing.T, s *Server, path, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, len(body), body)
	return conn
}

func TestSilent(t *testing.T) {
	wake := make(chan struct{})
	s := start(t, Text("awake").Silenced(wake), Text("never").Silenced(nil))

	conn := rawPost(t, s, "/v1/chat/completions", `{"stream":true}`)
	// Nothing comes while the step is silent. (A deadline that must pass:
	// its length bounds only how long the test looks.)
	conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var one [1]byte
	if n, err := conn.Read(one[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent step: read %d bytes, %v; want nothing", n, err)
	}
	close(wake)
	conn.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := newSSE(resp.Body).all()
	if err != nil || readChat(t, evs).Text != "awake" {
		t.Errorf("woken answer: %v, %v", evs, err)
	}

	// Silent until Close: Close ends it with a closed connection.
	conn = rawPost(t, s, "/v1/messages", `{"stream":true}`)
	waitTurns(t, s, 2)
	s.Close()
	if b, err := io.ReadAll(conn); len(b) != 0 || err != nil {
		t.Errorf("silent step after Close: %q, %v; want the connection closed, no byte", b, err)
	}
}

func TestCloseDuringDelay(t *testing.T) {
	s := start(t, Text("late").WithDelay(time.Hour))
	conn := rawPost(t, s, "/v1/responses", `{"stream":true}`)
	waitTurns(t, s, 1)
	s.Close()
	if b, err := io.ReadAll(conn); len(b) != 0 || err != nil {
		t.Errorf("delayed step after Close: %q, %v; want the connection closed, no byte", b, err)
	}
}

// waitTurns waits until n turn requests have reached the script, checking
// at each scheduler turn (the server signals nothing else).
func waitTurns(t *testing.T, s *Server, n int) {
	t.Helper()
	for {
		turns := 0
		for _, r := range s.Requests() {
			if r.Turn > 0 {
				turns++
			}
		}
		if turns >= n {
			return
		}
		if t.Context().Err() != nil {
			t.Fatal("the server never took the step")
		}
		runtime.Gosched()
	}
}

func TestAsideSystem(t *testing.T) {
	aside := AsideSystem("You are a title generator", Text("t"))
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"chat system", `{"messages":[{"role":"system","content":"You are a title generator. Only."},{"role":"user","content":"x"}]}`, true},
		{"chat developer blocks", `{"messages":[{"role":"developer","content":[{"type":"text","text":"You are a title generator"}]}]}`, true},
		{"chat user only", `{"messages":[{"role":"user","content":"You are a title generator"}]}`, false},
		{"chat other system", `{"messages":[{"role":"system","content":"You are opencode"}]}`, false},
		{"messages system string", `{"system":"You are a title generator","messages":[]}`, true},
		{"messages system blocks", `{"system":[{"type":"text","text":"x"},{"type":"text","text":"You are a title generator"}]}`, true},
		{"responses instructions", `{"instructions":"You are a title generator","input":[]}`, true},
		{"gemini systemInstruction parts", `{"systemInstruction":{"role":"user","parts":[{"text":"\nYou are a title generator"}]},"contents":[]}`, true},
		{"gemini systemInstruction string", `{"systemInstruction":"You are a title generator"}`, true},
		{"gemini contents only", `{"contents":[{"role":"user","parts":[{"text":"You are a title generator"}]}]}`, false},
		{"no body", `null`, false},
		{"odd shapes", `{"messages":"no","system":7,"instructions":{"a":1}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := aside(Request{Body: decode[any](t, tc.body)})
			if got != tc.want {
				t.Errorf("AsideSystem on %s = %v, want %v", tc.body, got, tc.want)
			}
		})
	}
}
