package pilot

import (
	"sync"

	"github.com/pilotworkers/pilot/internal/rundir"
)

// reconciled holds the run directories this process has reconciled.
var reconciled sync.Map // string -> *sync.Once

// reconcileRunDir closes out, once per process, the runs in dir that a
// pilot killed before it could (SIGKILL, a crash) left saying "running":
// they are marked "abandoned" with the evidence, whatever of their process
// trees is left is ended, and their temporary files are removed
// (internal/rundir). The first dispatch into a run directory does it;
// `pilot runs --reconcile` does it on demand. Errors are not the
// dispatch's: what could not be closed out is left for the next try.
func reconcileRunDir(dir string) {
	once, _ := reconciled.LoadOrStore(dir, new(sync.Once))
	once.(*sync.Once).Do(func() { _, _ = rundir.Reconcile(dir) })
}
