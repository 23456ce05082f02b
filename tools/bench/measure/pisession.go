package measure

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
)

// PiSession writes a realistic pi session of at least size bytes: a v3
// header, model and thinking-level entries, then turns of a user prompt,
// assistant messages with thinking, text and one to three tool calls
// (bash, read, edit) answered by tool results of 100 B to 20 KB, and a
// final answer; now and then an error and its retry, a compaction, a
// label. It ends with a complete turn (the phase is finished).
func PiSession(w io.Writer, size int64, rng *rand.Rand) {
	bw := bufio.NewWriterSize(w, 256<<10)
	defer bw.Flush()
	var written int64
	n := 0
	leaf := ""
	put := func(e map[string]any) string {
		n++
		id := fmt.Sprintf("%08x", n)
		e["id"] = id
		if leaf == "" {
			e["parentId"] = nil
		} else {
			e["parentId"] = leaf
		}
		e["timestamp"] = "2026-03-15T10:00:00.000Z"
		b, _ := json.Marshal(e)
		bw.Write(b)
		bw.WriteByte('\n')
		written += int64(len(b) + 1)
		leaf = id
		return id
	}
	usage := map[string]any{"input": 1200, "output": 80, "cacheRead": 30000, "cacheWrite": 0, "totalTokens": 31280,
		"cost": map[string]any{"input": 0.0036, "output": 0.0012, "cacheRead": 0.009, "cacheWrite": 0, "total": 0.0138}}
	assistant := func(content []any, stop string, extra map[string]any) string {
		m := map[string]any{"role": "assistant", "content": content, "api": "openai-completions", "provider": "mock",
			"model": "my-model", "usage": usage, "stopReason": stop, "timestamp": 1773568800000}
		for k, v := range extra {
			m[k] = v
		}
		return put(map[string]any{"type": "message", "message": m})
	}
	text := func(k int) string {
		const words = "the quick brown fox jumps over the lazy dog; func main() { fmt.Println(\"hi\") }\n\t"
		var sb strings.Builder
		for sb.Len() < k {
			sb.WriteString(words[rng.IntN(20):])
		}
		return sb.String()[:k]
	}
	bw.WriteString(`{"type":"session","version":3,"id":"0199a213-81c0-7800-8aa1-bbab2a035a53","timestamp":"2026-03-15T10:00:00.000Z","cwd":"/work/proj"}` + "\n")
	put(map[string]any{"type": "model_change", "provider": "mock", "modelId": "my-model"})
	put(map[string]any{"type": "thinking_level_change", "thinkingLevel": "medium"})
	call := 0
	for written < size {
		put(map[string]any{"type": "message", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "text", "text": text(200 + rng.IntN(800))}}, "timestamp": 1773568800000}})
		for range 1 + rng.IntN(6) {
			if rng.IntN(20) == 0 {
				assistant([]any{}, "error", map[string]any{"errorMessage": "terminated"})
			}
			var content []any
			content = append(content, map[string]any{"type": "thinking", "thinking": text(100 + rng.IntN(600)), "thinkingSignature": "sig"})
			content = append(content, map[string]any{"type": "text", "text": text(50 + rng.IntN(300))})
			var ids []string
			for range 1 + rng.IntN(3) {
				call++
				id := "call_" + strconv.Itoa(call)
				ids = append(ids, id)
				args := map[string]any{"command": "go test ./... -run " + text(20)}
				if rng.IntN(3) == 0 {
					args = map[string]any{"path": "pkg/file.go", "oldText": text(200 + rng.IntN(2000)), "newText": text(200 + rng.IntN(2000))}
				}
				content = append(content, map[string]any{"type": "toolCall", "id": id, "name": "bash", "arguments": args})
			}
			assistant(content, "toolUse", nil)
			for _, id := range ids {
				k := 100 + rng.IntN(2000)
				if rng.IntN(8) == 0 {
					k = 20000
				}
				put(map[string]any{"type": "message", "message": map[string]any{"role": "toolResult", "toolCallId": id, "toolName": "bash",
					"content": []any{map[string]any{"type": "text", "text": text(k)}}, "isError": rng.IntN(5) == 0, "timestamp": 1773568800000}})
			}
		}
		if rng.IntN(10) == 0 {
			put(map[string]any{"type": "label", "targetId": leaf, "label": "checkpoint"})
		}
		if rng.IntN(25) == 0 {
			put(map[string]any{"type": "compaction", "summary": text(2000), "firstKeptEntryId": leaf, "tokensBefore": 150000})
		}
		assistant([]any{map[string]any{"type": "text", "text": text(100 + rng.IntN(1000))}}, "stop", nil)
	}
}
