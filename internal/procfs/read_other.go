//go:build !linux

package procfs

import "os"

// readFile reads the file path whole, appending to buf (there is no
// /proc here: the read fails).
func readFile(path string, buf []byte) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return append(buf, data...), nil
}

// readDirNames lists the names in the directory path.
func readDirNames(path string) ([]string, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}
