package pilot

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pilotworkers/pilot/internal/atomicfile"
	"github.com/pilotworkers/pilot/internal/lines"
)

// stderrTailRunes is the most characters a stderr_tail holds.
const stderrTailRunes = 500

// run is the state of one dispatch.
type run struct {
	d         *Dispatcher
	task      Task
	prov      Provider
	runner    Runner
	secret    string                // the provider's own credential, for its worker
	red       redactor              // every secret pilot found, taken out of what it writes
	others    *background[[]string] // the other providers' secrets
	redacting bool                  // red holds them (awaitSecrets)

	id      string
	dir     string
	rec     Record
	recPath string
	events  *os.File
	// eventBuf is where emit writes an event's line, under emitMu.
	eventBuf []byte
	stream   *os.File
	log      *lines.Batch // stream.log's writes, batched per read and written beside the reading
	watcher  Watcher
	wrapper  []string // what the worker runs beneath (macOS's sandbox-exec), or nil

	pendingTask []byte              // task.md content not yet written
	final       *atomicfile.Pending // the final record's temporary file

	// files makes the run directory's other files while the worker
	// starts; running writes the "running" record while it runs. Either
	// is nil until started.
	files   *background[struct{}]
	running *background[struct{}]

	emitMu   sync.Mutex // serializes events.log writes and the queueing of events
	delivery *delivery  // hands events to the observers; nil without any
	lineMu   sync.Mutex // serializes watcher, OnLine and stream.log writes

	lastOutput  atomic.Int64 // unix nanos of the last byte read
	stdoutBytes atomic.Int64
	stderrBytes atomic.Int64
	stderrTail  lines.Tail
	streamTail  lines.Tail      // both streams, for stall inspections
	diag        *Classification // the strongest diagnostic so far; guarded by lineMu
	mem         *memoryWatch    // the tree's memory; nil until the worker started
	confined    bool            // the sandbox was enforced
	denial      string          // the latest line showing a denied access; guarded by lineMu
}

func (r *run) timeout() time.Duration {
	if r.task.Timeout != 0 {
		return r.task.Timeout
	}
	return r.d.Timeout
}

func (r *run) idleTimeout() time.Duration {
	if r.task.IdleTimeout != 0 {
		return r.task.IdleTimeout
	}
	return r.d.IdleTimeout
}

// tmpDir is the worker's private temp dir, in its run directory.
func (r *run) tmpDir() string { return filepath.Join(r.dir, "tmp") }
