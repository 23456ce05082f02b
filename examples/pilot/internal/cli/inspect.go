package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
	"github.com/pilotworkers/pilot/pisession"
	"github.com/pilotworkers/pilot/runs"
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
	fs := newFlagSet("classify", "[--runner R] [--stream stdout|stderr] [FILE|RUN_ID|-] [--run-dir DIR]", stdout, stderr)
	runnerName := fs.String("runner", "", "the `runner` whose output this is: command, pi, codex, claude, opencode, gemini (default: a run's own, else command)")
	stream := fs.String("stream", "stderr", "the `stream` the text came from: stdout or stderr (a stream.log says it line by line)")
	runDir := runDirFlag(fs)
	if code := fs.parseAny(args); code >= 0 {
		return code
	}
	s := pilot.Stream(*stream)
	if s != pilot.Stdout && s != pilot.Stderr {
		return badInput(stderr, "classify", "--stream: want stdout or stderr, got %q", *stream)
	}
	// A run of pilot's own (its id, or its directory): its stream.log,
	// whose lines say their stream, read as its runner's.
	input, tagged := fs.Args(), false
	if len(input) == 1 && input[0] != "-" {
		if st, err := os.Stat(input[0]); err != nil || st.IsDir() {
			r, ferr := runs.Find(resolveRunDir(*runDir), input[0])
			if ferr != nil {
				return badInput(stderr, "classify", "%s is no file, and no run: %v", input[0], ferr)
			}
			if *runnerName == "" {
				*runnerName = r.Record.Runner
			}
			input = []string{r.StreamLog()}
		}
		tagged = filepath.Base(input[0]) == "stream.log"
	}
	if *runnerName == "" {
		*runnerName = "command"
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
	in, _, err := openInput(input, stdin)
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
		ls := s
		if tagged {
			// stream.log: "out " or "err " before each line.
			switch {
			case strings.HasPrefix(line, "out "):
				ls, line = pilot.Stdout, line[len("out "):]
			case strings.HasPrefix(line, "err "):
				ls, line = pilot.Stderr, line[len("err "):]
			}
		}
		if line != "" || err == nil {
			if d, ok := diagnose(ls, line); ok {
				if c = pilot.Strongest(c, d); c.Evidence == d.Evidence {
					s = ls // the stream of the line that proves it
				}
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
			src = *runnerName + ":" + string(s)
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
