package runs

import "github.com/pilotworkers/pilot/internal/rundir"

// Closed is a run that Reconcile closed out.
type Closed struct {
	RunID  string `json:"run_id"`
	Record string `json:"record"` // the path of its record.json
	// Evidence says how the run's pilot was found gone; the record holds
	// it too, as failure_evidence_excerpt.
	Evidence string `json:"evidence"`
	// Killed lists the run's processes it sent SIGKILL; Survivors those
	// still alive after it waited for them.
	Killed    []int `json:"killed,omitempty"`
	Survivors []int `json:"survivors,omitempty"`
	// Removed lists the temporary files of pilot's it removed from the
	// run's directory.
	Removed []string `json:"removed,omitempty"`
	// Note says what this system could not check (without /proc the
	// run's processes are not looked for).
	Note string `json:"note,omitempty"`
}

// Reconcile closes out the runs in dir whose record still says
// StatusRunning although their pilot is gone (see Run.Owner): it kills
// what is left of each run's processes (waiting at most 5 s for them),
// removes pilot's temporary files from its directory, and rewrites its
// record with StatusAbandoned, ended_at and the evidence, keeping every
// other field. It returns the runs it closed out, in run id order.
//
// A dispatcher does the same once per process, at its first dispatch into
// a run directory; call Reconcile to do it on demand, or before Prune.
// It is cheap when there is nothing to do, and safe to call from several
// processes at once (a lock in dir makes each run closed out once). The
// error joins what went wrong; the runs closed out are returned all the
// same.
func Reconcile(dir string) ([]Closed, error) {
	rep, err := rundir.Reconcile(resolve(dir))
	var out []Closed
	for _, r := range rep.Runs {
		out = append(out, Closed{RunID: r.RunID, Record: r.Record, Evidence: r.Evidence, Killed: r.Killed,
			Survivors: r.Survivors, Removed: r.Removed, Note: r.Note})
	}
	return out, err
}
