// Package jsonskim reads JSON event lines without decoding them: it
// shortens long string values (Shrink), delimits an object's members
// (Members, ValidMembers, Seek) and checks validity (Valid), so that a
// watcher that needs only an event's short fields reads it at memory speed.
package jsonskim

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Shrink appends src to dst with every string value whose raw content is
// longer than keep bytes cut to its first keep bytes or a little less (a
// cut never splits an escape sequence or a UTF-8 character). A cut string
// keeps at least one ASCII letter or digit outside escapes, so that it
// still holds text that is not white space; a long string whose first keep
// bytes have none is copied whole.
//
// Shrink is lexical: it finds strings by their quotes (a string followed by
// a colon is a key) and does not check that src is valid JSON. Keys,
// numbers and short strings are copied as they are, so a decoder sees the
// same structure, the same keys and the same short values.
func Shrink(dst, src []byte, keep int) []byte {
	keep = max(keep, 16)
	for {
		i := bytes.IndexByte(src, '"')
		if i < 0 {
			return append(dst, src...)
		}
		dst = append(dst, src[:i+1]...)
		src = src[i+1:]
		end := closingQuote(src)
		if end < 0 { // unterminated: copy the rest
			return append(dst, src...)
		}
		body := src[:end]
		if len(body) > keep && !isKey(src[end+1:]) {
			if cut := cutPoint(body, keep); cut > 0 {
				body = body[:cut]
			}
		}
		dst = append(dst, body...)
		dst = append(dst, '"')
		src = src[end+1:]
	}
}

// isKey reports whether rest, what follows a string, makes it an object
// key.
func isKey(rest []byte) bool {
	rest = bytes.TrimLeft(rest, " \t\r\n")
	return len(rest) > 0 && rest[0] == ':'
}

// closingQuote returns the index in s of the quote that ends the string s
// starts in, or -1.
func closingQuote(s []byte) int {
	// Most strings of an event are short: look at their first bytes,
	// four a step, before calling IndexByte.
	n := min(len(s), 32)
	i := 0
	for i+4 <= n && unquoted[s[i]] && unquoted[s[i+1]] && unquoted[s[i+2]] && unquoted[s[i+3]] {
		i += 4
	}
	for i < n && unquoted[s[i]] {
		i++
	}
	switch {
	case i == n:
		return closingQuoteFrom(s, n)
	case s[i] == '"':
		return i
	}
	return closingQuoteFrom(s, 0) // a backslash
}

// unquoted holds the bytes that neither end a string nor escape.
var unquoted = func() (t [256]bool) {
	for c := range t {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// closingQuoteFrom is closingQuote, looking from s[off:], where s[:off]
// holds no quote.
func closingQuoteFrom(s []byte, off int) int {
	for {
		i := bytes.IndexByte(s[off:], '"')
		if i < 0 {
			return -1
		}
		j := off + i
		n := 0 // backslashes right before the quote
		for k := j - 1; k >= 0 && s[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j
		}
		off = j + 1
	}
}

// cutPoint returns where to cut the string content body, which is longer
// than keep: at most keep, at the start of an escape sequence or of a UTF-8
// character, after at least one ASCII letter or digit outside escapes. It
// returns 0 when no such point exists (the string is kept whole).
func cutPoint(body []byte, keep int) int {
	cut, seen := 0, false
	for i := 0; i < keep; {
		c := body[i]
		switch {
		case c == '\\':
			n := 2
			if i+1 < len(body) && body[i+1] == 'u' {
				n = 6
			}
			if i+n > keep {
				return ifSeen(seen, cut)
			}
			i += n
		case c < 0x80:
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				seen = true
			}
			i++
		default:
			i++
			for i < len(body) && body[i]&0xC0 == 0x80 { // continuation bytes
				i++
			}
			if i > keep {
				return ifSeen(seen, cut)
			}
		}
		cut = i
	}
	return ifSeen(seen, cut)
}

func ifSeen(seen bool, cut int) int {
	if seen {
		return cut
	}
	return 0
}

// A Member is one member of a JSON object: its key's raw content (between
// the quotes, escapes as written) and its raw value (a string with its
// quotes, an object with its braces, ...). Both alias the text they were
// found in.
type Member struct {
	Key, Value []byte
}

// Members appends the members of the JSON object that is all of data
// (white space around it allowed) to dst, in order, and reports whether
// data is one lexically well-formed object: braces, brackets and quotes
// balanced, a colon after every key, members separated by commas, nothing
// after the closing brace. Values are delimited, not checked: a number or
// literal is whatever runs to the next delimiter. Every text that
// encoding/json accepts as an object is well-formed here, with the same
// members.
//
// It reads an event's fields at memory speed: strings are skipped with
// bytes.IndexByte and nested values by counting brackets, nothing is
// decoded or allocated (dst grows only when it is too small).
func Members(dst []Member, data []byte) ([]Member, bool) {
	return topMembers(dst, data, false)
}

// topMembers is Members, and ValidMembers when check is set: keys and
// values delimited as Members delimits them, or checked as Valid checks
// them.
func topMembers(dst []Member, data []byte, check bool) ([]Member, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return dst, skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return dst, false
		}
		// The key and the value, each in line (a call apiece costs
		// a tenth of reading an event).
		k := i + 1
		var ok bool
		if check {
			i, ok = validString(data, k)
		} else {
			end := closingQuote(data[k:])
			i, ok = k+end+1, end >= 0
		}
		if !ok {
			return dst, false
		}
		key := data[k : i-1]
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return dst, false
		}
		v := skipSpace(data, i+1)
		if check {
			i, ok = validValue(data, v, 1)
		} else {
			n := valueLen(data[v:])
			i, ok = v+n, n > 0
		}
		if !ok {
			return dst, false
		}
		dst = append(dst, Member{Key: key, Value: data[v:i]})
		i = skipSpace(data, i)
		if i >= len(data) {
			return dst, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return dst, skipSpace(data, i+1) == len(data)
		default:
			return dst, false
		}
	}
}

// Elements appends the elements of the JSON array that is all of data
// (white space around it allowed) to dst, in order, raw and delimited as
// Members delimits values, and reports whether data is one lexically
// well-formed array, as Members does for an object. Every text that
// encoding/json accepts as an array is well-formed here, with the same
// elements.
func Elements(dst [][]byte, data []byte) ([][]byte, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return dst, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return dst, skipSpace(data, i+1) == len(data)
	}
	for {
		n := valueLen(data[i:])
		if n <= 0 {
			return dst, false
		}
		dst = append(dst, data[i:i+n])
		i = skipSpace(data, i+n)
		if i >= len(data) {
			return dst, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return dst, skipSpace(data, i+1) == len(data)
		default:
			return dst, false
		}
	}
}

// ValidMembers is Members for data that must also be valid JSON: it
// reports whether data is an object that encoding/json's Valid accepts
// (Valid), and appends its members to dst as Members does, in one pass
// over data instead of two.
func ValidMembers(dst []Member, data []byte) ([]Member, bool) {
	return topMembers(dst, data, true)
}

// A Reader reads one JSON text from its start to its end, checking it as
// Valid does, while its caller takes what it needs on the way: objects
// member by member (Enter, Key), other values raw (Raw). Reading and the
// validity check are then one pass over the text. Once the reader finds
// the text invalid, every method reports false.
type Reader struct {
	data  []byte
	i     int  // the next token's index (after white space)
	depth int  // the objects entered and not left
	first bool // at an object's first member
	done  bool // the text's one value was read
	bad   bool
}

// NewReader returns a Reader of data.
func NewReader(data []byte) Reader { return Reader{data: data, i: skipSpace(data, 0)} }

// Enter reads the opening brace of an object, the next value, and
// reports whether there was one; Key then reads its members. Another value
// is left to be read.
func (r *Reader) Enter() bool { return r.enter('{') }

// enter reads the opening brace or bracket open of the next value, if it
// has one.
func (r *Reader) enter(open byte) bool {
	if r.bad || r.i >= len(r.data) || r.data[r.i] != open {
		return false
	}
	if r.depth >= maxDepth || r.done {
		r.bad = true
		return false
	}
	r.depth++
	r.i = skipSpace(r.data, r.i+1)
	r.first = true
	return true
}

// Key reads the next member of the object entered last: its key's raw
// content (escapes as written) and the colon after it, its value to be
// read next. At the object's end it reads the closing brace and reports
// false, as it does when the text is invalid (Valid tells which).
func (r *Reader) Key() ([]byte, bool) {
	d, i := r.data, r.i
	if r.bad || i >= len(d) {
		r.bad = true
		return nil, false
	}
	if d[i] == '}' {
		r.i = skipSpace(d, i+1)
		r.depth--
		r.first = false
		r.done = r.depth == 0
		return nil, false
	}
	if !r.first {
		if d[i] != ',' {
			r.bad = true
			return nil, false
		}
		i = skipSpace(d, i+1)
	}
	r.first = false
	if i >= len(d) || d[i] != '"' {
		r.bad = true
		return nil, false
	}
	end, ok := validString(d, i+1)
	if !ok {
		r.bad = true
		return nil, false
	}
	key := d[i+1 : end-1]
	if i = skipSpace(d, end); i >= len(d) || d[i] != ':' {
		r.bad = true
		return nil, false
	}
	r.i = skipSpace(d, i+1)
	return key, true
}

// EnterArray reads the opening bracket of an array, the next value, and
// reports whether there was one; Elem then reads its elements. Another
// value is left to be read.
func (r *Reader) EnterArray() bool { return r.enter('[') }

// Elem reads up to the next element of the array entered last, its value
// to be read next, and reports whether there is one. At the array's end it
// reads the closing bracket and reports false, as it does when the text is
// invalid (Valid tells which).
func (r *Reader) Elem() bool {
	d, i := r.data, r.i
	if r.bad || i >= len(d) {
		r.bad = true
		return false
	}
	if d[i] == ']' {
		r.i = skipSpace(d, i+1)
		r.depth--
		r.first = false
		r.done = r.depth == 0
		return false
	}
	if !r.first {
		if d[i] != ',' {
			r.bad = true
			return false
		}
		if i = skipSpace(d, i+1); i >= len(d) || d[i] == ']' {
			r.bad = true
			return false
		}
	}
	r.first = false
	r.i = i
	return true
}

// Offset returns the offset in the text of what is to be read next,
// after white space.
func (r *Reader) Offset() int { return r.i }

// Data returns the text the reader reads.
func (r *Reader) Data() []byte { return r.data }

// Raw reads the next value, checking it whole, and returns it raw (a
// string with its quotes, an object with its braces, ...), or nil when it
// is not valid.
func (r *Reader) Raw() []byte {
	if r.bad || r.done {
		r.bad = true
		return nil
	}
	start := r.i
	end, ok := validValue(r.data, start, r.depth)
	if !ok {
		r.bad = true
		return nil
	}
	r.i = skipSpace(r.data, end)
	r.done = r.depth == 0
	return r.data[start:end]
}

// Valid reports whether the text read so far is valid JSON.
func (r *Reader) Valid() bool { return !r.bad }

// Done reports whether the whole text was read, every object entered was
// left, and it is valid JSON (Valid of the text).
func (r *Reader) Done() bool { return !r.bad && r.done && r.i == len(r.data) }

// Seek returns the offset in data of the value of member key: the first
// member with that key among the leading members of the JSON object that
// data starts with. It delimits the members before it as Members does and
// reads nothing after its key and colon, so the rest of data may be
// malformed or missing (a line cut short): what the caller reads of the
// value is the caller's to check. ok is false when data does not start
// with an object in that shape up to the member, or the object (or data)
// ends before one has key. Keys are compared raw, as written: an escaped
// key never matches. Unlike Get, Seek finds the first of duplicate keys.
func Seek(data []byte, key string) (int, bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	i = skipSpace(data, i+1)
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, false
		}
		end := closingQuote(data[i+1:])
		if end < 0 {
			return 0, false
		}
		k := data[i+1 : i+1+end]
		i = skipSpace(data, i+end+2)
		if i >= len(data) || data[i] != ':' {
			return 0, false
		}
		i = skipSpace(data, i+1)
		if string(k) == key {
			return i, i < len(data)
		}
		n := valueLen(data[i:])
		if n <= 0 {
			return 0, false
		}
		i = skipSpace(data, i+n)
		if i >= len(data) || data[i] != ',' {
			return 0, false
		}
		i = skipSpace(data, i+1)
	}
}

// Get returns the value of the last member of ms whose key is key
// (encoding/json's choice among duplicate keys), or nil.
func Get(ms []Member, key string) []byte {
	for i := len(ms) - 1; i >= 0; i-- {
		if string(ms[i].Key) == key {
			return ms[i].Value
		}
	}
	return nil
}

// Text returns the content of the JSON string value v, unescaped, and
// whether v is a string, as encoding/json decodes it. A string without
// escapes or invalid UTF-8 is returned as a subslice of v (no copy); any
// other is decoded into a new slice.
func Text(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return body, true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// String is Text as a string ("" when v is not a string).
func String(v []byte) string {
	t, _ := Text(v)
	return string(t)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// valueLen returns the length of the JSON value that starts b, or 0 when
// none does or it does not end.
func valueLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"':
		end := closingQuote(b[1:])
		if end < 0 {
			return 0
		}
		return end + 2
	case '{', '[':
		depth := 0
		for i := 0; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := closingQuote(b[i+1:])
				if end < 0 {
					return 0
				}
				i += end + 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return 0
	case ',', ':', '}', ']':
		return 0
	}
	for i, c := range b {
		if delimiter[c] {
			return i
		}
	}
	return len(b)
}

// delimiter holds the bytes that end a number or literal for valueLen.
var delimiter = func() (t [256]bool) {
	for _, c := range ",}] \t\r\n\"{[:" {
		t[c] = true
	}
	return t
}()

// maxDepth is how deeply encoding/json lets arrays and objects nest.
const maxDepth = 10000

// Valid reports whether data is one valid JSON text, exactly as
// encoding/json's Valid does: the same grammar, white space and nesting
// limit. Like it, it does not check that strings are valid UTF-8. It is
// several times faster: a byte loop, no state machine.
func Valid(data []byte) bool {
	i, ok := validValue(data, skipSpace(data, 0), 0)
	return ok && skipSpace(data, i) == len(data)
}

// validValue checks the JSON value at b[i:], inside depth arrays and
// objects, and returns the index after it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return validString(b, i+1)
	case '{':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(b, i+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = validValue(b, skipSpace(b, i+1), depth+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case '[':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = validValue(b, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case 't':
		return validLiteral(b, i, "true")
	case 'f':
		return validLiteral(b, i, "false")
	case 'n':
		return validLiteral(b, i, "null")
	}
	return validNumber(b, i)
}

// validString checks the rest of a string whose opening quote is right
// before b[i] and returns the index after its closing quote.
func validString(b []byte, i int) (int, bool) {
	for i < len(b) {
		// Four bytes a step while they are plain string content.
		for i+4 <= len(b) && inString[b[i]] && inString[b[i+1]] && inString[b[i+2]] && inString[b[i+3]] {
			i += 4
		}
		for i < len(b) && inString[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
	return i, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validLiteral checks that b[i:] starts with lit and returns the index
// after it. What may follow is the caller's to check.
func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// validNumber checks the number at b[i:] and returns the index after it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// digits returns the index of the first byte of b[i:] that is not a
// decimal digit, or len(b).
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// inString holds the bytes that stand for themselves in a JSON string:
// all but the quote, the backslash and control characters.
var inString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
