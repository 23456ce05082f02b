package pilot

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"unsafe"
)

// minSecretLen is the shortest secret pilot redacts from logs; shorter
// values would mangle ordinary text and protect nothing.
const minSecretLen = 6

const redacted = "[REDACTED]"

// A redactor replaces every secret it holds with "[REDACTED]". A run holds
// the secret of every provider in the registry that pilot can resolve, not
// only its worker's: a worker may print any key it can read. The zero
// value redacts nothing.
//
// Of occurrences that overlap (one secret inside another, or two that
// share bytes), the one that starts first goes, the longer of two that
// start together: no secret is left whole, and a stream copied in chunks
// (copy) is redacted as it would be in one piece.
type redactor struct {
	secrets [][]byte // none shorter than minSecretLen, no two alike
	// probes[i] is a short part of secrets[i] for bytes.Index to look for
	// first: a long needle (an Anthropic key is 108 bytes) makes it fall
	// back to Rabin-Karp, at a fraction of the speed of a short one.
	probes  [][]byte
	longest int // the length of the longest secret, 0 without any
}

// newRedactor returns a redactor of the distinct secrets of vals that are
// long enough to redact.
func newRedactor(vals ...string) redactor {
	var x redactor
	for _, v := range vals {
		if len(v) < minSecretLen || slices.ContainsFunc(x.secrets, func(s []byte) bool { return string(s) == v }) {
			continue
		}
		sec := []byte(v)
		x.secrets = append(x.secrets, sec)
		x.probes = append(x.probes, probe(sec))
		x.longest = max(x.longest, len(sec))
	}
	return x
}

// probeLen is the length of a probe: short enough for bytes.Index's
// vectorized search on every platform.
const probeLen = 16

// probe returns the probeLen bytes of s that start with the byte least
// likely in ordinary output, for bytes.Index skips ahead by its first
// byte. Keys start with their vendor's common prefix ("sk-"); their random
// tail has upper-case letters, rare in text and JSON.
func probe(s []byte) []byte {
	if len(s) <= probeLen {
		return s
	}
	best := len(s) - probeLen
	for i := best - 1; i >= 0; i-- {
		if byteRank(s[i]) < byteRank(s[best]) {
			best = i
		}
	}
	return s[best : best+probeLen]
}

// byteRank orders bytes by how common they are in agent CLIs' output, the
// commonest last.
func byteRank(c byte) int {
	switch {
	case 'A' <= c && c <= 'Z':
		return 0
	case 'a' <= c && c <= 'z':
		return 2
	case strings.IndexByte(" \"',:./-_{}[]\t", c) >= 0:
		return 3
	}
	return 1 // digits and the rest
}

// A match is an occurrence of a secret, b[start:end].
type match struct{ start, end int }

// matches returns the occurrences of secrets in b to replace, in order and
// not overlapping (see redactor); nil when there are none. The check for
// none allocates nothing: it is the stream's hot path.
func (x *redactor) matches(b []byte) []match {
	var ms []match
	for i, sec := range x.secrets {
		if !bytes.Contains(b, x.probes[i]) {
			continue
		}
		for off := 0; ; {
			j := bytes.Index(b[off:], sec)
			if j < 0 {
				break
			}
			ms = append(ms, match{off + j, off + j + len(sec)})
			off += j + 1
		}
	}
	if len(ms) == 0 {
		return nil
	}
	slices.SortFunc(ms, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	keep, end := ms[:0], 0
	for _, m := range ms {
		if m.start >= end {
			keep = append(keep, m)
			end = m.end
		}
	}
	return keep
}

// clean reports whether no secret can be in b: none of its probes is.
func (x *redactor) clean(b []byte) bool {
	for _, p := range x.probes {
		if bytes.Contains(b, p) {
			return false
		}
	}
	return true
}

// bytes returns b with every secret replaced: b itself, unchanged and not
// copied, when none occurs, else a new slice.
func (x *redactor) bytes(b []byte) []byte {
	if len(x.secrets) == 0 {
		return b
	}
	return x.replace(b)
}

func (x *redactor) replace(b []byte) []byte {
	ms := x.matches(b)
	if ms == nil {
		return b
	}
	out := make([]byte, 0, len(b)+len(ms)*len(redacted))
	pos := 0
	for _, m := range ms {
		out = append(append(out, b[pos:m.start]...), redacted...)
		pos = m.end
	}
	return append(out, b[pos:]...)
}

// string is bytes for a string.
func (x *redactor) string(s string) string {
	b := unsafe.Slice(unsafe.StringData(s), len(s)) // only read
	if x.matches(b) == nil {
		return s
	}
	return string(x.bytes(b))
}

// strings returns ss with every secret replaced: ss itself when none
// occurs, else a new slice.
func (x *redactor) strings(ss []string) []string {
	for i, s := range ss {
		if r := x.string(s); r != s {
			out := slices.Clone(ss)
			out[i] = r
			for j := i + 1; j < len(out); j++ {
				out[j] = x.string(out[j])
			}
			return out
		}
	}
	return ss
}

// state returns st with the secrets out of its strings, which are the
// worker's session's or stream's words.
func (x *redactor) state(st SessionState) SessionState {
	if len(x.secrets) == 0 {
		return st
	}
	st.Reason = x.string(st.Reason)
	st.ExpectedToolCallIDs = x.strings(st.ExpectedToolCallIDs)
	st.CompletedToolCallIDs = x.strings(st.CompletedToolCallIDs)
	st.PendingToolCallIDs = x.strings(st.PendingToolCallIDs)
	st.LeafID = x.string(st.LeafID)
	st.StopReason = x.string(st.StopReason)
	st.ErrorMessage = x.string(st.ErrorMessage)
	return st
}

// copy copies src to dst with every secret replaced, including those that
// span read boundaries. Without a secret it is a plain copy
// (copy_file_range between files).
func (x *redactor) copy(dst io.Writer, src io.Reader) {
	if len(x.secrets) == 0 {
		io.Copy(dst, src)
		return
	}
	// The last longest-1 bytes of what is read wait for the next read,
	// unredacted: a secret that starts before them is whole, and one
	// that starts in them is judged once it is.
	keep := x.longest - 1
	buf := make([]byte, max(256<<10, 4*x.longest))
	pend := 0 // bytes carried over at the start of buf
	for {
		n, err := src.Read(buf[pend:])
		data := buf[:pend+n]
		cut := len(data) - keep
		if err != nil {
			cut = len(data)
		}
		pos := 0
		if cut > 0 {
			for _, m := range x.matches(data) {
				if m.start >= cut {
					break
				}
				dst.Write(data[pos:m.start])
				dst.Write([]byte(redacted))
				pos = m.end
			}
			if pos < cut {
				dst.Write(data[pos:cut])
				pos = cut
			}
		}
		if err != nil {
			return
		}
		pend = copy(buf, data[pos:])
	}
}
