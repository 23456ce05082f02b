package runs

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/pilotworkers/pilot"
)

// followInterval is how often Logs, following, looks for more of the log
// and for the run's end.
const followInterval = 50 * time.Millisecond

// GoneError is the error of Logs when it follows a run whose pilot died:
// the run will never end, and Reconcile marks it abandoned.
type GoneError struct {
	RunID    string
	Evidence string // how the pilot was found gone (see Run.Owner)
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("runs: %s will not end: its pilot is gone (%s); Reconcile marks it %s", e.RunID, e.Evidence, StatusAbandoned)
}

// Logs copies the run's stream.log to w. A run whose worker has not
// started has no stream.log yet: that error wraps fs.ErrNotExist.
//
// With follow set, Logs keeps copying as the log grows until the run's
// record says it is over (all of the log is then out: pilot closes the
// log before it writes its final record), its pilot is found gone (a
// [*GoneError]), or ctx is done (nil). The log may appear late.
func Logs(ctx context.Context, w io.Writer, r Run, follow bool) error {
	if !follow {
		f, err := os.Open(r.StreamLog())
		if err != nil {
			return fmt.Errorf("runs: %s has no log yet, or it cannot be read: %w", r.ID, err)
		}
		defer f.Close()
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("runs: copying the log of %s: %w", r.ID, err)
		}
		return nil
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		rec, err := pilot.ReadRecord(r.RecordPath())
		if err != nil {
			return &RecordError{Dir: r.Dir, Err: err}
		}
		over := rec.Status != StatusRunning
		alive, evidence := true, ""
		if !over {
			alive, evidence = Run{ID: r.ID, Dir: r.Dir, Record: rec}.Owner()
		}
		if f == nil {
			f, _ = os.Open(r.StreamLog()) // not there until the worker has started
		}
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return fmt.Errorf("runs: copying the log of %s: %w", r.ID, err)
			}
		}
		switch {
		case over:
			return nil
		case !alive:
			return &GoneError{RunID: r.ID, Evidence: evidence}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
