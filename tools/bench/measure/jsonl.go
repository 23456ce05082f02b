package measure

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// ClaudeStream writes at least size bytes of Claude Code stream-json: an
// init event, then assistant messages (text, tool_use) and tool results
// whose lines are from 100 B to 1 MiB long (log-uniform, so that short
// lines are as common as in a real stream and long ones still carry most
// bytes), one line of bigLine bytes halfway through (none when bigLine is
// 0), and a successful result event last. It returns the bytes written.
func ClaudeStream(w io.Writer, size, bigLine int64, rng *rand.Rand) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var written int64
	put := func(s string) {
		n, _ := bw.WriteString(s)
		written += int64(n)
	}
	const sid = "5f1d3c1e-0b7a-4c4e-9d0e-2b9f2f0c6a11"
	put(`{"type":"system","subtype":"init","session_id":"` + sid + `","model":"claude-sonnet-4-5","tools":["Bash","Read","Edit"]}` + "\n")
	const pattern = "the quick brown fox jumps over the lazy dog 0123456789 "
	pad := func(n int) {
		for n > 0 {
			k := min(n, len(pattern))
			m, _ := bw.WriteString(pattern[:k])
			written += int64(m)
			n -= k
		}
	}
	// line writes one event of exactly n bytes (with its newline), or
	// the shortest it can be when n is smaller.
	call := 0
	line := func(n int64) {
		var head, tail string
		switch call++; call % 3 {
		case 0:
			head = `{"type":"assistant","session_id":"` + sid + `","parent_tool_use_id":null,"message":{"id":"msg_` + fmt.Sprint(call) + `","model":"claude-sonnet-4-5","content":[{"type":"text","text":"`
			tail = `"}],"usage":{"input_tokens":1200,"output_tokens":80,"cache_read_input_tokens":30000,"cache_creation_input_tokens":0}}}` + "\n"
		case 1:
			head = `{"type":"assistant","session_id":"` + sid + `","parent_tool_use_id":null,"message":{"id":"msg_` + fmt.Sprint(call) + `","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_` + fmt.Sprint(call) + `","name":"Bash","input":{"command":"`
			tail = `"}}],"usage":{"input_tokens":1200,"output_tokens":80,"cache_read_input_tokens":30000,"cache_creation_input_tokens":0}}}` + "\n"
		default:
			head = `{"type":"user","session_id":"` + sid + `","parent_tool_use_id":null,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_` + fmt.Sprint(call-1) + `","content":"`
			tail = `"}]}}` + "\n"
		}
		put(head)
		pad(int(n) - len(head) - len(tail))
		put(tail)
	}
	const lo, hi = 100, 1 << 20
	result := `{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"` + sid + `","total_cost_usd":0.5,"usage":{"input_tokens":1200,"output_tokens":80,"cache_read_input_tokens":30000,"cache_creation_input_tokens":0}}` + "\n"
	bigDone := bigLine <= 0
	for written+int64(len(result)) < size {
		if !bigDone && written >= (size-bigLine)/2 {
			line(bigLine)
			bigDone = true
			continue
		}
		n := int64(math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo))))
		line(n)
	}
	if !bigDone {
		line(bigLine)
	}
	put(result)
	return written, bw.Flush()
}
