package pilot

import (
	"context"

	"github.com/pilotworkers/pilot/internal/supervise"
)

// Shutdown ends pilot's supervisor process (see the package doc) now rather
// than 5 seconds after the last dispatch. Like [net/http.Server.Shutdown]
// it first waits until no dispatch is running: no Dispatch call, and no
// attempt of retry.Dispatch or of a Fanout job (the waits between
// attempts do not count). If ctx is done first, it returns
// [context.Cause](ctx) and leaves the running dispatches alone. Otherwise
// it stops the supervisor, reaps it, and waits for every goroutine that
// served it to return: when Shutdown returns nil, no goroutine or process
// started by pilot is left, unless a dispatch began after Shutdown found
// none running (that one starts a new supervisor).
//
// A later dispatch starts a new supervisor, as the first one did. Call
// Shutdown before checking for leaked goroutines or child processes, to
// have the supervisor gone before the program goes on, and before exit:
// the exit ends the supervisor too, but then PID 1 must reap it, which in
// a container without an init never happens (a <defunct> per run).
func Shutdown(ctx context.Context) error {
	return supervise.Shutdown(ctx)
}
