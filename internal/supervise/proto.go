// Package supervise runs worker processes under a helper process, the
// supervisor, that keeps every descendant of every worker reachable and kills
// them all when a job ends or when the program that started it dies.
//
// The supervisor is the program's own executable started again with
// EnvSupervisor set: this package's init function notices and runs the
// supervisor instead of the program. On Linux it is a child subreaper, so
// descendants that double-fork or call setsid are re-parented to it instead
// of to init, and it reaps them; the program that embeds pilot keeps reaping
// its own children exactly as before. On other Unix systems (darwin) it
// holds each worker by its process group only, and descendants that leave
// the group escape (see server_group.go). On Linux it also measures a job's
// tree when asked (Job.Sample): the resident memory of each of its
// processes, from /proc. One supervisor serves every job of
// the process. When the program exits or is killed, the supervisor's control
// socket reaches end of file and it terminates every job's process tree.
// Elsewhere (windows) Start returns an error wrapping errors.ErrUnsupported.
package supervise

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/pilotworkers/pilot/internal/landlock"
)

// EnvSupervisor is set (to the control socket's descriptor number) in the
// environment of a supervisor process.
const EnvSupervisor = "PILOT_SUPERVISOR_FD"

// msg is one frame of the control protocol, in either direction.
type msg struct {
	Op string `json:"op"`
	ID uint64 `json:"id"`

	// start
	Path    string   `json:"path,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Cookie  string   `json:"cookie,omitempty"`
	GraceMS int64    `json:"grace_ms,omitempty"`
	// Sandbox, when set, confines the worker (Linux: Landlock).
	Sandbox *landlock.Ruleset `json:"sandbox,omitempty"`

	// signal
	Sig int `json:"sig,omitempty"`

	// replies
	Pid int    `json:"pid,omitempty"`
	Err string `json:"err,omitempty"`
	// Errno (started) is the error number of Err, when it has one: a
	// fork or exec that failed for want of descriptors (EMFILE) is not
	// the worker's failure.
	Errno     int    `json:"errno,omitempty"`
	Status    uint32 `json:"status,omitempty"`
	Leftovers int    `json:"leftovers,omitempty"`
	// MaxRSS (exited) is the leader's own peak resident memory in bytes,
	// from its rusage.
	MaxRSS int64 `json:"max_rss,omitempty"`
	// Memory (sample) is the tree's resident memory now.
	Memory *Memory `json:"memory,omitempty"`
}

// Ops.
const (
	opStart   = "start"   // client → supervisor, with 3 descriptors
	opSignal  = "signal"  // client → supervisor
	opStarted = "started" // supervisor → client
	opExited  = "exited"  // supervisor → client: the leader was reaped
	opDone    = "done"    // supervisor → client: the whole tree is gone
	opSample  = "sample"  // client → supervisor, and its reply: the tree's memory
)

const maxFrame = 64 << 20

// wire is msg as it travels: paths, arguments and environment are byte
// strings (base64 in JSON), so bytes that are not UTF-8 arrive unchanged.
type wire struct {
	msg
	Path   []byte   `json:"path,omitempty"`
	Argv   [][]byte `json:"argv,omitempty"`
	Env    [][]byte `json:"env,omitempty"`
	Dir    []byte   `json:"dir,omitempty"`
	Cookie []byte   `json:"cookie,omitempty"`
}

func toBytes(ss []string) [][]byte {
	if ss == nil {
		return nil
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func toStrings(bs [][]byte) []string {
	if bs == nil {
		return nil
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

func encodeFrame(m *msg) ([]byte, error) {
	w := wire{msg: *m, Path: []byte(m.Path), Argv: toBytes(m.Argv), Env: toBytes(m.Env), Dir: []byte(m.Dir), Cookie: []byte(m.Cookie)}
	w.msg.Path, w.msg.Argv, w.msg.Env, w.msg.Dir, w.msg.Cookie = "", nil, nil, "", ""
	body, err := json.Marshal(&w)
	if err != nil {
		return nil, err
	}
	if len(body) > maxFrame {
		return nil, fmt.Errorf("supervise: request of %d bytes is over the %d-byte limit", len(body), maxFrame)
	}
	frame := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(frame, uint32(len(body)))
	copy(frame[4:], body)
	return frame, nil
}

func readFrame(r io.Reader) (*msg, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, errors.New("supervise: frame too large")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	var w wire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("supervise: bad frame: %w", err)
	}
	m := w.msg
	m.Path, m.Argv, m.Env, m.Dir, m.Cookie = string(w.Path), toStrings(w.Argv), toStrings(w.Env), string(w.Dir), string(w.Cookie)
	return &m, nil
}
