package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// readAll reads a request body of at most limit bytes.
func readAll(r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("body is over %d bytes", limit)
	}
	return data, nil
}

// answer writes step's answer to a turn request.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, which api, step Step, turn int, body any) {
	rc := http.NewResponseController(w)
	// hangUp closes the connection, when the server closes before the
	// answer's first byte: the client sees a broken connection, not an
	// empty answer.
	hangUp := func() {
		if conn, _, err := rc.Hijack(); err == nil {
			conn.Close()
		}
	}
	if step.Delay > 0 {
		t := time.NewTimer(step.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			hangUp()
			return
		}
	}
	if step.Silent {
		select {
		case <-step.Wake:
		case <-r.Context().Done():
			return
		case <-s.done:
			hangUp()
			return
		}
	}
	for k, vs := range step.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Request-Id", "req_fakellm_"+strconv.Itoa(turn))
	if step.Status != 0 {
		if step.RetryAfter != "" {
			w.Header().Set("Retry-After", step.RetryAfter)
		}
		msg := step.Message
		if msg == "" {
			msg = fmt.Sprintf("fakellm: scripted HTTP %d", step.Status)
		}
		if which == apiGemini {
			writeGeminiError(w, step.Status, msg, step.RetryAfter)
			return
		}
		writeError(w, which, step.Status, msg)
		return
	}
	if step.Overflow && which == apiGemini {
		writeGeminiError(w, http.StatusBadRequest, geminiOverflow, "")
		return
	}
	if step.Overflow && which != apiResponses {
		writeOverflow(w, which)
		return
	}
	if step.Usage == (Usage{}) {
		step.Usage = DefaultUsage
	}
	a := answerOf{model: s.model, turn: turn, step: step}
	var frames [][]byte
	stream := boolField(body, "stream")
	sse := stream
	if which == apiGemini {
		_, method, _ := geminiCall(geminiPath(r.URL.Path))
		stream = method == "streamGenerateContent"
		sse = stream && r.URL.Query().Get("alt") == "sse"
	}
	switch {
	case which == apiGemini && stream:
		frames = a.geminiStream(sse)
	case which == apiGemini:
		frames = split([]byte(mustJSON(a.geminiResponse())))
	case which == apiChat && stream:
		frames = a.chatStream(boolField(field(body, "stream_options"), "include_usage"))
	case which == apiChat:
		frames = split([]byte(mustJSON(a.chatMessage())))
	case which == apiResponses && stream:
		frames = a.responsesStream()
	case which == apiResponses:
		frames = split([]byte(mustJSON(a.response("completed", nil))))
	case which == apiMessages && stream:
		frames = a.messagesStream()
	default:
		frames = split([]byte(mustJSON(a.message())))
	}
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	n := len(frames)
	if step.Hold || step.Drop {
		n = len(frames) / 2
	}
	for _, f := range frames[:n] {
		if _, err := w.Write(f); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	if step.Hold {
		select {
		case <-step.Release:
			return // the response ends, incomplete
		case <-r.Context().Done():
			return
		case <-s.done:
		}
	}
	if step.Hold || step.Drop {
		hangUp()
	}
}

// split cuts a non-streamed body in two, so that a held or dropped answer
// sends its first half.
func split(b []byte) [][]byte { return [][]byte{b[:len(b)/2], b[len(b)/2:]} }

func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

func boolField(v any, name string) bool {
	b, _ := field(v, name).(bool)
	return b
}

// errorType is the error type each API reports for an HTTP status.
func errorType(which api, status int) (typ, code string) {
	if which == apiMessages {
		switch status {
		case 400:
			return "invalid_request_error", ""
		case 401:
			return "authentication_error", ""
		case 403:
			return "permission_error", ""
		case 404:
			return "not_found_error", ""
		case 413:
			return "request_too_large", ""
		case 429:
			return "rate_limit_error", ""
		case 529:
			return "overloaded_error", ""
		}
		return "api_error", ""
	}
	switch {
	case status == 401:
		return "invalid_request_error", "invalid_api_key"
	case status == 429:
		return "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

func writeError(w http.ResponseWriter, which api, status int, msg string) {
	if which == apiGemini {
		writeGeminiError(w, status, msg, "")
		return
	}
	typ, code := errorType(which, status)
	if which == apiMessages {
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
		return
	}
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

const (
	openAIOverflow    = "This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens. Please reduce the length of the messages."
	anthropicOverflow = "prompt is too long: 200000 tokens > 128000 maximum"
)

func writeOverflow(w http.ResponseWriter, which api) {
	if which == apiMessages {
		writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error", "error": map[string]any{
			"type": "invalid_request_error", "message": anthropicOverflow}})
		return
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"message": openAIOverflow, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
}

// answerOf builds the bodies of one successful answer.
type answerOf struct {
	model string
	turn  int
	step  Step
}

func (a answerOf) callID(i int) string { return "call_" + strconv.Itoa(a.turn) + "_" + strconv.Itoa(i) }
func (a answerOf) toolUseID(i int) string {
	return "toolu_" + strconv.Itoa(a.turn) + "_" + strconv.Itoa(i)
}

// pieces splits s in two at a rune boundary (one piece if it is short), so
// a stream carries more than one delta.
func pieces(s string) []string {
	r := []rune(s)
	if len(r) < 2 {
		return []string{s}
	}
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
}

func sseData(v any) []byte { return []byte("data: " + mustJSON(v) + "\n\n") }

func sseEvent(name string, v any) []byte {
	return []byte("event: " + name + "\ndata: " + mustJSON(v) + "\n\n")
}

// ---- Chat Completions ----

func (a answerOf) chatFinish() string {
	if len(a.step.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (a answerOf) chatUsage() map[string]any {
	u := a.step.Usage
	return map[string]any{
		"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached},
	}
}

func (a answerOf) chatChunk(delta map[string]any, finish any) []byte {
	return sseData(map[string]any{
		"id": "chatcmpl-" + strconv.Itoa(a.turn), "object": "chat.completion.chunk", "created": 0, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

func (a answerOf) chatStream(includeUsage bool) [][]byte {
	frames := [][]byte{a.chatChunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if a.step.Text != "" {
		for _, p := range pieces(a.step.Text) {
			frames = append(frames, a.chatChunk(map[string]any{"content": p}, nil))
		}
	}
	for i, c := range a.step.Calls {
		frames = append(frames, a.chatChunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": a.callID(i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil))
		for _, p := range pieces(c.Arguments) {
			frames = append(frames, a.chatChunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}}, nil))
		}
	}
	frames = append(frames, a.chatChunk(map[string]any{}, a.chatFinish()))
	if includeUsage {
		frames = append(frames, sseData(map[string]any{
			"id": "chatcmpl-" + strconv.Itoa(a.turn), "object": "chat.completion.chunk", "created": 0, "model": a.model,
			"choices": []any{}, "usage": a.chatUsage(),
		}))
	}
	return append(frames, []byte("data: [DONE]\n\n"))
}

func (a answerOf) chatMessage() map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if a.step.Text != "" {
		msg["content"] = a.step.Text
	}
	if len(a.step.Calls) > 0 {
		var calls []any
		for i, c := range a.step.Calls {
			calls = append(calls, map[string]any{"id": a.callID(i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id": "chatcmpl-" + strconv.Itoa(a.turn), "object": "chat.completion", "created": 0, "model": a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": a.chatFinish()}},
		"usage":   a.chatUsage(),
	}
}

// ---- Responses ----

func (a answerOf) responseID() string { return "resp_" + strconv.Itoa(a.turn) }

// items are the answer's output items, complete.
func (a answerOf) items() []map[string]any {
	var items []map[string]any
	if a.step.Text != "" {
		items = append(items, map[string]any{
			"type": "message", "id": "msg_" + strconv.Itoa(a.turn) + "_0", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": a.step.Text, "annotations": []any{}}},
		})
	}
	for i, c := range a.step.Calls {
		items = append(items, map[string]any{
			"type": "function_call", "id": "fc_" + strconv.Itoa(a.turn) + "_" + strconv.Itoa(i), "status": "completed",
			"call_id": a.callID(i), "name": c.Name, "arguments": c.Arguments,
		})
	}
	return items
}

// response is the Responses API response object.
func (a answerOf) response(status string, failure map[string]any) map[string]any {
	r := map[string]any{
		"id": a.responseID(), "object": "response", "created_at": 0, "status": status, "model": a.model,
		"output": []any{}, "error": nil, "usage": nil,
	}
	switch status {
	case "completed":
		out := []any{}
		for _, it := range a.items() {
			out = append(out, it)
		}
		u := a.step.Usage
		r["output"] = out
		r["usage"] = map[string]any{
			"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
			"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": u.Input + u.Output,
		}
	case "failed":
		r["error"] = failure
	}
	return r
}

func (a answerOf) responsesStream() [][]byte {
	seq := 0
	ev := func(name string, v map[string]any) []byte {
		v["type"] = name
		v["sequence_number"] = seq
		seq++
		return sseEvent(name, v)
	}
	frames := [][]byte{
		ev("response.created", map[string]any{"response": a.response("in_progress", nil)}),
		ev("response.in_progress", map[string]any{"response": a.response("in_progress", nil)}),
	}
	if a.step.Overflow {
		return append(frames, ev("response.failed", map[string]any{"response": a.response("failed",
			map[string]any{"code": "context_length_exceeded", "message": openAIOverflow})}))
	}
	for idx, it := range a.items() {
		id := it["id"].(string)
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		switch it["type"] {
		case "message":
			added["content"] = []any{}
			frames = append(frames, ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			frames = append(frames, ev("response.content_part.added", map[string]any{
				"item_id": id, "output_index": idx, "content_index": 0, "part": part}))
			for _, p := range pieces(a.step.Text) {
				frames = append(frames, ev("response.output_text.delta", map[string]any{
					"item_id": id, "output_index": idx, "content_index": 0, "delta": p}))
			}
			frames = append(frames, ev("response.output_text.done", map[string]any{
				"item_id": id, "output_index": idx, "content_index": 0, "text": a.step.Text}))
			frames = append(frames, ev("response.content_part.done", map[string]any{
				"item_id": id, "output_index": idx, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": a.step.Text, "annotations": []any{}}}))
		case "function_call":
			args := it["arguments"].(string)
			added["arguments"] = ""
			frames = append(frames, ev("response.output_item.added", map[string]any{"output_index": idx, "item": added}))
			for _, p := range pieces(args) {
				frames = append(frames, ev("response.function_call_arguments.delta", map[string]any{
					"item_id": id, "output_index": idx, "delta": p}))
			}
			frames = append(frames, ev("response.function_call_arguments.done", map[string]any{
				"item_id": id, "output_index": idx, "arguments": args}))
		}
		frames = append(frames, ev("response.output_item.done", map[string]any{"output_index": idx, "item": it}))
	}
	return append(frames, ev("response.completed", map[string]any{"response": a.response("completed", nil)}))
}

// ---- Messages ----

func (a answerOf) stopReason() string {
	if len(a.step.Calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (a answerOf) messageID() string { return "msg_" + strconv.Itoa(a.turn) }

func (a answerOf) message() map[string]any {
	content := []any{}
	if a.step.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.step.Text})
	}
	for i, c := range a.step.Calls {
		var input any = map[string]any{}
		if err := json.Unmarshal([]byte(c.Arguments), &input); err != nil {
			input = map[string]any{"raw": c.Arguments}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": a.toolUseID(i), "name": c.Name, "input": input})
	}
	u := a.step.Usage
	return map[string]any{
		"id": a.messageID(), "type": "message", "role": "assistant", "model": a.model, "content": content,
		"stop_reason": a.stopReason(), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Input, "output_tokens": u.Output,
			"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0},
	}
}

func (a answerOf) messagesStream() [][]byte {
	u := a.step.Usage
	ev := func(name string, v map[string]any) []byte { v["type"] = name; return sseEvent(name, v) }
	frames := [][]byte{
		ev("message_start", map[string]any{"message": map[string]any{
			"id": a.messageID(), "type": "message", "role": "assistant", "model": a.model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": u.Input, "output_tokens": 0,
				"cache_read_input_tokens": u.Cached, "cache_creation_input_tokens": 0},
		}}),
		ev("ping", map[string]any{}),
	}
	idx := 0
	if a.step.Text != "" {
		frames = append(frames, ev("content_block_start", map[string]any{"index": idx,
			"content_block": map[string]any{"type": "text", "text": ""}}))
		for _, p := range pieces(a.step.Text) {
			frames = append(frames, ev("content_block_delta", map[string]any{"index": idx,
				"delta": map[string]any{"type": "text_delta", "text": p}}))
		}
		frames = append(frames, ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	for i, c := range a.step.Calls {
		frames = append(frames, ev("content_block_start", map[string]any{"index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": a.toolUseID(i), "name": c.Name, "input": map[string]any{}}}))
		for _, p := range pieces(c.Arguments) {
			frames = append(frames, ev("content_block_delta", map[string]any{"index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": p}}))
		}
		frames = append(frames, ev("content_block_stop", map[string]any{"index": idx}))
		idx++
	}
	return append(frames,
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": a.stopReason(), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.Output}}),
		ev("message_stop", map[string]any{}),
	)
}
