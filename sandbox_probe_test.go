package pilot_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const envProbe = "PILOT_TEST_PROBE"

// probeChild runs every probe named in its arguments ("read:PATH",
// "list:PATH", "write:PATH", "write-tmpdir", "connect:HOST:PORT",
// "signal-parent", "trace-parent", "environ:PID", "hold:FIFO") and
// prints one line per probe: "probe NAME ok" or "probe NAME denied ERR".
// It prints what it read, as a hostile worker would.
func probeChild(args []string) int {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, a := range args {
		kind, arg, _ := strings.Cut(a, ":")
		var err error
		switch kind {
		case "read":
			var data []byte
			if data, err = os.ReadFile(arg); err == nil {
				fmt.Fprintf(w, "read %s\n", strings.TrimSpace(string(data)))
			}
		case "list":
			_, err = os.ReadDir(arg)
		case "write":
			err = os.WriteFile(arg, []byte("probe\n"), 0o600)
		case "connect":
			var c net.Conn
			if c, err = net.Dial("tcp", arg); err == nil {
				c.Close()
			}
		case "write-tmpdir":
			err = os.WriteFile(filepath.Join(os.Getenv("TMPDIR"), "probe"), []byte("probe\n"), 0o600)
		case "signal-parent":
			var p *os.Process
			if p, err = os.FindProcess(os.Getppid()); err == nil {
				err = p.Signal(syscall.Signal(0))
			}
		case "print":
			fmt.Fprintf(w, "leak %s\n", arg)
			fmt.Fprintf(os.Stderr, "leak %s\n", arg)
		case "print-long":
			// A line longer than the test's MaxLineBytes: it reaches
			// stream.log through a spill file.
			fmt.Fprintf(w, "%s %s %s\n", strings.Repeat("x", 70000), arg, strings.Repeat("y", 70000))
		case "environ":
			var data []byte
			if data, err = os.ReadFile("/proc/" + arg + "/environ"); err == nil {
				fmt.Fprintf(w, "read %s\n", strings.ReplaceAll(string(data), "\x00", " "))
			}
		case "hold":
			// Says its pid, then blocks until the test opens the FIFO
			// arg for writing and closes it.
			fmt.Fprintf(w, "probe held %d\n", os.Getpid())
			w.Flush()
			var f *os.File
			if f, err = os.Open(arg); err == nil {
				_, err = io.Copy(io.Discard, f)
				f.Close()
			}
		case "trace-parent":
			_, err = os.Readlink(fmt.Sprintf("/proc/%d/exe", os.Getppid()))
		case "exit":
			w.Flush()
			fmt.Fprintln(os.Stderr, "probe: giving up")
			os.Exit(3)
		default:
			err = fmt.Errorf("unknown probe %q", a)
		}
		if err != nil {
			fmt.Fprintf(w, "probe %s denied %v\n", a, err)
		} else {
			fmt.Fprintf(w, "probe %s ok\n", a)
		}
	}
	return 0
}
