package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/pilotworkers/pilot/examples/pilot/internal/serve"
)

// cmdServe is 'pilot serve': the run directory's runs, a run's evidence
// and a fanout's or graph's timeline as a read-only local web page, until
// interrupted.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", "[--addr 127.0.0.1:0] [--run-dir DIR] [--state DIR]...", stdout, stderr)
	addr := fs.String("addr", "127.0.0.1:0", "`host:port` to listen on; a non-loopback address needs the token it prints (port 0: any free port)")
	runDir := runDirFlag(fs)
	var states []string
	fs.Func("state", "a schedule state `directory` whose schedule.json the page shows; repeatable", func(s string) error {
		states = append(states, s)
		return nil
	})
	if code := fs.parse(args); code >= 0 {
		return code
	}
	if _, _, err := net.SplitHostPort(*addr); err != nil {
		return badInput(stderr, "serve", "--addr: want host:port (127.0.0.1:8080, or :0 for any port on every address), got %q", *addr)
	}
	cfg := serve.Config{RunDir: resolveRunDir(*runDir), StateDirs: states}
	if !serve.IsLoopback(*addr) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			fmt.Fprintf(stderr, "pilot serve: making the token: %v\n", err)
			return exitFailed
		}
		cfg.Token = hex.EncodeToString(b[:])
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return badInput(stderr, "serve", "--addr: %v", err)
	}
	srv := &http.Server{Handler: serve.Handler(cfg), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	u := url.URL{Scheme: "http", Host: printedHost(*addr, ln.Addr()), Path: "/"}
	if cfg.Token != "" {
		u.RawQuery = "token=" + cfg.Token
		fmt.Fprintf(stderr, "pilot serve: listening on %s beyond loopback: every request needs the token in this address (once; the browser keeps it in a cookie)\n", ln.Addr())
	}
	fmt.Fprintf(stdout, "pilot serve: %s\n", u.String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "pilot serve: %v\n", err)
		return exitFailed
	case <-ctx.Done():
	}
	// The live streams end with ctx (their requests' base context).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "pilot serve: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// printedHost is the host:port of the address to open: the host asked
// for with the port bound, and this machine's name for an unspecified
// host (":0", "0.0.0.0:0"), where any of its addresses will do.
func printedHost(asked string, bound net.Addr) string {
	host, _, _ := net.SplitHostPort(asked)
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return bound.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		} else {
			host = "localhost"
		}
	}
	return net.JoinHostPort(host, port)
}
