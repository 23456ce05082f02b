// Command otel is the pilot command (examples/pilot) with OpenTelemetry:
// when OTEL_EXPORTER_OTLP_ENDPOINT is set, the spans and metrics of
// contrib/otel (package pilototel) of its dispatches go to that OTLP/HTTP
// endpoint; without it, it is examples/pilot as it is.
//
//	cd examples/pilot/otel
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run . demo
//
// The exporters (otlptracehttp, otlpmetrichttp) read the other standard
// variables too: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT for one signal,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TIMEOUT, ...;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES set the resource (service
// name "pilot" by default); OTEL_SDK_DISABLED=true turns export off.
//
// Spans are batched and metrics read periodically; before it exits, with
// whatever status, the command flushes both (within 10 s: an endpoint that
// does not answer by then is reported on stderr, and the exit status is
// the command's). It lives in a module of its own so that the core module
// keeps its dependencies.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/pilotworkers/pilot/examples/pilot/internal/cli"
)

func main() {
	// The demo's workers re-execute this binary as the fake agent: serve
	// them before any telemetry is set up.
	cli.ServeFakeAgent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	cli.EndSupervisor(os.Stderr) // reaped here, not left to PID 1 (see cli.Main)
	os.Exit(code)
}
