//go:build linux || darwin

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// Terminal control with the termios ioctls of Linux and darwin, from the
// standard library alone.

// termios returns f's terminal attributes; an error means f is not a
// terminal.
func termios(f *os.File) (syscall.Termios, error) {
	var t syscall.Termios
	err := ioctlTermios(f, ioctlGetTermios, &t)
	return t, err
}

// setTermios sets f's terminal attributes at once.
func setTermios(f *os.File, t *syscall.Termios) error {
	return ioctlTermios(f, ioctlSetTermios, t)
}

func ioctlTermios(f *os.File, req uintptr, t *syscall.Termios) error {
	// SyscallConn, not Fd: Fd would put a pollable file into blocking
	// mode for good.
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(t)))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func isTerminal(f *os.File) bool {
	_, err := termios(f)
	return err == nil
}

// readTerminalSecret prints prompt on promptTo, reads one line from the
// terminal f with echo turned off, and restores the terminal's attributes
// whatever happens: a line, end of input, an error, ctx ending, or SIGINT,
// SIGTERM, SIGHUP or SIGQUIT arriving while it waits (those return
// errInterrupted instead of ending the process with echo still off).
func readTerminalSecret(ctx context.Context, f *os.File, promptTo io.Writer, prompt string) (string, error) {
	old, err := termios(f)
	if err != nil {
		return "", err
	}
	// Catch the signals before echo goes off, so none can end the process
	// between the two.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() { cancel(); <-watched }()

	quiet := old
	quiet.Lflag &^= syscall.ECHO
	quiet.Lflag |= syscall.ICANON | syscall.ISIG // line editing; ^C is SIGINT
	quiet.Iflag |= syscall.ICRNL                 // Enter ends the line
	if err := setTermios(f, &quiet); err != nil {
		return "", fmt.Errorf("turning off echo: %w", err)
	}
	defer func() {
		setTermios(f, &old)
		// The Enter the user typed was not echoed either.
		io.WriteString(promptTo, "\n")
	}()
	io.WriteString(promptTo, prompt)
	line, err := readInterruptibly(ctx, func() ([]byte, error) { return readLine(f, maxSecretInput) })
	if err != nil {
		return "", err
	}
	if len(line) > maxSecretInput {
		return "", fmt.Errorf("the line is longer than %d KiB, too long for one credential", maxSecretInput>>10)
	}
	return trimNewline(line), nil
}

// readLine reads from r up to and including the first newline, or to the
// end of input, but no more than limit+1 bytes. A terminal in canonical
// mode hands over a line per read, so nothing after the line is consumed.
func readLine(r io.Reader, limit int) ([]byte, error) {
	var line []byte
	buf := make([]byte, 512)
	for len(line) <= limit {
		n, err := r.Read(buf)
		line = append(line, buf[:n]...)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			return line[:i+1], nil
		}
		if err == io.EOF {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return line, nil
}

// termSize returns the size of the terminal f, and false when f is not a
// terminal. A character device is not enough: /dev/null is one.
func termSize(f *os.File) (width, height int, ok bool) {
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return 0, 0, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var ws struct{ Row, Col, X, Y uint16 }
	var errno syscall.Errno
	rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if errno != 0 {
		return 0, 0, false
	}
	width, height = int(ws.Col), int(ws.Row)
	if width <= 0 {
		width = 80
	}
	if height <= 0 {
		height = 24
	}
	return width, height, true
}
