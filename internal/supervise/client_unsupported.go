//go:build !unix

package supervise

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// errUnsupported is what Start returns where there are no process groups
// to supervise workers with.
var errUnsupported = fmt.Errorf("supervise: process-group supervision is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)

func spawn() (*client, error) { return nil, errUnsupported }

func (c *client) start(Spec, *os.File, *os.File, *os.File) (*Job, error) { return nil, errUnsupported }

func (c *client) send(*msg, []byte) error { return errUnsupported }
