package agents

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pilotworkers/pilot/internal/jsonskim"
)

// skim reads the fields of one JSON event line without decoding it
// (internal/jsonskim): the watchers' hot path, where encoding/json would
// cost most of a dispatch's time on streams of short events. The members
// alias the line, so they are read during Watcher.Line only; the buffer is
// reused from line to line.
//
// Keys are matched exactly (encoding/json also matches a struct field's
// key case-insensitively; no agent CLI writes its keys in another case).
type skim struct {
	ms []jsonskim.Member
}

// object reads the members of the JSON object line data and reports
// whether it is one (lexically well-formed, as jsonskim.Members checks).
func (s *skim) object(data []byte) bool {
	var ok bool
	s.ms, ok = jsonskim.Members(s.ms[:0], data)
	return ok
}

// raw returns the raw value of member key, or nil.
func (s *skim) raw(key string) []byte { return jsonskim.Get(s.ms, key) }

// str returns the string member key, unescaped: empty when it is absent
// or null, and ok false when it holds something else (where decoding the
// line into a struct with a string field would fail).
func (s *skim) str(key string) (v []byte, ok bool) {
	return skimString(s.raw(key))
}

// skimString is str for a raw value.
func skimString(raw []byte) ([]byte, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	return jsonskim.Text(raw)
}

// leadingString returns the content of string member key among the
// leading members of the JSON object line data starts with
// (jsonskim.Seek), reading nothing past it, when it is plain: printable
// ASCII without escapes, which is what decoding it gives. ok is false for
// anything else (no such member before the line ends or breaks off,
// another kind of value, escapes or other bytes): the caller then reads
// the line whole.
func leadingString(data []byte, key string) ([]byte, bool) {
	i, ok := jsonskim.Seek(data, key)
	if !ok || data[i] != '"' {
		return nil, false
	}
	n, ok := plainText(data[i+1:])
	if !ok {
		return nil, false
	}
	return data[i+1 : i+1+n], true
}

// plainText returns the length of the plain text that b starts with, up
// to a quote: ok is false when some byte before the quote is not
// printable ASCII or is a backslash, or there is no quote.
func plainText(b []byte) (n int, ok bool) {
	i := 0
	// Four bytes a step: ids and timestamps are a few dozen bytes.
	for i+4 <= len(b) && plainByte[b[i]] && plainByte[b[i+1]] && plainByte[b[i+2]] && plainByte[b[i+3]] {
		i += 4
	}
	for i < len(b) && plainByte[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		return i, true
	}
	return 0, false
}

// plainByte holds the bytes of plain text: printable ASCII but the quote
// and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// cutPlain reads the plain text (plainText) that b starts with, then the
// closing quote and next, which must follow it. It returns the text and
// what follows next.
func cutPlain(b []byte, next string) (text, rest []byte, ok bool) {
	n, ok := plainText(b)
	if !ok || len(b)-n-1 < len(next) || string(b[n+1:n+1+len(next)]) != next {
		return nil, nil, false
	}
	return b[:n], b[n+1+len(next):], true
}

// leadingObject returns the rest of data from the value of member key,
// among the leading members of the JSON object data starts with, when
// that value is an object (its own leading members can be read the same
// way), without reading past its opening brace.
func leadingObject(data []byte, key string) ([]byte, bool) {
	i, ok := jsonskim.Seek(data, key)
	if !ok || data[i] != '{' {
		return nil, false
	}
	return data[i:], true
}

// plainMembers reads from rest, what follows one member of an object line
// (its leading type, say), the members keys in that order, each a plain
// string (plainText), written `,"key":"value"` without white space, the
// way the CLIs write them. It returns the last one's value, and ok false
// when the line does not go on that way.
func plainMembers(rest []byte, keys ...string) ([]byte, bool) {
	var v []byte
	for _, k := range keys {
		if len(rest) < len(k)+5 || rest[0] != ',' || rest[1] != '"' ||
			string(rest[2:2+len(k)]) != k || string(rest[2+len(k):5+len(k)]) != `":"` {
			return nil, false
		}
		rest = rest[5+len(k):]
		n, ok := plainText(rest)
		if !ok {
			return nil, false
		}
		v, rest = rest[:n], rest[n+1:]
	}
	return v, true
}

// skimReader reads an event line through a jsonskim.Reader as
// json.Unmarshal decodes it into a struct, member by member. unsure
// records a key encoding/json could match otherwise than exactly
// (fieldKeys), which ends the reading: json.Unmarshal then decides.
type skimReader struct {
	r      jsonskim.Reader
	unsure bool
}

// next reads the members of the object entered last up to the next one
// whose key names one of fields, whose value is then to be read, and
// returns its index in fields; ok is false at the object's end, and when
// a key makes the reading unsure.
func (d *skimReader) next(keys *fieldKeys, fields *fieldSet) (i int, ok bool) {
	for !d.unsure {
		key, ok := d.r.Key()
		if !ok {
			return 0, false
		}
		switch i := keys.match(key, fields); i {
		case -2:
			d.unsure = true
		case -1:
			d.r.Raw()
		default:
			return i, true
		}
	}
	return 0, false
}

// sessionString returns the session id b as a string: the watcher's own,
// not allocated again, when it is the same.
func (w *streamWatch) sessionString(b []byte) string {
	if string(b) == w.sessionID {
		return w.sessionID
	}
	return string(b)
}

// exactKeys reports whether, in ms, the members an encoding/json decoding
// into a struct with the fields fs would match are exactly the ones
// jsonskim.Get finds (fieldKeys, for each key).
func exactKeys(ms []jsonskim.Member, fs *fieldSet) bool {
	var keys fieldKeys
	for _, m := range ms {
		if keys.match(m.Key, fs) == -2 {
			return false
		}
	}
	return true
}

// A fieldSet names the fields of a struct encoding/json decodes an
// object into (at most 64, each shorter than 64 bytes).
type fieldSet struct {
	names []string
	lens  uint64 // bit n: a name has n bytes
}

func newFieldSet(names ...string) *fieldSet {
	fs := &fieldSet{names: names}
	for _, n := range names {
		fs.lens |= 1 << len(n)
	}
	return fs
}

// fieldKeys matches the keys of one object, one by one, to the fields of
// a struct encoding/json would decode it into.
type fieldKeys struct {
	seen uint64 // bit i: field i was a key
}

// match returns the index in fs of the field that key, the raw key of the
// object's next member, names exactly; -1 when it names none, even in
// another letter case; and -2 when encoding/json could match it otherwise
// than exactly: a key that differs from a field's name only in letter
// case (encoding/json matches those too), a field's name twice
// (encoding/json decodes each), a key escaped or holding other than
// printable ASCII (encoding/json decodes it first, and folds some other
// letters to ASCII ones).
func (k *fieldKeys) match(key []byte, fs *fieldSet) int {
	if len(key) < 64 && fs.lens&(1<<len(key)) != 0 {
		for i, f := range fs.names {
			switch {
			case len(key) != len(f):
			case string(key) == f:
				if k.seen&(1<<i) != 0 {
					return -2
				}
				k.seen |= 1 << i
				return i
			case asciiEqualFold(key, f):
				return -2
			}
		}
	}
	if !allPlain(key) {
		return -2
	}
	return -1
}

// allPlain reports whether every byte of b is plain text (plainByte).
func allPlain(b []byte) bool {
	i := 0
	for i+4 <= len(b) && plainByte[b[i]] && plainByte[b[i+1]] && plainByte[b[i+2]] && plainByte[b[i+3]] {
		i += 4
	}
	for i < len(b) && plainByte[b[i]] {
		i++
	}
	return i == len(b)
}

// asciiEqualFold reports whether the ASCII strings a and f are equal when
// their letter case is ignored (bytes.EqualFold, for ASCII).
func asciiEqualFold(a []byte, f string) bool {
	for i := range len(a) {
		x, y := a[i], f[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// decodeFloat decodes the raw JSON value of a float64 field into *dst
// exactly as encoding/json does, and reports whether it decodes: a
// missing member (nil) or null leaves *dst as it is; a number in range is
// parsed; anything else fails.
func decodeFloat(raw []byte, dst *float64) bool {
	if raw == nil {
		return true
	}
	if f, ok := shortDecimal(raw); ok {
		*dst = f
		return true
	}
	if len(raw) > 0 && (raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9') && jsonskim.Valid(raw) {
		if f, err := strconv.ParseFloat(string(raw), 64); err == nil {
			*dst = f
			return true
		}
	}
	return json.Unmarshal(raw, dst) == nil // out of range, white space, no number
}

// shortDecimal parses raw when it is a JSON number without an exponent
// and with at most 15 digits, as token counts and costs usually are: then
// the digits are exact in a float64, and so is the power of ten they are
// divided by, so the one division rounds as strconv.ParseFloat does (its
// own exact case).
func shortDecimal(raw []byte) (float64, bool) {
	i, neg := 0, false
	if len(raw) > 0 && raw[0] == '-' {
		i, neg = 1, true
	}
	start := i
	var m uint64
	for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
		m = m*10 + uint64(raw[i]-'0')
		i++
	}
	whole := i - start
	if whole == 0 || whole > 1 && raw[start] == '0' {
		return 0, false // no digits, or a leading zero
	}
	frac := 0
	if i < len(raw) && raw[i] == '.' {
		i++
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			m = m*10 + uint64(raw[i]-'0')
			i++
			frac++
		}
		if frac == 0 {
			return 0, false
		}
	}
	if i != len(raw) || whole+frac > 15 {
		return 0, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

// pow10 holds the powers of ten exact in a float64 that shortDecimal
// divides by.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// maxLeadingType is the longest event type leadingType reads.
const maxLeadingType = 64

// leadingType returns the event type of a line that starts the way the
// CLIs write their events, {"type":"…", without reading the rest. The type
// aliases the line.
func leadingType[T ~string | ~[]byte](line T) (T, bool) {
	const prefix = `{"type":"`
	if len(line) < len(prefix) || string(line[:len(prefix)]) != prefix {
		return line[:0], false
	}
	rest := line[len(prefix):]
	for i := 0; i < len(rest) && i <= maxLeadingType; i++ {
		switch rest[i] {
		case '"':
			return rest[:i], true
		case '\\':
			return line[:0], false
		}
	}
	return line[:0], false
}

// eventLine returns a stdout line trimmed, and whether it may be one of a
// CLI's JSON events at all (an object).
func eventLine(line string) (string, bool) {
	t := strings.TrimSpace(line)
	return t, strings.HasPrefix(t, "{")
}
