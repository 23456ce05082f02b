package pilot

import "bytes"

// The words of a denied access, as the C library, Node.js, Python and Go
// print one: "Permission denied", "Operation not permitted", EACCES,
// EPERM. denied finds them; the two lists must agree.
var denialWords = [][]byte{[]byte("ermission denied"), []byte("not permitted"), []byte("EACCES"), []byte("EPERM")}

// denied reports whether line holds one of denialWords. It runs on every
// line of a confined worker, so it looks for two bytes rather than four
// words: each 'm', where "ermission denied" and "not permitted" have
// theirs, and each 'E', where EACCES and EPERM start. A search for each
// word in turn cost pilot four passes over the line, each stopping at
// every 'e', 'n' or 'E' (40 % of a dispatch's CPU on pi's stream).
func denied(line []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], 'm')
		if j < 0 {
			break
		}
		m := i + j
		if m >= 2 && bytes.HasPrefix(line[m-2:], denialWords[0]) ||
			m >= 7 && bytes.HasPrefix(line[m-7:], denialWords[1]) {
			return true
		}
		i = m + 1
	}
	for i := 0; ; {
		j := bytes.IndexByte(line[i:], 'E')
		if j < 0 {
			return false
		}
		e := line[i+j:]
		if bytes.HasPrefix(e, denialWords[2]) || bytes.HasPrefix(e, denialWords[3]) {
			return true
		}
		i += j + 1
	}
}
