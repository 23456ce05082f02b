package pilot

import (
	"path/filepath"
)

// DefaultProvidersFile returns the providers file [LoadRegistry] reads when
// given no path: $XDG_CONFIG_HOME/pilot/providers.json, or
// ~/.config/pilot/providers.json when XDG_CONFIG_HOME is unset or not an
// absolute path. It returns "" when neither gives a directory.
func DefaultProvidersFile() string {
	dir := configDir()
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "pilot", "providers.json")
}
