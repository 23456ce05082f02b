package temporal

// alive reports whether process pid, started at start (0: unknown), is
// still running.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, ok := pidStart(pid)
	return ok && (start == 0 || st == start)
}
