package supervise

import (
	"bufio"
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// A client killed with replies unread resets the control socket: the
// supervisor's receive must report it ended (so that it terminates every
// job) rather than panic on the error's counts. The chaos suite found this:
// a SIGKILLed pilot's grandchildren were left to init.
func TestReceiveEndsOnAResetControlSocket(t *testing.T) {
	fds, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	if err := syscall.SetNonblock(fds[0], true); err != nil {
		t.Fatal(err)
	}
	s := &server{conn: rawConn(fds[0])}
	// A reply the client never reads, then the client is gone.
	s.send(&msg{Op: opExited, ID: 1})
	s.flush()
	syscall.Close(fds[1])

	var fr frames
	reqs, open := receive(fds[0], &fr, make([]byte, 1024), make([]byte, 256))
	if len(reqs) != 0 || open {
		t.Fatalf("receive on a reset socket = %d requests, open %v; want none, ended", len(reqs), open)
	}
}

// Requests come whole however the socket splits them: a frame across two
// reads, and two frames in one, each start with its three descriptors.
func TestFramesAssembleSplitReads(t *testing.T) {
	a, err := encodeFrame(&msg{Op: opStart, ID: 1, Path: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeFrame(&msg{Op: opSignal, ID: 1, Sig: 15})
	if err != nil {
		t.Fatal(err)
	}
	var fr frames
	reqs, ok := fr.add(a[:5], nil, false)
	if !ok || len(reqs) != 0 {
		t.Fatalf("half a frame: %d requests, ok %v; want none, ok", len(reqs), ok)
	}
	reqs, ok = fr.add(append(a[5:], b...), []int{10, 11, 12}, false)
	if !ok || len(reqs) != 2 {
		t.Fatalf("the rest and a second frame: %d requests, ok %v; want 2, ok", len(reqs), ok)
	}
	if reqs[0].m.Op != opStart || len(reqs[0].fds) != 3 || reqs[0].fds[2] != 12 {
		t.Errorf("first request %+v with fds %v; want the start with 10, 11, 12", reqs[0].m, reqs[0].fds)
	}
	if reqs[1].m.Op != opSignal || reqs[1].fds != nil {
		t.Errorf("second request %+v with fds %v; want the signal, no fds", reqs[1].m, reqs[1].fds)
	}
	if _, ok := fr.add(a[:4], nil, false); !ok {
		t.Fatal("a frame header alone was refused")
	}
	if _, ok := (&frames{}).add(append(a, b...), []int{10}, false); ok {
		t.Error("a start with one descriptor was accepted")
	}
}

// A run of start requests is forked at once, on this thread and the
// forker threads: every worker starts, each reply carries its own pid in
// the requests' order, a start that cannot exec gets its error, and every
// leader is reaped and reported with its own status.
func TestStartAllStartsABatch(t *testing.T) {
	s, client := testServer(t)
	var reqs []request
	for id := uint64(1); id <= 6; id++ {
		path, argv := "/bin/sh", []string{"sh", "-c", "exit " + strconv.Itoa(int(id))}
		if id == 4 {
			path = "/nonexistent/worker"
		}
		three := devNulls(t)
		reqs = append(reqs, request{m: &msg{Op: opStart, ID: id, Path: path, Argv: argv, Dir: "/"}, fds: three})
	}
	s.handleAll(reqs)
	if s.forks == nil {
		t.Error("a batch of starts did not use the forker threads")
	}

	r := bufio.NewReader(client)
	pids := map[int]uint64{}
	for id := uint64(1); id <= 6; id++ {
		m, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if m.Op != opStarted || m.ID != id {
			t.Fatalf("reply %+v, want started for %d", m, id)
		}
		if id == 4 {
			if m.Err == "" {
				t.Errorf("the start of a missing program succeeded (pid %d)", m.Pid)
			}
			continue
		}
		if m.Err != "" || m.Pid <= 0 || pids[m.Pid] != 0 {
			t.Fatalf("start %d: pid %d, error %q", id, m.Pid, m.Err)
		}
		pids[m.Pid] = id
	}
	for len(s.byPid) > 0 {
		// Wait for any child to exit without reaping it: reap does.
		var info [128]byte
		const pAll, wNowait = 0, 0x1000000
		syscall.Syscall6(syscall.SYS_WAITID, pAll, 0, uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNowait, 0, 0)
		s.reap()
		s.flush()
	}
	for range 5 {
		m, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if m.Op != opExited {
			t.Fatalf("reply %+v, want exited", m)
		}
		if got := syscall.WaitStatus(m.Status).ExitStatus(); uint64(got) != m.ID {
			t.Errorf("job %d exited %d, want %d", m.ID, got, m.ID)
		}
	}
}

// A leader's pidfd joins the loop's epoll set when it starts, so that its
// exit wakes the loop, and leaves it when it is reaped, before the pidfd is
// closed: a copy of it (which a worker being forked holds for a moment)
// would keep it in the set, ready for good.
func TestLeadersJoinAndLeaveTheEpollSet(t *testing.T) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(ep)
	s, _ := testServer(t)
	s.ep = &epollSet{fd: ep}
	s.handleAll([]request{{m: &msg{Op: opStart, ID: 1, Path: "/bin/sh", Argv: []string{"sh", "-c", "exit 0"}, Dir: "/"}, fds: devNulls(t)}})
	j := s.jobs[1]
	if j == nil || j.pidfd < 0 {
		t.Skipf("no pidfd for the leader (job %+v)", j)
	}
	pidfd := j.pidfd
	// A copy, as a worker being forked holds for a moment: the set keeps
	// a descriptor whose copy is open.
	held, err := syscall.Dup(pidfd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(held)
	events := make([]syscall.EpollEvent, 4)
	n, err := syscall.EpollWait(ep, events, 10_000)
	for err == syscall.EINTR { // SIGCHLD, at the leader's exit
		n, err = syscall.EpollWait(ep, events, 10_000)
	}
	if err != nil || n != 1 || events[0].Fd != int32(pidfd) {
		t.Fatalf("epoll_wait: %d events %v, %v; want the leader's pidfd %d ready", n, events[:max(n, 0)], err, pidfd)
	}
	s.reap()
	if len(s.byPid) != 0 {
		t.Fatal("the leader was not reaped")
	}
	n, err = syscall.EpollWait(ep, events, 0)
	for err == syscall.EINTR {
		n, err = syscall.EpollWait(ep, events, 0)
	}
	if n != 0 {
		t.Errorf("after the reap, epoll_wait: %d events %v, %v; want none", n, events[:max(n, 0)], err)
	}
}

// testServer is a server with no job, on one end of a socket pair; client
// is the other end. Both are closed when the test ends, each once (a
// descriptor closed twice may be another test's by then).
func testServer(t *testing.T) (s *server, client *os.File) {
	t.Helper()
	fds, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	client = os.NewFile(uintptr(fds[1]), "client-side")
	t.Cleanup(func() {
		syscall.Close(fds[0])
		client.Close()
	})
	return &server{conn: rawConn(fds[0]), jobs: map[uint64]*job{}, byPid: map[int]*job{}}, client
}

// devNulls opens /dev/null three times: a start request's stdin, stdout
// and stderr, which the server closes.
func devNulls(t *testing.T) []int {
	t.Helper()
	var three []int
	for range 3 {
		fd, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		three = append(three, fd)
	}
	return three
}
