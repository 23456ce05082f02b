//go:build !unix

package worktree

import "os/exec"

// killGroupOnCancel leaves cmd's default cancellation, which kills the
// process only: there are no process groups to kill here.
func killGroupOnCancel(*exec.Cmd) {}
