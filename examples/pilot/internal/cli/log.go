package cli

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilotslog"
)

// logFlag adds --log text|json to fs: every event of the command's
// dispatches as a log/slog record on stderr (pilotslog), in that format.
// The returned function gives the logger, nil without --log.
func logFlag(fs *flagSet, stderr io.Writer) func() *slog.Logger {
	var format string
	fs.Func("log", "log every event on stderr as `text` or json (log/slog records: started, phases, stall inspections, retries, verdicts)", func(s string) error {
		switch s {
		case "text", "json":
			format = s
			return nil
		}
		return fmt.Errorf("want text or json, got %q", s)
	})
	return func() *slog.Logger {
		opts := &slog.HandlerOptions{Level: slog.LevelDebug}
		switch format {
		case "text":
			return slog.New(slog.NewTextHandler(stderr, opts))
		case "json":
			return slog.New(slog.NewJSONHandler(stderr, opts))
		}
		return nil
	}
}

// logged wraps td so that l logs its tasks' events and pilot's own
// failures; td as it is when l is nil.
func logged(l *slog.Logger, td pilot.TaskDispatcher) pilot.TaskDispatcher {
	if l == nil {
		return td
	}
	return &pilotslog.Dispatcher{Dispatcher: td, Logger: l}
}
