//go:build !linux

package landlock

import (
	"errors"
	"fmt"
)

// ABI returns 0: Landlock is Linux's.
func ABI() (int, error) { return 0, errors.ErrUnsupported }

// Restrict fails: Landlock is Linux's.
func Restrict(*Ruleset) error { return fmt.Errorf("landlock: %w", errors.ErrUnsupported) }
