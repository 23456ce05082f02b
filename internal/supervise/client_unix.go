//go:build unix

package supervise

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/pilotworkers/pilot/internal/procfs"
)

func spawn() (*client, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, fmt.Errorf("supervise: finding this program's executable: %w", err)
	}
	fds, err := socketpair()
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
	cmd := exec.Command(exe)
	cmd.Args = []string{"pilot-supervisor"}
	cmd.Env = env
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fc.Close()
		return nil, fmt.Errorf("supervise: starting the supervisor (%s re-executed): %w", exe, err)
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

func (c *client) start(spec Spec, stdin, stdout, stderr *os.File) (*Job, error) {
	j, err := c.request(spec, stdin, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return j.awaitStart(spec.Path)
}

// request sends the start request of spec; awaitStart waits for its reply.
// (Between the two, a test can queue a batch of starts.)
func (c *client) request(spec Spec, stdin, stdout, stderr *os.File) (*Job, error) {
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
		memory:  make(chan Memory, 1),
		cookie:  spec.Cookie,
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
		Sandbox: spec.Sandbox,
	}
	rights := syscall.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	if err := c.send(m, rights); err != nil {
		c.forget(j.id)
		return nil, err
	}
	return j, nil
}

// awaitStart waits for the reply to j's start request, the worker's pid or
// why it could not start the program at path.
func (j *Job) awaitStart(path string) (*Job, error) {
	r, ok := <-j.started
	if !ok {
		return nil, ErrSupervisorLost
	}
	if r.Err != "" {
		return nil, &StartError{Path: path, Msg: r.Err, Errno: syscall.Errno(r.Errno)}
	}
	j.Pid = r.Pid
	return j, nil
}

func (c *client) send(m *msg, rights []byte) error {
	frame, err := encodeFrame(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if rights != nil {
		// The descriptors travel with the frame, in one sendmsg (the
		// server takes them from whichever read brings them, and a
		// frame from as many reads as it takes); what the socket did
		// not take goes after it.
		n, _, err := c.conn.WriteMsgUnix(frame, rights, nil)
		if err != nil {
			return fmt.Errorf("supervise: %w", err)
		}
		frame = frame[n:]
		if len(frame) == 0 {
			return nil
		}
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
			j.maxRSS = m.MaxRSS
			close(j.exited)
		case opSample:
			if m.Memory != nil {
				j.deliver(*m.Memory)
			}
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
		// The supervisor's children die with it (their parent-death
		// signal), but what it adopted, and descendants that left the
		// process group, would outlive it: end every process that
		// carries the job's cookie.
		j.leftovers = killCarriers(j.cookie)
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
	shared.mu.Lock()
	delete(shared.live, c)
	shared.mu.Unlock()
}

// deliver hands m to Memory, in place of a sample not yet taken.
func (j *Job) deliver(m Memory) {
	for {
		select {
		case j.memory <- m:
			return
		default:
		}
		select {
		case <-j.memory:
		default:
		}
	}
}

// killCarriers SIGKILLs every process whose environment holds cookie, and
// again any that appears (one may fork while the last is killed), until
// none is left alive or about a second has passed, and returns how many it
// killed. It finds nothing where there is no /proc.
func killCarriers(cookie string) int {
	if cookie == "" {
		return 0
	}
	killed := map[int]bool{}
	for range 1000 {
		pids := procfs.WithEnv(cookie)
		left := 0
		for _, pid := range pids {
			if pid == os.Getpid() {
				continue
			}
			left++
			killed[pid] = true
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if left == 0 {
			break
		}
		time.Sleep(time.Millisecond) // the kernel is ending them
	}
	// A dying process loses its environment before it stops running:
	// wait for each one killed to be gone (or a zombie) itself.
	deadline := time.Now().Add(2 * time.Second)
	for pid := range killed {
		for procfs.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	return len(killed)
}
