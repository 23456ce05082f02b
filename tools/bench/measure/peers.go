package measure

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/internal/lines"
)

// PeerMaxToken is the longest line PeerReadClaude reads: the 10 MiB
// bufio.Scanner limit the Go orchestrators set.
const PeerMaxToken = 10 << 20

// PeerEvent is one Claude stream-json event as the peers decode it: the
// envelope's fields, and its sub-messages kept raw for later.
type PeerEvent struct {
	Type         string          `json:"type"`
	Subtype      string          `json:"subtype"`
	SessionID    string          `json:"session_id"`
	IsError      bool            `json:"is_error"`
	Result       string          `json:"result"`
	TotalCostUSD float64         `json:"total_cost_usd"`
	Message      json.RawMessage `json:"message"`
	Usage        json.RawMessage `json:"usage"`
	Error        json.RawMessage `json:"error"`
}

// ErrNoResult is PeerReadClaude's error for a stream that ended without a
// result event.
var ErrNoResult = errors.New("measure: the stream has no result event")

// PeerReadClaude is P7's baseline, the way the Go orchestrators (multica,
// sortie) read a worker's Claude stream-json: a bufio.Scanner whose buffer
// may grow to PeerMaxToken, and json.Unmarshal of every line into a
// PeerEvent. It returns the last result event; a line longer than
// PeerMaxToken stops it with bufio.ErrTooLong.
func PeerReadClaude(r io.Reader) (PeerEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), PeerMaxToken)
	var res PeerEvent
	found := false
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev PeerEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			continue // a line that is not JSON: the peers log and skip it
		}
		if ev.Type == "result" {
			res, found = ev, true
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !found {
		return res, ErrNoResult
	}
	return res, nil
}

// WatchStream feeds r, a worker's stdout, to the watcher of runner as
// pilot's dispatch does: read 64 KiB at a time, split by internal/lines
// (lines longer than maxLine bytes spill to a file in spillDir and reach
// the watcher truncated; 0 means the Dispatcher's default, 8 MiB), each
// line offered to the watcher's Diagnostic (a diagnostic classified with
// pilot.ClassifyFailure) and then to Line, and Finish at the end with a
// clean exit. There is no process and no stream.log: this is the
// watcher's share of P3, P7's pilot side.
func WatchStream(runner pilot.Runner, r io.Reader, maxLine int, spillDir string) (pilot.Result, error) {
	if maxLine <= 0 {
		maxLine = 8 << 20
	}
	cmd, err := runner.Command(context.Background(), pilot.Attempt{
		Task:     pilot.Task{Mode: pilot.ModeReview, Prompt: "x", Workdir: spillDir},
		Provider: pilot.Provider{Name: runner.Name(), Runner: runner.Name()},
		RunID:    "bench", RunDir: spillDir, Prompt: "x", Workdir: spillDir,
		SessionPath: spillDir + "/session",
	})
	if err != nil {
		return pilot.Result{}, err
	}
	w := cmd.Watcher
	dw, _ := w.(interface {
		Diagnose(pilot.Stream, string) (pilot.Classification, bool)
	})
	sp := &lines.Splitter{
		Max:      maxLine,
		SpillDir: spillDir,
		OnLine: func(l lines.Line) {
			data := bytes.TrimSuffix(l.Data, []byte("\r"))
			line := pilot.Line{Stream: pilot.Stdout, Data: data, Size: l.Size, Truncated: l.Truncated}
			if dw != nil && !l.Truncated {
				// As pilot does, the line is not copied for Diagnose.
				dw.Diagnose(line.Stream, unsafe.String(unsafe.SliceData(data), len(data)))
			}
			w.Line(line)
		},
	}
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			n += int64(k)
			sp.Write(buf[:k])
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			sp.Close()
			return pilot.Result{}, rerr
		}
	}
	sp.Close()
	return w.Finish(pilot.Exit{Runner: runner.Name(), Started: true, StdoutBytes: n}), nil
}

// LongLineClaude writes P7's long-line stream: an init event, one
// assistant text message of lineBytes bytes (with its newline), and a
// successful result event. It returns the bytes written.
func LongLineClaude(w io.Writer, lineBytes int64) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var written int64
	put := func(s string) {
		n, _ := bw.WriteString(s)
		written += int64(n)
	}
	const sid = "5f1d3c1e-0b7a-4c4e-9d0e-2b9f2f0c6a11"
	put(`{"type":"system","subtype":"init","session_id":"` + sid + `","model":"claude-sonnet-4-5","tools":["Bash","Read","Edit"]}` + "\n")
	head := `{"type":"assistant","session_id":"` + sid + `","parent_tool_use_id":null,"message":{"id":"msg_1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"`
	tail := `"}]}}` + "\n"
	if pad := lineBytes - int64(len(head)+len(tail)); pad < 0 {
		return 0, fmt.Errorf("measure: a line of %d bytes is shorter than its event", lineBytes)
	}
	put(head)
	const pattern = "the quick brown fox jumps over the lazy dog 0123456789 "
	for n := lineBytes - int64(len(head)+len(tail)); n > 0; {
		k := min(n, int64(len(pattern)))
		put(pattern[:k])
		n -= k
	}
	put(tail)
	put(`{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"` + sid + `","total_cost_usd":0.5,"usage":{"input_tokens":1200,"output_tokens":80,"cache_read_input_tokens":30000,"cache_creation_input_tokens":0}}` + "\n")
	return written, bw.Flush()
}
