// Package fakellm is a scripted LLM server on 127.0.0.1 for end-to-end tests
// of real agent CLIs: it speaks just enough of four wire APIs for a CLI to
// run its real agent loop against a script.
//
// Endpoints:
//
//	POST /v1/chat/completions        OpenAI Chat Completions (pi, opencode)
//	POST /v1/responses               OpenAI Responses (codex)
//	POST /v1/messages                Anthropic Messages (Claude Code)
//	POST /v1/messages/count_tokens   {"input_tokens": N}; consumes no step
//	POST /v1beta/models/M:streamGenerateContent[?alt=sse]
//	POST /v1beta/models/M:generateContent
//	                                 the Gemini API (gemini-cli), any model M
//	POST /v1beta/models/M:countTokens
//	                                 {"totalTokens": N}; consumes no step
//	GET  /v1/models                  the script's model; consumes no step
//
// The POST endpoints that answer a model turn take "turn" requests.
// The script is global, not per API (a test drives one CLI, which speaks
// one API): each turn request, on whichever API it arrives, takes the next
// step, in arrival order, unless Script.Aside claims it first (for a CLI's
// side requests: AsideSystem matches opencode's title request,
// GeminiRouter gemini-cli's model routing request). Every
// request, turn or not, is recorded with its method,
// path, headers and decoded JSON body (see Request); an API key is recorded
// only as its Fingerprint. Paths are also served without the /v1 prefix,
// for clients whose base URL already ends in /v1 (the Gemini paths also
// under /v1/v1beta/).
//
// A Script is a model name and a list of steps. A Step says what its request
// gets; the constructors build the kinds:
//
//	Text("hi")                      an answer with text, finish "stop"/"end_turn"/"STOP"
//	Tools(Call{...}, Call{...})     one message with these tool calls (finish
//	                                "tool_calls"/"tool_use"), optionally with
//	                                text; a Call names the tool as the CLI
//	                                declared it: Bash("bash", "ls"),
//	                                Read("Read", "file_path", "/x"),
//	                                ToolCall("exec_command", map[string]any{...})
//	Status(500, "boom")             that HTTP status and an error body in the
//	                                API's own shape (Gemini: {"error":{"code",
//	                                "message","status"}}, status the google.rpc
//	                                name: 429 RESOURCE_EXHAUSTED, 500 INTERNAL,
//	                                401 UNAUTHENTICATED, ...)
//	RateLimited("2")                429 with retry-after: 2 (Gemini: also a
//	                                RetryInfo detail with retryDelay "2s",
//	                                where gemini-cli reads the delay)
//	ContextOverflow()               the API's context-length error: HTTP 400 with
//	                                code context_length_exceeded (Chat),
//	                                "prompt is too long" (Messages), 400
//	                                INVALID_ARGUMENT "The input token count (N)
//	                                exceeds the maximum number of tokens
//	                                allowed (M)." (Gemini); on
//	                                Responses a 200 stream that ends in
//	                                response.failed with that code, as codex
//	                                expects
//	s.WithDelay(d)                  wait d before the first byte
//	s.Silenced(wake)                send nothing, not even the status line,
//	                                until wake is closed (then answer as
//	                                scripted) or the server closes (then
//	                                close the connection)
//	s.Held(release)                 send the first half of the answer, flush,
//	                                then hold the connection open, sending
//	                                nothing, until release is closed (then
//	                                the response ends without its terminal
//	                                events) or the server closes
//	s.Dropped()                     send the first half of the answer, flush,
//	                                then close the TCP connection
//	s.Forever()                     this step answers this request and every
//	                                later one (e.g. 429 every time)
//
// Delay and Silenced apply to every step; Held and Dropped cut answers
// (a Status step, and ContextOverflow on Chat, Messages and Gemini, send
// their error body whole).
//
// Each answer carries the step's Usage (zero means DefaultUsage), so usage
// numbers are deterministic. Ids are deterministic too: the n-th turn
// request (from 1) answers with ids like "chatcmpl-n", "resp_n", "msg_n",
// "gemini_n" (responseId), and tool call ids like "call_n_i" / "toolu_n_i"
// (the Gemini API gives its function calls no ids).
//
// Every answer to a turn request carries the header x-request-id:
// req_fakellm_N (N is 0 for an Aside answer), plus the step's Header.
//
// When the script has no step left, a turn request gets HTTP 500 with an
// error body in the API's shape whose message says "fakellm: script
// exhausted", and its record has Exhausted set.
//
// Streaming formats (what the tests check, and what the clients parse):
//   - Chat: "data: {chunk}" lines; a first chunk with delta.role, content
//     deltas, tool_calls deltas (index, id, type "function", function.name,
//     then function.arguments pieces), a chunk with finish_reason, a usage
//     chunk with empty choices when stream_options.include_usage is true,
//     then "data: [DONE]".
//   - Responses: "event: NAME" + "data: {json with type NAME}"; response.created,
//     response.in_progress, per output item response.output_item.added,
//     (for messages) response.content_part.added, response.output_text.delta...,
//     response.output_text.done, response.content_part.done,
//     (for function calls) response.function_call_arguments.delta / .done,
//     response.output_item.done, then response.completed with usage (or
//     response.failed). codex ends a turn only on response.completed.
//   - Messages: message_start, ping, per block content_block_start (text, or
//     tool_use with id and name), content_block_delta (text_delta or
//     input_json_delta), content_block_stop, then message_delta (stop_reason,
//     usage) and message_stop. With "stream": false the answer is one JSON
//     message (as on the other two APIs).
//   - Gemini: with alt=sse, "data: {GenerateContentResponse}" frames, no
//     event names and no end marker: the text in pieces (candidates[0].
//     content, role "model", parts [{text}]), a response per tool call
//     (parts [{functionCall: {name, args}}], the arguments whole), then a
//     last response with an empty text part, finishReason "STOP" and
//     usageMetadata (promptTokenCount, candidatesTokenCount,
//     totalTokenCount, cachedContentTokenCount). Without alt=sse, the same
//     responses as one JSON array; generateContent answers one response
//     with every part. The path decides which, not the body.
//
// Seen running the real CLIs against this server (pi 0.73, codex 0.171,
// Claude Code 2.1.332, opencode 1.18, gemini-cli 0.61): each runs a tool
// call and reports the scripted usage; gemini-cli with no model chosen
// first asks for a model route with generateContent (answer it with
// GeminiRouter), does not retry a dropped stream ("[API Error:
// terminated]") and stops a turn whose text repeats itself (its loop
// detection); opencode first asks for a session title on the same
// endpoint (answer it with AsideSystem), and with NPM_CONFIG_REGISTRY set
// to this server it asks for /@opencode-ai/plugin, gets a 404 and goes on;
// codex maps response.failed with
// context_length_exceeded to "ran out of room in the model's context
// window" and shows x-request-id in its retry messages; Claude Code
// retries a dropped stream with a new streamed request, and after a held
// stream goes idle (CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS) asks again with
// "stream": false.
package fakellm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Script is what the server answers: one step per turn request.
type Script struct {
	// Model is the model name the server reports; "" means "fake-model".
	Model string
	// Steps answer successive turn requests, in arrival order.
	Steps []Step
	// Aside, if set, sees each turn request first; when it returns true,
	// its step answers that request and the script does not advance (for
	// a CLI's side requests, such as a title or a command-prefix check
	// made with a small model). It must be safe for concurrent use.
	Aside func(Request) (Step, bool)
}

// Call is one tool call in an answer.
type Call struct {
	// Name is the tool's name as the CLI declared it in the request's
	// tools. Run against this server: pi 0.73 "bash" {"command"} and
	// "read" {"path"}; Claude Code 2.1 "Bash" {"command", "description"};
	// codex 0.171 "exec_command" {"cmd"}; opencode 1.18 "bash" {"command",
	// "description"}; gemini-cli 0.61 "run_shell_command" {"command"} and
	// "read_file" {"file_path"}. Not run here: Claude Code "Read"
	// {"file_path"}; opencode "read" {"filePath"}.
	Name string
	// Arguments is the tool's input, a JSON object text.
	Arguments string
}

// Usage is the token usage an answer reports.
type Usage struct {
	Input  int // prompt_tokens / input_tokens / promptTokenCount
	Output int // completion_tokens / output_tokens / candidatesTokenCount
	Cached int // cached_tokens / cache_read_input_tokens / cachedContentTokenCount
}

// DefaultUsage is the usage of a step whose Usage is zero.
var DefaultUsage = Usage{Input: 100, Output: 20}

// Step says what one turn request gets. Build it with the constructors; the
// fields are exported for tests to read and tweak.
type Step struct {
	Text  string // answer text (may be set with Calls)
	Calls []Call // tool calls, in one message
	Usage Usage  // zero: DefaultUsage

	// Status, if non-zero, makes this an error answer with that HTTP
	// status, Message, and an error body in the API's shape.
	Status     int
	Message    string
	RetryAfter string // the retry-after header, if set
	// Header holds extra response headers (e.g. retry-after-ms,
	// x-should-retry), set on any answer.
	Header http.Header
	// Overflow makes this the API's context-length error.
	Overflow bool

	Delay time.Duration // before the first byte
	// Silent sends nothing, not even the status line, until Wake is closed
	// (nil: until the server closes); then the answer goes on as scripted.
	Silent  bool
	Wake    <-chan struct{}
	Hold    bool            // stop mid-way, hold the connection open
	Release <-chan struct{} // ends a held answer when closed (nil: only Close)
	Drop    bool            // stop mid-way, close the connection
	Repeat  bool            // answer every later request too
}

// Text is an answer with text.
func Text(text string) Step { return Step{Text: text} }

// Tools is an answer with these tool calls in one message.
func Tools(calls ...Call) Step { return Step{Calls: calls} }

// ToolCall is a tool call of the tool name with args, marshalled to JSON
// (e.g. ToolCall("exec_command", map[string]string{"cmd": "ls"}) for codex).
func ToolCall(name string, args any) Call { return Call{Name: name, Arguments: mustJSON(args)} }

// Bash is a tool call of the tool name with {"command": command}.
func Bash(name, command string) Call {
	return Call{Name: name, Arguments: mustJSON(map[string]string{"command": command})}
}

// Read is a tool call of the tool name with {key: path} (the key is "path"
// for pi, "file_path" for Claude Code, "filePath" for opencode).
func Read(name, key, path string) Call {
	return Call{Name: name, Arguments: mustJSON(map[string]string{key: path})}
}

// Status is an error answer with that HTTP status and message.
func Status(code int, message string) Step { return Step{Status: code, Message: message} }

// RateLimited is a 429 answer with the retry-after header (in seconds).
func RateLimited(retryAfter string) Step {
	return Step{Status: http.StatusTooManyRequests, Message: "Rate limit reached (fakellm)", RetryAfter: retryAfter}
}

// ContextOverflow is the API's context-length error.
func ContextOverflow() Step { return Step{Overflow: true} }

// WithDelay returns s waiting d before its first byte.
func (s Step) WithDelay(d time.Duration) Step { s.Delay = d; return s }

// Silenced returns s sending nothing until wake is closed (nil: until the
// server closes, when the connection is closed with no answer).
func (s Step) Silenced(wake <-chan struct{}) Step { s.Silent, s.Wake = true, wake; return s }

// WithUsage returns s reporting u.
func (s Step) WithUsage(u Usage) Step { s.Usage = u; return s }

// Held returns s stopping mid-way and holding the connection until release
// is closed (nil: until the server closes).
func (s Step) Held(release <-chan struct{}) Step { s.Hold, s.Release = true, release; return s }

// Dropped returns s stopping mid-way by closing the connection.
func (s Step) Dropped() Step { s.Drop = true; return s }

// Forever returns s answering this request and every later one.
func (s Step) Forever() Step { s.Repeat = true; return s }

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	// Header is the request's header with the values of the API key
	// headers (Authorization, X-Api-Key, Api-Key, X-Goog-Api-Key) replaced
	// by Fingerprint of the key.
	Header http.Header
	// KeyHeader names the API key header the request carried ("" if none).
	KeyHeader string
	// Key is Fingerprint of the API key the request carried ("" if none).
	Key string
	// Body is the decoded JSON body (nil if there was none). Records share
	// it: read it, do not change it.
	Body any
	// BodyError is why the body could not be decoded ("" if it could).
	BodyError string
	// Turn is the turn number (from 1) of a turn request that went to the
	// script (answered or exhausted), 0 otherwise (including Aside ones).
	Turn int
	// Step is the index in Script.Steps of the step that answered, -1 if
	// none did.
	Step int
	// Exhausted says the script had no step left for this turn request.
	Exhausted bool
	// Aside says Script.Aside answered this turn request.
	Aside bool
}

// Fingerprint is how the server records an API key: a short hash, so a test
// can check which key a CLI sent without the key appearing in a record.
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// Server is a running fake LLM server. Its methods are safe for concurrent
// use.
type Server struct {
	url    string
	model  string
	srv    *http.Server
	ln     net.Listener
	done   chan struct{} // closed by Close: held answers end
	once   sync.Once
	served chan struct{} // closed when Serve returns

	aside    func(Request) (Step, bool)
	mu       sync.Mutex
	steps    []Step
	next     int // index of the next step
	turns    int
	requests []Request
	closed   bool
	active   sync.WaitGroup // running handlers; Add only while !closed
}

// New starts a server on 127.0.0.1 at a random port. It panics if it cannot
// listen (as httptest.NewServer does). Close it when done.
func New(script Script) *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakellm: listen on 127.0.0.1: %v", err))
	}
	s := &Server{
		url:    "http://" + ln.Addr().String(),
		model:  script.Model,
		ln:     ln,
		done:   make(chan struct{}),
		served: make(chan struct{}),
		steps:  append([]Step(nil), script.Steps...),
		aside:  script.Aside,
	}
	if s.model == "" {
		s.model = "fake-model"
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		s.srv.Serve(ln)
	}()
	return s
}

// URL is the server's base URL, "http://127.0.0.1:PORT" (append "/v1" for
// clients that want the version in the base URL).
func (s *Server) URL() string { return s.url }

// Model is the model name the server reports.
func (s *Server) Model() string { return s.model }

// Close stops the server: it ends held answers, closes every connection and
// waits for every handler to return. It is safe to call more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.done)
		s.srv.Close()
		<-s.served
	})
	s.active.Wait()
}

// Requests returns a copy of every request received so far, in arrival
// order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Remaining is the number of steps not yet used (a Repeat step that has
// answered counts as used up).
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps) - s.next
}

// api is one wire API.
type api int

const (
	apiChat api = iota
	apiResponses
	apiMessages
	apiGemini
)

var keyHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}

// maxBody bounds a request body.
const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "fakellm: the server is closed", http.StatusServiceUnavailable)
		return
	}
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()

	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Step: -1}
	for _, h := range keyHeaders {
		v := rec.Header.Get(h)
		if v == "" {
			continue
		}
		key := strings.TrimSpace(strings.TrimPrefix(v, "Bearer "))
		if rec.KeyHeader == "" {
			rec.KeyHeader, rec.Key = h, Fingerprint(key)
		}
		rec.Header.Set(h, Fingerprint(key))
	}
	if r.Body != nil {
		data, err := readAll(r, maxBody)
		switch {
		case err != nil:
			rec.BodyError = err.Error()
		case len(data) > 0:
			if err := json.Unmarshal(data, &rec.Body); err != nil {
				rec.BodyError = "body is not JSON: " + err.Error()
			}
		}
	}

	path := r.URL.Path
	_, gmethod, gemini := geminiCall(geminiPath(path))
	if !gemini {
		path = strings.TrimPrefix(path, "/v1")
	}
	var which api
	switch {
	case r.Method == http.MethodPost && gemini && gmethod == "countTokens":
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": DefaultUsage.Input})
		return
	case r.Method == http.MethodPost && gemini:
		which = apiGemini
	case r.Method == http.MethodGet && path == "/models":
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": s.model, "object": "model", "created": 0, "owned_by": "fakellm"},
		}})
		return
	case r.Method == http.MethodPost && path == "/messages/count_tokens":
		s.record(rec)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": DefaultUsage.Input})
		return
	case r.Method == http.MethodPost && path == "/chat/completions":
		which = apiChat
	case r.Method == http.MethodPost && path == "/responses":
		which = apiResponses
	case r.Method == http.MethodPost && path == "/messages":
		which = apiMessages
	default:
		s.record(rec)
		http.Error(w, fmt.Sprintf("fakellm: no endpoint %s %s (serving POST /v1/chat/completions, /v1/responses, /v1/messages, /v1/messages/count_tokens, /v1beta/models/{model}:streamGenerateContent, :generateContent, :countTokens, GET /v1/models)", r.Method, r.URL.Path), http.StatusNotFound)
		return
	}

	if rec.BodyError != "" {
		s.record(rec)
		writeError(w, which, http.StatusBadRequest, "fakellm: "+rec.BodyError)
		return
	}
	if s.aside != nil {
		if step, ok := s.aside(rec); ok {
			rec.Aside = true
			s.record(rec)
			s.answer(w, r, which, step, 0, rec.Body)
			return
		}
	}
	step, turn, exhausted := s.take(&rec)
	if exhausted != "" {
		w.Header().Set("X-Request-Id", "req_fakellm_"+strconv.Itoa(turn))
		writeError(w, which, http.StatusInternalServerError, exhausted)
		return
	}
	s.answer(w, r, which, step, turn, rec.Body)
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
}

// take assigns the next step to a turn request and records the request. If
// the script has no step left, it returns the error message to answer with.
func (s *Server) take(rec *Request) (Step, int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns++
	rec.Turn = s.turns
	if s.next >= len(s.steps) {
		// A Repeat step is the last one that answers.
		if n := len(s.steps); n > 0 && s.steps[n-1].Repeat {
			rec.Step = n - 1
			s.requests = append(s.requests, *rec)
			return s.steps[n-1], s.turns, ""
		}
		rec.Exhausted = true
		s.requests = append(s.requests, *rec)
		return Step{}, s.turns, fmt.Sprintf("fakellm: script exhausted: turn request %d has no step (the script has %d steps)", s.turns, len(s.steps))
	}
	i := s.next
	s.next++
	if s.steps[i].Repeat {
		// Later steps are unreachable; the repeat step answers from now on.
		s.steps = s.steps[:i+1]
	}
	rec.Step = i
	s.requests = append(s.requests, *rec)
	return s.steps[i], s.turns, ""
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(mustJSON(v)))
}

// AsideSystem is a Script.Aside that answers with step every turn request
// whose system prompt starts with prefix: on Chat, a "system" message's
// string content; on Messages, the "system" field (a string or text
// blocks); on Responses, the "instructions" field. For example opencode
// asks for a session title with a system prompt starting "You are a title
// generator", before the turn the script is for.
func AsideSystem(prefix string, step Step) func(Request) (Step, bool) {
	return func(r Request) (Step, bool) {
		for _, p := range systemPrompts(r.Body) {
			if strings.HasPrefix(strings.TrimLeft(p, " \t\r\n"), prefix) {
				return step, true
			}
		}
		return Step{}, false
	}
}

// GeminiRouterSystem starts the system prompt of gemini-cli's model
// routing request (after a newline): with no model chosen (model "auto"),
// gemini-cli 0.61 first asks a small model, with a non-streamed
// generateContent, how complex the task is, and picks the model for the
// turn from the answer.
const GeminiRouterSystem = "You are a specialized Task Routing AI."

// GeminiRouterAnswer answers gemini-cli's routing request: a JSON text that
// both of its classifiers accept ({"reasoning", "model_choice"} and
// {"complexity_reasoning", "complexity_score"}), choosing the flash model.
var GeminiRouterAnswer = Text(`{"reasoning":"fakellm","model_choice":"flash","complexity_reasoning":"fakellm","complexity_score":10}`)

// GeminiRouter is a Script.Aside that answers gemini-cli's routing request
// with GeminiRouterAnswer, so it takes no step of the script.
func GeminiRouter(r Request) (Step, bool) {
	return AsideSystem(GeminiRouterSystem, GeminiRouterAnswer)(r)
}

// systemPrompts returns the system prompt texts of a turn request body.
func systemPrompts(body any) []string {
	var out []string
	text := func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, b := range v {
				if t, ok := field(b, "text").(string); ok {
					out = append(out, t)
				}
			}
		}
	}
	if msgs, ok := field(body, "messages").([]any); ok {
		for _, m := range msgs {
			if field(m, "role") == "system" || field(m, "role") == "developer" {
				text(field(m, "content"))
			}
		}
	}
	text(field(body, "system"))
	text(field(body, "instructions"))
	if si := field(body, "systemInstruction"); si != nil {
		// Gemini: a Content ({"parts":[{"text":...}]}) or a string.
		text(si)
		text(field(si, "parts"))
	}
	return out
}
