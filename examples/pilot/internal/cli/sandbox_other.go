//go:build !linux

package cli

import (
	"fmt"
	"runtime"
)

// probeLandlock finds no Landlock: it is Linux's.
func probeLandlock() (int, error) {
	return 0, fmt.Errorf("pilot enforces sandboxes with Landlock, which %s does not have", runtime.GOOS)
}
