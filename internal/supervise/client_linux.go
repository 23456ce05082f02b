package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Spec describes one worker process.
type Spec struct {
	Path   string   // absolute path of the program
	Argv   []string // argv[0] included
	Env    []string // the whole environment; it must contain Cookie
	Dir    string
	Cookie string        // an Env entry ("NAME=value") unique to this job
	Grace  time.Duration // how long leftovers get between SIGTERM and SIGKILL
}

// Status is how a worker's leader process ended.
type Status struct {
	syscall.WaitStatus
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

	done      chan struct{}
	leftovers int
	err       error // set before exited/done are closed when the supervisor is lost
}

// Exited is closed when the worker's leader process has been reaped.
func (j *Job) Exited() <-chan struct{} { return j.exited }

// Status returns how the leader ended; valid once Exited is closed and Err
// is nil.
func (j *Job) Status() Status { return j.status }

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
		shared.c = c
	}
	shared.c.refs++
	return shared.c, nil
}

func release(c *client) {
	shared.mu.Lock()
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

// Shutdown stops an idle supervisor now instead of after the linger period.
// Running jobs keep theirs.
func Shutdown() {
	shared.mu.Lock()
	c := shared.c
	if c == nil || c.refs != 0 {
		shared.mu.Unlock()
		return
	}
	if shared.timer != nil {
		shared.timer.Stop()
		shared.timer = nil
	}
	shared.c = nil
	shared.mu.Unlock()
	c.stop()
}

func spawn() (*client, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("supervise: socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "supervisor-control")
	theirs := os.NewFile(uintptr(fds[1]), "supervisor-control")
	defer theirs.Close()
	fc, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("supervise: %w", err)
	}
	env := []string{EnvSupervisor + "=3"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		// Race-detector builds (tests) read their options from it; the
		// default makes every exit wait a second.
		env = append(env, "GORACE="+v)
	}
	// exec.Command, not a bare Cmd: os/exec's execwait leak check
	// (GODEBUG=execwait, which tests set) covers it.
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"pilot-supervisor"}
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("supervise: starting the supervisor (%s re-executed): %w", "/proc/self/exe", err)
	}
	c := &client{
		conn:   fc.(*net.UnixConn),
		cmd:    cmd,
		jobs:   map[uint64]*Job{},
		reader: make(chan struct{}),
	}
	go c.read()
	return c, nil
}

// stop closes the control socket, which makes the supervisor terminate
// whatever is left and exit, and waits for it.
func (c *client) stop() {
	c.conn.Close()
	<-c.reader
}

func (c *client) start(spec Spec, stdin, stdout, stderr *os.File) (*Job, error) {
	c.mu.Lock()
	if c.lost {
		c.mu.Unlock()
		return nil, ErrSupervisorLost
	}
	c.nextID++
	j := &Job{
		c:       c,
		id:      c.nextID,
		started: make(chan *msg, 1),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.jobs[j.id] = j
	c.mu.Unlock()

	m := &msg{
		Op:      opStart,
		ID:      j.id,
		Path:    spec.Path,
		Argv:    spec.Argv,
		Env:     spec.Env,
		Dir:     spec.Dir,
		Cookie:  spec.Cookie,
		GraceMS: spec.Grace.Milliseconds(),
	}
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	if err := c.send(m, rights); err != nil {
		c.forget(j.id)
		return nil, err
	}
	r, ok := <-j.started
	if !ok {
		return nil, ErrSupervisorLost
	}
	if r.Err != "" {
		return nil, &StartError{Path: spec.Path, Msg: r.Err}
	}
	j.Pid = r.Pid
	return j, nil
}

// StartError reports a worker the supervisor could not start (exec or
// chdir failed).
type StartError struct {
	Path string
	Msg  string
}

func (e *StartError) Error() string { return "starting " + strconv.Quote(e.Path) + ": " + e.Msg }

func (c *client) forget(id uint64) {
	c.mu.Lock()
	delete(c.jobs, id)
	c.mu.Unlock()
}

func (c *client) send(m *msg, rights []byte) error {
	frame, err := encodeFrame(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if rights != nil {
		// The descriptors travel with the frame's first bytes.
		n, _, err := c.conn.WriteMsgUnix(frame[:4], rights, nil)
		if err != nil {
			return fmt.Errorf("supervise: %w", err)
		}
		frame = frame[n:]
	}
	if _, err := c.conn.Write(frame); err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	return nil
}

func (c *client) read() {
	defer close(c.reader)
	br := bufio.NewReader(c.conn)
	for {
		m, err := readFrame(br)
		if err != nil {
			break
		}
		c.mu.Lock()
		j := c.jobs[m.ID]
		switch {
		case j == nil:
		case m.Op == opDone:
			delete(c.jobs, m.ID)
		case m.Op == opStarted && m.Err != "":
			delete(c.jobs, m.ID)
		case m.Op == opStarted:
			j.startedOK = true
		}
		c.mu.Unlock()
		if j == nil {
			continue
		}
		switch m.Op {
		case opStarted:
			j.started <- m
		case opExited:
			j.status = Status{syscall.WaitStatus(m.Status)}
			close(j.exited)
		case opDone:
			j.leftovers = m.Leftovers
			close(j.done)
		}
	}
	c.conn.Close()
	c.mu.Lock()
	c.lost = true
	jobs := c.jobs
	c.jobs = map[uint64]*Job{}
	startedOK := map[uint64]bool{}
	for id, j := range jobs {
		startedOK[id] = j.startedOK
	}
	c.mu.Unlock()
	for id, j := range jobs {
		j.err = ErrSupervisorLost
		if !startedOK[id] {
			close(j.started)
			continue
		}
		select {
		case <-j.exited:
		default:
			close(j.exited)
		}
		close(j.done)
	}
	_ = c.cmd.Wait()
}
