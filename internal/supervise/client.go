package supervise

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/landlock"
)

// Spec describes one worker process.
type Spec struct {
	Path   string   // absolute path of the program
	Argv   []string // argv[0] included
	Env    []string // the whole environment; it must contain Cookie
	Dir    string
	Cookie string        // an Env entry ("NAME=value") unique to this job
	Grace  time.Duration // how long leftovers get between SIGTERM and SIGKILL
	// Sandbox, when set, confines the worker and every process it
	// starts; the supervisor itself stays unconfined. Linux only.
	Sandbox *landlock.Ruleset
}

// Status is how a worker's leader process ended.
type Status struct {
	syscall.WaitStatus
}

// Memory is one look at the resident memory of a job's process tree.
type Memory struct {
	RSS   int64 `json:"rss"`   // bytes, summed over the tree's processes
	Procs int   `json:"procs"` // how many processes the tree has
	// Top is the process that holds the most, TopComm its command name
	// and TopRSS what it holds.
	Top     int    `json:"top"`
	TopComm string `json:"top_comm"`
	TopRSS  int64  `json:"top_rss"`
}

// ErrSupervisorLost is returned for jobs whose supervisor died.
var ErrSupervisorLost = errors.New("supervise: the supervisor process exited")

// A Job is one worker started by the supervisor.
type Job struct {
	c   *client
	id  uint64
	Pid int

	started   chan *msg
	startedOK bool // guarded by c.mu: the started reply was delivered

	exited chan struct{}
	status Status
	maxRSS int64

	memory chan Memory // the latest sample not yet taken

	done      chan struct{}
	leftovers int
	err       error  // set before exited/done are closed when the supervisor is lost
	cookie    string // the Spec's Cookie: every process of the job carries it
}

// Exited is closed when the worker's leader process has been reaped.
func (j *Job) Exited() <-chan struct{} { return j.exited }

// Status returns how the leader ended; valid once Exited is closed and Err
// is nil.
func (j *Job) Status() Status { return j.status }

// MaxRSS is the leader's own peak resident memory in bytes (its rusage,
// which counts the children it waited for), or 0 where unknown; valid once
// Exited is closed.
func (j *Job) MaxRSS() int64 { return j.maxRSS }

// Sample asks the supervisor to measure the job's tree; the answer comes
// on Memory. A job whose leader has exited, or a platform without /proc,
// gets none.
func (j *Job) Sample() error {
	return j.c.send(&msg{Op: opSample, ID: j.id}, nil)
}

// Memory delivers the answers to Sample: the latest one when several came
// before it was read.
func (j *Job) Memory() <-chan Memory { return j.memory }

// Done is closed when no process of the job's tree is left.
func (j *Job) Done() <-chan struct{} { return j.done }

// Leftovers is how many processes were still alive after the leader exited
// and had to be signalled; valid once Done is closed.
func (j *Job) Leftovers() int { return j.leftovers }

// Err reports a lost supervisor; valid once Exited or Done is closed.
func (j *Job) Err() error { return j.err }

// Signal sends sig to every process of the job's tree. After the leader has
// exited, only SIGKILL has an effect: it cuts the leftovers' grace short.
func (j *Job) Signal(sig syscall.Signal) error {
	return j.c.send(&msg{Op: opSignal, ID: j.id, Sig: int(sig)}, nil)
}

// Close releases the job. Call it once, after Done is closed.
func (j *Job) Close() { release(j.c) }

type client struct {
	conn   *net.UnixConn
	cmd    *exec.Cmd
	wmu    sync.Mutex
	mu     sync.Mutex
	jobs   map[uint64]*Job
	nextID uint64
	lost   bool
	reader chan struct{} // closed when the reader goroutine has returned
	refs   int           // guarded by shared.mu
}

var shared struct {
	mu     sync.Mutex
	c      *client
	linger time.Duration
	timer  *time.Timer
	// busy counts holds (Hold) and jobs (Start to Close); idle, when not
	// nil, is closed when busy drops to zero.
	busy int
	idle chan struct{}
	// live holds every client whose reader has not yet returned: the
	// current one and any being stopped.
	live map[*client]bool
}

// SetLinger sets how long an idle supervisor is kept for the next job. Zero
// stops it as soon as its last job is closed. The default is 5 seconds.
func SetLinger(d time.Duration) {
	shared.mu.Lock()
	shared.linger = d
	shared.mu.Unlock()
}

func init() { shared.linger = 5 * time.Second }

// Start runs spec under the supervisor with the given stdin, stdout and
// stderr. The descriptors are not closed. On error nothing was started.
func Start(spec Spec, stdin, stdout, stderr *os.File) (*Job, error) {
	c, err := acquire()
	if err != nil {
		return nil, err
	}
	j, err := c.start(spec, stdin, stdout, stderr)
	if err != nil {
		release(c)
		return nil, err
	}
	return j, nil
}

// Hold marks a user that may start jobs, such as a dispatch before its
// worker starts and after it ends: Shutdown waits for it as it waits for
// running jobs. Call done once, when the user is finished.
func Hold() (done func()) {
	shared.mu.Lock()
	shared.busy++
	shared.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			shared.mu.Lock()
			unbusy()
			shared.mu.Unlock()
		})
	}
}

// unbusy ends one hold or job; shared.mu is held.
func unbusy() {
	shared.busy--
	if shared.busy == 0 && shared.idle != nil {
		close(shared.idle)
		shared.idle = nil
	}
}

func acquire() (*client, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.timer != nil {
		shared.timer.Stop()
		shared.timer = nil
	}
	if shared.c != nil {
		shared.c.mu.Lock()
		lost := shared.c.lost
		shared.c.mu.Unlock()
		if lost {
			// Its reader has reaped it; forget it.
			shared.c = nil
		}
	}
	if shared.c == nil {
		c, err := spawn()
		if err != nil {
			return nil, err
		}
		if shared.live == nil {
			shared.live = map[*client]bool{}
		}
		shared.live[c] = true
		shared.c = c
	}
	shared.c.refs++
	shared.busy++
	return shared.c, nil
}

func release(c *client) {
	shared.mu.Lock()
	unbusy()
	c.refs--
	if refs := c.refs; refs > 0 || shared.c != c {
		shared.mu.Unlock()
		if refs == 0 {
			c.stop()
		}
		return
	}
	if shared.linger <= 0 {
		shared.c = nil
		shared.mu.Unlock()
		c.stop()
		return
	}
	shared.timer = time.AfterFunc(shared.linger, func() {
		shared.mu.Lock()
		if shared.c != c || c.refs != 0 {
			shared.mu.Unlock()
			return
		}
		shared.c = nil
		shared.timer = nil
		shared.mu.Unlock()
		c.stop()
	})
	shared.mu.Unlock()
}

// Shutdown waits until no job runs and no Hold is held, then stops the
// supervisor (and any being stopped), waits until it has exited and been
// reaped, and until this package's goroutines have returned. When it
// returns nil, nothing this package started is left, but for a Start that
// came after Shutdown found it idle: that one spawned a new supervisor, as
// a Start always may.
//
// If ctx is done first, Shutdown returns context.Cause(ctx): running jobs
// are left alone, and a supervisor already told to stop still exits.
func Shutdown(ctx context.Context) error {
	shared.mu.Lock()
	for shared.busy > 0 {
		if shared.idle == nil {
			shared.idle = make(chan struct{})
		}
		idle := shared.idle
		shared.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		shared.mu.Lock()
	}
	// Idle: no client has a job.
	if shared.timer != nil {
		shared.timer.Stop()
		shared.timer = nil
	}
	shared.c = nil
	ending := make([]*client, 0, len(shared.live))
	for c := range shared.live {
		ending = append(ending, c)
	}
	shared.mu.Unlock()
	for _, c := range ending {
		c.conn.Close() // the supervisor exits; the reader reaps it
	}
	for _, c := range ending {
		select {
		case <-c.reader:
			continue
		default:
		}
		select {
		case <-c.reader:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// stop closes the control socket, which makes the supervisor terminate
// whatever is left and exit, and waits for it.
func (c *client) stop() {
	c.conn.Close()
	<-c.reader
}

// StartError reports a worker the supervisor could not start (exec or
// chdir failed).
type StartError struct {
	Path  string
	Msg   string
	Errno syscall.Errno // the failure's error number, 0 when unknown
}

func (e *StartError) Error() string { return "starting " + strconv.Quote(e.Path) + ": " + e.Msg }

// Unwrap returns the failure's error number, or nil.
func (e *StartError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

func (c *client) forget(id uint64) {
	c.mu.Lock()
	delete(c.jobs, id)
	c.mu.Unlock()
}
