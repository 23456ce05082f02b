//go:build !linux

package cli

import "errors"

// denyLandlock: there is no Landlock to deny.
func denyLandlock() error { return errors.ErrUnsupported }
