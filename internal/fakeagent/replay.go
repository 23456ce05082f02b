package fakeagent

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Replay mode plays back a recorded run of an agent CLI, whatever its
// command line: the fake agent stands in for pi, codex or claude and
// ignores the flags a runner gives it.
//
//	PILOT_FAKE_REPLAY=PREFIX   replay PREFIX.stdout and PREFIX.stderr
//	PILOT_FAKE_REPLAY_EXIT=N   then exit with status N (default 0)
//	PILOT_FAKE_REPLAY_SIGNAL=N then die from signal N instead
//	PILOT_FAKE_CALL_OUT=PATH   first write {"argv", "stdin", "env", "fds"} to PATH
//	PILOT_FAKE_REPLAY_ECHO=VAR print VAR's value on stdout and stderr too,
//	                           as a CLI that quotes its key in an error would
//	PILOT_FAKE_REPLAY_ECHO_LINE=L  that line L ({key} the value) in place of
//	                           "invalid api key: {key}"
//	PILOT_FAKE_REPLAY_ECHO_FILE=PATH  then print "read a key: " and PATH's
//	                           content on stdout and stderr, as a worker that
//	                           found another provider's key would
//	PILOT_FAKE_REPLAY_BLOCK=1  then wait forever instead of exiting, as a
//	                           CLI that hangs would
//	PILOT_FAKE_REPLAY_RATE=N   print PREFIX.stdout paced, as a CLI at work
//	                           does: its first line, then its middle lines
//	                           over and over, one write each, N lines a
//	                           second, for PILOT_FAKE_REPLAY_FOR (a Go
//	                           duration; default 10s), then its last line
//	                           (the terminal event)
//
// When PREFIX.session exists and the arguments hold "--session PATH" (pi's
// flag), the session file is copied to PATH before any output, as pi
// would have written it.
const (
	EnvReplay       = "PILOT_FAKE_REPLAY"
	EnvReplayExit   = "PILOT_FAKE_REPLAY_EXIT"
	EnvReplaySignal = "PILOT_FAKE_REPLAY_SIGNAL"
	EnvCallOut      = "PILOT_FAKE_CALL_OUT"
	EnvReplayEcho   = "PILOT_FAKE_REPLAY_ECHO"
	EnvReplayLine   = "PILOT_FAKE_REPLAY_ECHO_LINE"
	EnvReplayBlock  = "PILOT_FAKE_REPLAY_BLOCK"
	EnvReplayFile   = "PILOT_FAKE_REPLAY_ECHO_FILE"
	EnvReplayRate   = "PILOT_FAKE_REPLAY_RATE"
	EnvReplayFor    = "PILOT_FAKE_REPLAY_FOR"
)

// Call is what PILOT_FAKE_CALL_OUT receives: how the fake agent was run.
// FDs are the descriptors it inherited (InheritedFDs; nil where they
// cannot be listed).
type Call struct {
	Argv  []string `json:"argv"`
	Stdin string   `json:"stdin"`
	Env   []string `json:"env"`
	FDs   []int    `json:"fds"`
}

func replay(prefix string, args []string) int {
	if out := os.Getenv(EnvCallOut); out != "" {
		fds, _ := InheritedFDs() // before anything here opens a file
		stdin, _ := io.ReadAll(os.Stdin)
		data, _ := json.Marshal(Call{Argv: args, Stdin: string(stdin), Env: os.Environ(), FDs: fds})
		if err := os.WriteFile(out, data, 0o600); err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
			return 2
		}
	}
	if sess, err := os.ReadFile(prefix + ".session"); err == nil {
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--session" {
				if err := os.WriteFile(args[i+1], sess, 0o600); err != nil {
					fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
					return 2
				}
			}
		}
	}
	for _, s := range []struct {
		ext string
		w   *os.File
	}{{".stdout", os.Stdout}, {".stderr", os.Stderr}} {
		data, err := os.ReadFile(prefix + s.ext)
		if err != nil && !os.IsNotExist(err) {
			fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
			return 2
		}
		if rate := os.Getenv(EnvReplayRate); rate != "" && s.ext == ".stdout" {
			if err := paced(s.w, data, rate, os.Getenv(EnvReplayFor)); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
				return 2
			}
			continue
		}
		s.w.Write(data)
	}
	if v := os.Getenv(EnvReplayEcho); v != "" {
		line := os.Getenv(EnvReplayLine)
		if line == "" {
			line = "invalid api key: {key}"
		}
		line = strings.ReplaceAll(line, "{key}", os.Getenv(v)) + "\n"
		os.Stdout.WriteString(line)
		os.Stderr.WriteString(line)
	}
	if path := os.Getenv(EnvReplayFile); path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
			return 2
		}
		line := "read a key: " + strings.TrimSpace(string(data)) + "\n"
		os.Stdout.WriteString(line)
		os.Stderr.WriteString(line)
	}
	if os.Getenv(EnvReplayBlock) != "" {
		for {
			time.Sleep(time.Hour)
		}
	}
	if n, err := strconv.Atoi(os.Getenv(EnvReplaySignal)); err == nil && n > 0 {
		// As the signal= step: a shell that replaces this process dies
		// from the signal for real.
		err := syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -" + strconv.Itoa(n) + " $$"}, os.Environ())
		fmt.Fprintf(os.Stderr, "fakeagent: exec sh: %v\n", err)
		return 2
	}
	code, _ := strconv.Atoi(os.Getenv(EnvReplayExit))
	return code
}

// paced writes data's lines to w as PILOT_FAKE_REPLAY_RATE describes: the
// first, rate×dur of the middle ones cycled at rate lines a second, the
// last.
func paced(w io.Writer, data []byte, rate, dur string) error {
	n, err := strconv.ParseFloat(rate, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s=%q: want a positive number of lines a second", EnvReplayRate, rate)
	}
	d := 10 * time.Second
	if dur != "" {
		if d, err = time.ParseDuration(dur); err != nil {
			return fmt.Errorf("%s: %v", EnvReplayFor, err)
		}
	}
	ls := strings.SplitAfter(strings.TrimRight(string(data), "\n"), "\n")
	if len(ls) < 3 {
		return fmt.Errorf("a paced replay needs a first line, middle lines and a last line; the recording has %d lines", len(ls))
	}
	head, body, last := ls[0], ls[1:len(ls)-1], ls[len(ls)-1]+"\n"
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / n))
	defer t.Stop()
	for i := range int(n * d.Seconds()) {
		<-t.C
		if _, err := io.WriteString(w, body[i%len(body)]); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, last)
	return err
}
