package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/contrib/otel/pilototel"
	"github.com/pilotworkers/pilot/examples/pilot/internal/cli"
)

// envEndpoint is the standard variable that turns export on.
const envEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// flushTimeout bounds the flush at exit.
const flushTimeout = 10 * time.Second

// run is the pilot command with args, exporting its telemetry when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, and flushing it before it returns
// the command's exit status, whatever that is.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	h, shutdown, err := setup(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pilot: telemetry: %v\n", err)
		return 2
	}
	code := cli.Run(ctx, args, stdin, stdout, stderr, h)
	// A fresh context: an interrupted command still flushes what it did.
	sctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "pilot: telemetry: export at exit: %v\n", err)
	}
	return code
}

// setup makes the OTLP/HTTP exporters, the SDK's providers over them and
// pilototel's Telemetry on those, as cli.Hooks, when OTEL_EXPORTER_OTLP_ENDPOINT
// is set (and OTEL_SDK_DISABLED is not true); shutdown flushes and stops
// the providers. Without it, no hooks and a shutdown that does nothing.
func setup(ctx context.Context) (h cli.Hooks, shutdown func(context.Context) error, err error) {
	shutdown = func(context.Context) error { return nil }
	if os.Getenv(envEndpoint) == "" || strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return h, shutdown, nil
	}
	// Attributes first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// (WithFromEnv) override them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("pilot")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return h, shutdown, fmt.Errorf("resource: %w", err)
	}
	te, err := otlptracehttp.New(ctx)
	if err != nil {
		return h, shutdown, fmt.Errorf("trace exporter: %w", err)
	}
	me, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return h, shutdown, errors.Join(fmt.Errorf("metric exporter: %w", err), te.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)), sdkmetric.WithResource(res))
	// Shutdown flushes: the batched spans are exported, the metrics read
	// and exported once more.
	shutdown = func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
	}
	tel, err := pilototel.New(pilototel.Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		return h, shutdown, errors.Join(err, shutdown(ctx))
	}
	return cli.Hooks{
		Dispatcher: tel.Instrument,
		Task:       func(td pilot.TaskDispatcher) pilot.TaskDispatcher { return tel.Dispatcher(td) },
		Fanout:     tel.Fanout,
		Schedule:   tel.Schedule,
	}, shutdown, nil
}
