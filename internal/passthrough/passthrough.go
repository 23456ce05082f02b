// Package passthrough passes the optional methods that pilot.Fanout looks
// for on its Dispatcher (Check, run before anything starts, and Runs) on
// through a TaskDispatcher that wraps another (retry, pilotslog,
// pilototel), so that wrapping one does not silently drop them.
package passthrough

import (
	"context"

	"github.com/pilotworkers/pilot"
)

// Check calls d's Check if it has one; nil otherwise.
func Check(ctx context.Context, d pilot.TaskDispatcher, t pilot.Task) error {
	if c, ok := d.(interface {
		Check(context.Context, pilot.Task) error
	}); ok {
		return c.Check(ctx, t)
	}
	return nil
}

// Runs calls d's Runs if it has one; true otherwise.
func Runs(d pilot.TaskDispatcher, t pilot.Task) bool {
	if r, ok := d.(interface{ Runs(pilot.Task) bool }); ok {
		return r.Runs(t)
	}
	return true
}
