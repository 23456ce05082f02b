package measure

import (
	"errors"
	"time"
)

func selfCPU() time.Duration { return 0 }

func fileLimit() (uint64, error) { return 0, errors.ErrUnsupported }

// RaiseFileLimit is an error on Windows, which has no RLIMIT_NOFILE.
func RaiseFileLimit() (soft, hard uint64, err error) { return 0, 0, errors.ErrUnsupported }
