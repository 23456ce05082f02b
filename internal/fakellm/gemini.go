package fakellm

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// The Gemini API (v1beta), as @google/genai (gemini-cli's SDK) calls it:
//
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:countTokens
//
// The SDK reads a stream as "data: {GenerateContentResponse}\n\n" frames
// (no event names, no end marker); an error answer as
// {"error":{"code","message","status"}} with the HTTP status.

// geminiPath is a request path without the "/v1" a client whose base URL
// ends in /v1 puts before "/v1beta".
func geminiPath(path string) string {
	if strings.HasPrefix(path, "/v1/v1beta/") {
		return strings.TrimPrefix(path, "/v1")
	}
	return path
}

// geminiCall splits a Gemini API path into its model and method
// ("streamGenerateContent", "generateContent", "countTokens"); ok is false
// for any other path.
func geminiCall(path string) (model, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1beta/models/")
	if !ok {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	if !ok || model == "" || strings.Contains(model, "/") {
		return "", "", false
	}
	switch method {
	case "streamGenerateContent", "generateContent", "countTokens":
		return model, method, true
	}
	return "", "", false
}

// geminiStatus is the google.rpc status name the Gemini API reports with
// an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiOverflow is the Gemini API's context-length error message.
const geminiOverflow = "The input token count (200000) exceeds the maximum number of tokens allowed (128000)."

// writeGeminiError writes the Gemini API's error body. A retry delay in
// whole seconds (a step's RetryAfter) also goes in the body as a RetryInfo
// detail, which is where the Gemini API puts it (gemini-cli reads the
// delay from there, not from the retry-after header).
func writeGeminiError(w http.ResponseWriter, code int, msg, retryAfter string) {
	e := map[string]any{"code": code, "message": msg, "status": geminiStatus(code)}
	if n, err := strconv.Atoi(retryAfter); err == nil && n >= 0 {
		e["details"] = []any{map[string]any{
			"@type":      "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": strconv.Itoa(n) + "s",
		}}
	}
	writeJSON(w, code, map[string]any{"error": e})
}

func (a answerOf) geminiUsage() map[string]any {
	u := a.step.Usage
	return map[string]any{
		"promptTokenCount": u.Input, "candidatesTokenCount": u.Output, "totalTokenCount": u.Input + u.Output,
		"cachedContentTokenCount": u.Cached,
	}
}

// geminiArgs is a call's arguments as the object functionCall.args holds.
func geminiArgs(c Call) any {
	var args any = map[string]any{}
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		args = map[string]any{"raw": c.Arguments}
	}
	return args
}

// geminiChunk is one GenerateContentResponse with these parts, and the
// finish reason and usage when finish is set.
func (a answerOf) geminiChunk(parts []any, finish bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	r := map[string]any{"candidates": []any{cand}, "modelVersion": a.model, "responseId": "gemini_" + strconv.Itoa(a.turn)}
	if finish {
		cand["finishReason"] = "STOP"
		r["usageMetadata"] = a.geminiUsage()
	}
	return r
}

// geminiParts are the answer's parts, whole: its text, then a functionCall
// part per call.
func (a answerOf) geminiParts() []any {
	var parts []any
	if a.step.Text != "" {
		parts = append(parts, map[string]any{"text": a.step.Text})
	}
	for _, c := range a.step.Calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": geminiArgs(c)}})
	}
	return parts
}

// geminiResponse is the non-streamed answer (generateContent).
func (a answerOf) geminiResponse() map[string]any {
	parts := a.geminiParts()
	if parts == nil {
		parts = []any{map[string]any{"text": ""}}
	}
	return a.geminiChunk(parts, true)
}

// geminiChunks are the streamed answer's responses: the text in pieces, a
// response per function call (the API sends a call whole, never its
// arguments in pieces), then a last response with an empty text part, the
// finish reason STOP (the API's reason for tool calls too) and the usage.
func (a answerOf) geminiChunks() []map[string]any {
	var chunks []map[string]any
	if a.step.Text != "" {
		for _, p := range pieces(a.step.Text) {
			chunks = append(chunks, a.geminiChunk([]any{map[string]any{"text": p}}, false))
		}
	}
	for _, c := range a.step.Calls {
		chunks = append(chunks, a.geminiChunk([]any{
			map[string]any{"functionCall": map[string]any{"name": c.Name, "args": geminiArgs(c)}}}, false))
	}
	return append(chunks, a.geminiChunk([]any{map[string]any{"text": ""}}, true))
}

// geminiStream is the streamed answer as frames: SSE "data:" frames with
// alt=sse, else one JSON array (the API's answer without alt=sse) cut in
// two.
func (a answerOf) geminiStream(sse bool) [][]byte {
	chunks := a.geminiChunks()
	if !sse {
		return split([]byte(mustJSON(chunks)))
	}
	frames := make([][]byte, len(chunks))
	for i, c := range chunks {
		frames[i] = sseData(c)
	}
	return frames
}
