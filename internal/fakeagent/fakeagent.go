// Package fakeagent is a scripted stand-in for an agent CLI, used by tests
// and the demo. A program becomes the fake agent when EnvFakeAgent is set:
// it calls Main with its arguments, which are the script.
//
// Steps, one per argument:
//
//	out=TEXT        print TEXT and a newline on stdout
//	err=TEXT        print TEXT and a newline on stderr
//	raw=TEXT        print TEXT on stdout with no newline
//	bytes=ESCAPED   print ESCAPED, read as the inside of a Go string literal
//	                (\x00, \xff, \n, ...), on stdout with no newline: for
//	                NUL bytes and invalid UTF-8, which an argument cannot hold
//	bigline=N       print one line of N bytes (a repeating pattern) on stdout
//	flood=N         write at least N bytes of text lines to stderr
//	printenv=NAME   print "NAME=value" or "NAME unset" on stdout
//	env             print the whole environment on stdout, one per line
//	stdin           copy stdin to stdout
//	sleep=DURATION  sleep (a Go duration)
//	alloc=SIZE      allocate SIZE bytes ("300MiB"; B, KiB, MiB, GiB) and
//	                write to every page of them, so that they are resident,
//	                and hold them until the process exits
//	block           wait forever
//	ignore-term     ignore SIGTERM from now on
//	ready           tell the parent fake agent this child is ready (see spawn)
//	session=PATH    use PATH as the native session file for sess= steps
//	sess=JSON       append JSON and a newline to the session file
//	sessraw=TEXT    append TEXT, with no newline, to the session file (a
//	                torn entry, as a writer that died mid-write leaves)
//	tick=N/DURATION print N numbered lines on stdout, DURATION apart
//	await=PATH      wait until PATH exists (checked every 5 ms)
//	lock=PATH       take an exclusive lock (flock) on PATH, created if need
//	                be, without waiting, and hold it until the process exits;
//	                when another holds it, say so on stderr and exit 3: a
//	                worker that must never run beside another that writes
//	                PATH
//	signal=N        die from signal N (the process execs a shell that kills itself)
//	exit=N          exit with status N
//	fds             print "fds 0 1 2": the descriptors this process
//	                inherited (see InheritedFDs), each from 3 up with what
//	                it is ("10=pipe:[123]")
//	junkfds         write 4 KiB of junk to every descriptor from 3 to 1023,
//	                read from each, and print what it reached (Linux; see
//	                junkFDs)
//	killparent      SIGKILL the parent process, then its process group, and
//	                print "killparent ppid P pgid G parent ERR group ERR"
//	passfds=PATH    hand this process's stdout and stderr to whoever listens
//	                on the Unix socket PATH (SCM_RIGHTS): a worker that lets
//	                a process outside its tree hold its output pipes open
//	spawn[:OPTS] STEPS... end
//	                start a child fake agent running STEPS, wait until it has
//	                run "ready" (or exited), then print "spawned PID" on
//	                stdout. OPTS is a comma list: setsid (own session), hold
//	                (the child keeps this agent's stdout and stderr; else
//	                its output goes to /dev/null).
//
// After the last step the agent exits 0.
package fakeagent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/filelock"
)

// EnvFakeAgent, when set in a program's environment, makes it the fake agent.
const EnvFakeAgent = "PILOT_FAKE_AGENT"

// envReadyFD is set in a spawned child to the descriptor of its ready pipe.
const envReadyFD = "PILOT_FAKE_AGENT_READY_FD"

// Main runs the script and returns the exit status.
func Main(args []string) int {
	// The agent leaves the children it spawns unwaited on purpose: os/exec's
	// leak check (GODEBUG=execwait, which tests set) is not for it.
	if v, ok := os.LookupEnv("GODEBUG"); ok && strings.Contains(v, "execwait") {
		var keep []string
		for _, kv := range strings.Split(v, ",") {
			if !strings.HasPrefix(kv, "execwait") {
				keep = append(keep, kv)
			}
		}
		os.Setenv("GODEBUG", strings.Join(keep, ","))
	}
	if prefix := os.Getenv(EnvReplay); prefix != "" {
		return replay(prefix, args)
	}
	var ready *os.File
	if fd, err := strconv.Atoi(os.Getenv(envReadyFD)); err == nil {
		closeOnExec(fd)
		ready = os.NewFile(uintptr(fd), "ready")
		os.Unsetenv(envReadyFD)
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	session := ""
	var locks []*os.File
	defer func() {
		for _, f := range locks {
			f.Close()
		}
	}()
	for i := 0; i < len(args); i++ {
		step := args[i]
		name, val, _ := strings.Cut(step, "=")
		if strings.HasPrefix(step, "spawn") {
			end := matchEnd(args, i)
			if end < 0 {
				fmt.Fprintf(os.Stderr, "fakeagent: %q has no matching end\n", step)
				return 2
			}
			opts := strings.TrimPrefix(strings.TrimPrefix(step, "spawn"), ":")
			out.Flush()
			pid, err := spawn(opts, args[i+1:end])
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: spawn: %v\n", err)
				return 2
			}
			fmt.Fprintf(out, "spawned %d\n", pid)
			out.Flush()
			i = end
			continue
		}
		switch name {
		case "out":
			fmt.Fprintln(out, val)
			out.Flush()
		case "err":
			out.Flush()
			fmt.Fprintln(os.Stderr, val)
		case "raw":
			fmt.Fprint(out, val)
			out.Flush()
		case "bytes":
			b, err := strconv.Unquote(`"` + val + `"`)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: bytes: %q is not a Go string body: %v\n", val, err)
				return 2
			}
			out.WriteString(b)
			out.Flush()
		case "bigline":
			n, _ := strconv.Atoi(val)
			writePattern(out, n)
			out.WriteByte('\n')
			out.Flush()
		case "flood":
			n, _ := strconv.Atoi(val)
			w := bufio.NewWriterSize(os.Stderr, 64<<10)
			for n > 0 { // whole lines, at least n bytes
				line := "flooding stderr with a line of text that repeats\n"
				w.WriteString(line)
				n -= len(line)
			}
			w.Flush()
		case "printenv":
			if v, ok := os.LookupEnv(val); ok {
				fmt.Fprintf(out, "%s=%s\n", val, v)
			} else {
				fmt.Fprintf(out, "%s unset\n", val)
			}
			out.Flush()
		case "env":
			for _, kv := range os.Environ() {
				fmt.Fprintln(out, kv)
			}
			out.Flush()
		case "stdin":
			io.Copy(out, os.Stdin)
			out.Flush()
		case "sleep":
			d, _ := time.ParseDuration(val)
			time.Sleep(d)
		case "alloc":
			n, err := parseSize(val)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: alloc: %v\n", err)
				return 2
			}
			held = append(held, touched(n))
		case "block":
			out.Flush()
			for {
				time.Sleep(time.Hour)
			}
		case "session":
			session = val
		case "sess", "sessraw":
			if name == "sess" {
				val += "\n"
			}
			f, err := os.OpenFile(session, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: session: %v\n", err)
				return 2
			}
			f.WriteString(val)
			f.Close()
		case "tick":
			n, d, _ := strings.Cut(val, "/")
			count, _ := strconv.Atoi(n)
			every, _ := time.ParseDuration(d)
			for i := 1; i <= count; i++ {
				fmt.Fprintf(out, "tick %d\n", i)
				out.Flush()
				time.Sleep(every)
			}
		case "write", "append":
			// PATH=TEXT, TEXT a Go string body ("a\nb"); the file's
			// directory is made.
			path, body, _ := strings.Cut(val, "=")
			text, err := strconv.Unquote(`"` + body + `"`)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: %s: %q is not a Go string body: %v\n", name, body, err)
				return 2
			}
			if err := writeFile(path, text, name == "append"); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: %s: %v\n", name, err)
				return 2
			}
		case "move":
			src, dst, _ := strings.Cut(val, "=")
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: move: %v\n", err)
				return 2
			}
			if err := os.Rename(src, dst); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: move: %v\n", err)
				return 2
			}
		case "await":
			for {
				if _, err := os.Stat(val); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		case "lock":
			if err := os.MkdirAll(filepath.Dir(val), 0o755); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: lock: %v\n", err)
				return 2
			}
			f, err := os.OpenFile(val, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: lock: %v\n", err)
				return 2
			}
			if err := filelock.TryLock(f); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: lock: %s is held by another worker: %v\n", val, err)
				return 3
			}
			locks = append(locks, f) // held until the process exits
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "ready":
			if ready != nil {
				ready.Write([]byte("ready\n"))
				ready.Close()
				ready = nil
			}
		case "signal":
			// The Go runtime handles synchronous signals itself; a shell
			// that replaces this process dies from the signal for real.
			out.Flush()
			err := syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -" + val + " $$"}, os.Environ())
			fmt.Fprintf(os.Stderr, "fakeagent: exec sh: %v\n", err)
			return 2
		case "fds":
			fds, err := InheritedFDs()
			if err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: fds: %v\n", err)
				return 2
			}
			fmt.Fprintln(out, fdsLine(fds))
			out.Flush()
		case "junkfds":
			out.Flush()
			fmt.Fprintln(out, junkFDs())
			out.Flush()
		case "killparent":
			out.Flush()
			fmt.Fprintln(out, killParent())
			out.Flush()
		case "passfds":
			out.Flush()
			if err := passFDs(val); err != nil {
				fmt.Fprintf(os.Stderr, "fakeagent: passfds: %v\n", err)
				return 2
			}
		case "exit":
			n, _ := strconv.Atoi(val)
			out.Flush()
			return n
		default:
			fmt.Fprintf(os.Stderr, "fakeagent: unknown step %q\n", step)
			return 2
		}
	}
	return 0
}

// held keeps what alloc steps allocated.
var held [][]byte

// touched returns n bytes with every page written to, so that all of them
// are resident.
func touched(n int64) []byte {
	b := make([]byte, n)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// parseSize reads an alloc step's size: a number of bytes, or a number and
// B, KiB, MiB or GiB.
func parseSize(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("size %q: want a number of bytes, or of B, KiB, MiB or GiB", s)
			}
			return n * u.n, nil
		}
	}
	return 0, nil // not reached: the empty suffix matches
}

// matchEnd returns the index of the "end" that closes the spawn at i.
func matchEnd(args []string, i int) int {
	depth := 0
	for j := i; j < len(args); j++ {
		switch {
		case strings.HasPrefix(args[j], "spawn"):
			depth++
		case args[j] == "end":
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

func writePattern(w *bufio.Writer, n int) {
	const pat = "0123456789abcdefghijklmnopqrstuvwxyz"
	for n > 0 {
		k := len(pat)
		if k > n {
			k = n
		}
		w.WriteString(pat[:k])
		n -= k
	}
}

// Pattern returns the content bigline=n prints, for tests to compare.
func Pattern(n int) []byte {
	const pat = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	for i := range b {
		b[i] = pat[i%len(pat)]
	}
	return b
}

func spawn(opts string, steps []string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	cmd := exec.Command(exe, steps...)
	cmd.Env = append(os.Environ(), envReadyFD+"=3")
	cmd.ExtraFiles = []*os.File{wr}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	for _, o := range strings.Split(opts, ",") {
		switch o {
		case "":
		case "setsid":
			if err := setsid(cmd.SysProcAttr); err != nil {
				wr.Close()
				return 0, err
			}
		case "hold":
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		default:
			wr.Close()
			return 0, fmt.Errorf("unknown spawn option %q", o)
		}
	}
	if err := cmd.Start(); err != nil {
		wr.Close()
		return 0, err
	}
	wr.Close()
	io.Copy(io.Discard, rd) // until "ready" and close, or the child's exit
	pid := cmd.Process.Pid
	cmd.Process.Release() // the child is left to run; its reaper is not us
	return pid, nil
}

// writeFile writes (or appends) text to path, making its directory.
func writeFile(path, text string, appendTo bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}
