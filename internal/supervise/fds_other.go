//go:build unix && !linux

package supervise

// closeOnExecAll marks every descriptor from 3 up close-on-exec: the
// control socket and whatever the supervisor inherited from the program
// that started pilot, so that a worker starts with exactly its stdin,
// stdout and stderr.
func closeOnExecAll() error { return closeOnExecListed("/dev/fd") }
