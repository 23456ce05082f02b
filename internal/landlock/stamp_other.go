//go:build !linux

package landlock

import "errors"

// stampOf has no stamp to give: plans are not kept where Landlock is not.
func stampOf(string) (dirStamp, error) { return dirStamp{}, errors.ErrUnsupported }
