package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/pisession"
)

// openInput opens the one optional FILE argument, "-" or none meaning stdin.
func openInput(fsArgs []string, stdin io.Reader) (io.ReadCloser, string, error) {
	switch {
	case len(fsArgs) > 1:
		return nil, "", fmt.Errorf("want at most one FILE, got %d arguments", len(fsArgs))
	case len(fsArgs) == 0 || fsArgs[0] == "-":
		return io.NopCloser(stdin), "-", nil
	}
	f, err := os.Open(fsArgs[0])
	if err != nil {
		return nil, "", fmt.Errorf("cannot read %s: %v", fsArgs[0], err)
	}
	return f, fsArgs[0], nil
}

func cmdClassify(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("classify", "[--runner R] [--stream stdout|stderr] [FILE|-]", stdout, stderr)
	runnerName := fs.String("runner", "command", "the `runner` whose output this is: command, pi, codex, claude, opencode, gemini")
	stream := fs.String("stream", "stderr", "the `stream` the text came from: stdout or stderr")
	if code := fs.parseAny(args); code >= 0 {
		return code
	}
	s := pilot.Stream(*stream)
	if s != pilot.Stdout && s != pilot.Stderr {
		return badInput(stderr, "classify", "--stream: want stdout or stderr, got %q", *stream)
	}
	var runner pilot.Runner
	var names []string
	for _, r := range agents.Runners() {
		names = append(names, r.Name())
		if r.Name() == *runnerName {
			runner = r
		}
	}
	if runner == nil {
		return badInput(stderr, "classify", "--runner: unknown runner %q: want one of %s", *runnerName, strings.Join(names, ", "))
	}
	in, _, err := openInput(fs.Args(), stdin)
	if err != nil {
		return badInput(stderr, "classify", "%v", err)
	}
	defer in.Close()
	diagnose, err := agents.Classifier(runner)
	if err != nil {
		return badInput(stderr, "classify", "--runner %s: %v", *runnerName, err)
	}
	// Every line is classified as in a dispatch: the strongest wins.
	var c pilot.Classification
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line != "" || err == nil {
			if d, ok := diagnose(s, line); ok {
				c = pilot.Strongest(c, d)
			}
		}
		if err != nil {
			break
		}
	}
	if c.Evidence == "" {
		c = pilot.Classification{Class: pilot.FailGeneric}
	}
	out := struct {
		Class              pilot.FailureClass `json:"failure_class"`
		Evidence           *string            `json:"evidence"`
		EvidenceSource     *string            `json:"evidence_source"`
		EvidenceNote       string             `json:"evidence_note,omitempty"`
		TransportConfirmed bool               `json:"provider_transport_failure_confirmed"`
		RetryAfterMS       int64              `json:"retry_after_ms,omitempty"`
	}{Class: c.Class, EvidenceNote: c.Note, TransportConfirmed: c.TransportConfirmed, RetryAfterMS: c.RetryAfter.Milliseconds()}
	if c.Evidence != "" {
		src := c.Source
		if src == "" {
			src = *runnerName + ":" + *stream
		}
		out.Evidence, out.EvidenceSource = &c.Evidence, &src
	}
	writeJSON(stdout, out)
	return exitOK
}

func cmdPhase(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("phase", "[FILE|-]", stdout, stderr)
	if code := fs.parseAny(args); code >= 0 {
		return code
	}
	in, name, err := openInput(fs.Args(), stdin)
	if err != nil {
		return badInput(stderr, "phase", "%v", err)
	}
	defer in.Close()
	st, err := pisession.Parse(in)
	if err != nil {
		return badInput(stderr, "phase", "cannot read %s: %v", name, err)
	}
	writeJSON(stdout, st)
	return exitOK
}
