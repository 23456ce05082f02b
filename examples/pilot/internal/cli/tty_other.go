//go:build !linux && !darwin

package cli

import (
	"context"
	"errors"
	"io"
	"os"
)

// Without termios, no file is treated as a terminal: secrets are read as
// plain lines and progress is not redrawn.

func isTerminal(*os.File) bool { return false }

func readTerminalSecret(context.Context, *os.File, io.Writer, string) (string, error) {
	return "", errors.ErrUnsupported
}

func termSize(*os.File) (width, height int, ok bool) { return 0, 0, false }
