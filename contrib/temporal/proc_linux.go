package temporal

import (
	"os"
	"strconv"
	"strings"
)

// pidStart returns the start time of process pid, in clock ticks since
// boot (/proc/<pid>/stat, field 22), which tells a reused pid apart.
func pidStart(pid int) (uint64, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after its last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	if fields[0] == "Z" {
		return 0, false // a zombie has ended
	}
	n, err := strconv.ParseUint(fields[19], 10, 64)
	return n, err == nil
}
