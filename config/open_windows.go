//go:build windows

package config

// credentialOpenFlags: Windows has no O_NOFOLLOW; the file's mode is still
// checked once it is open.
const credentialOpenFlags = 0
