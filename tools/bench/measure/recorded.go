package measure

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// RecordedStreams names, for each agent CLI runner but Claude's (whose P3
// stream ClaudeStream writes), the recorded stream that RecordedStream
// repeats: a successful run with tool calls, under testdata/<runner>/stream/
// or, for a path with a slash, that path from the module's root.
var RecordedStreams = map[string]string{
	"pi":       "tool-use-gen-a.stdout",
	"codex":    "parallel-commands.stdout",
	"opencode": "parallel-tools.stdout",
	"gemini":   "e2e-two-tools-success.stdout",
	"qwen":     "e2e-two-tools.stdout",
	"kilo":     "agents/testdata/kilo/stream/two-tools.stdout.jsonl",
	"copilot":  "agents/testdata/copilot/stream/two-tools.stdout.jsonl",
}

// RecordedPath returns the path of runner's recorded stream from the
// module's root, as a note names it.
func RecordedPath(runner string) string {
	name := RecordedStreams[runner]
	if strings.Contains(name, "/") {
		return name
	}
	return "testdata/" + runner + "/stream/" + name
}

// RecordedStream writes at least size bytes of runner's JSON event stream
// built from its recorded stream (RecordedStreams): the recording's first
// line (the session header), its middle lines repeated, and its last line
// (the terminal event). It returns the bytes written.
func RecordedStream(w io.Writer, runner string, size int64) (int64, error) {
	name, ok := RecordedStreams[runner]
	if !ok {
		return 0, fmt.Errorf("measure: no recorded stream for runner %q", runner)
	}
	root, err := RepoRoot()
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(RecordedPath(runner))))
	if err != nil {
		return 0, err
	}
	ls := bytes.SplitAfter(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(ls) < 3 {
		return 0, fmt.Errorf("measure: %s has %d lines, want a header, events and a terminal event", name, len(ls))
	}
	head, body, last := ls[0], bytes.Join(ls[1:len(ls)-1], nil), append(ls[len(ls)-1], '\n')
	bw := bufio.NewWriterSize(w, 1<<20)
	var written int64
	put := func(b []byte) {
		n, _ := bw.Write(b)
		written += int64(n)
	}
	put(head)
	for written+int64(len(last)) < size {
		put(body)
	}
	put(last)
	return written, bw.Flush()
}

// RepoRoot returns the module's root directory, where testdata/ is: found
// from this source file's path, which go run and go test both keep.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("measure: cannot find the source directory (built with -trimpath?)")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("measure: the module root for testdata/: %w", err)
	}
	return root, nil
}
