// Command devserver runs a Temporal server for pilot's tests and local
// runs: go.temporal.io/server's temporaltest (an in-memory SQLite server
// with one namespace) on 127.0.0.1. It writes the frontend's host:port and
// the namespace, one per line, to the file -addr-file once the server
// serves, and stops on SIGINT or SIGTERM.
//
// It is a module of its own: go.temporal.io/server v1.32.1 and
// go.temporal.io/sdk v1.51.0 need go.temporal.io/api versions that cannot
// share one module.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/temporaltest"
)

func main() {
	addrFile := flag.String("addr-file", "", "write the server's host:port and namespace here (required)")
	flag.Parse()
	if *addrFile == "" {
		fmt.Fprintln(os.Stderr, "devserver: -addr-file is required: the file to write the server's address to")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ts := temporaltest.NewServer()
	c := ts.GetDefaultClient()
	// The namespace serves once a call on it succeeds.
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.WorkflowService().DescribeNamespace(cctx, &workflowservice.DescribeNamespaceRequest{Namespace: ts.GetDefaultNamespace()})
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			ts.Stop()
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "devserver: waiting for the namespace:", err)
		time.Sleep(100 * time.Millisecond)
	}
	data := fmt.Sprintf("%s\n%s\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	tmp := filepath.Join(filepath.Dir(*addrFile), "."+filepath.Base(*addrFile)+".tmp")
	err := os.WriteFile(tmp, []byte(data), 0o644)
	if err == nil {
		err = os.Rename(tmp, *addrFile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devserver: writing the address file:", err)
		ts.Stop()
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "devserver: serving %s, namespace %s\n", ts.GetFrontendHostPort(), ts.GetDefaultNamespace())
	<-ctx.Done()
	ts.Stop()
}
