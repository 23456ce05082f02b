// Package jsonskim shortens the long string values of a JSON text, so that
// a decoder that needs only an event's short fields reads a megabyte-long
// event at memory speed.
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
	// Most strings of an event are short: look at their first bytes one
	// by one before calling IndexByte.
	for i := 0; i < len(s) && i < 16; i++ {
		switch s[i] {
		case '"':
			return i
		case '\\':
			return closingQuoteFrom(s, 0)
		}
	}
	return closingQuoteFrom(s, min(len(s), 16))
}

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
		end := closingQuote(data[i+1:])
		if end < 0 {
			return dst, false
		}
		key := data[i+1 : i+1+end]
		i = skipSpace(data, i+end+2)
		if i >= len(data) || data[i] != ':' {
			return dst, false
		}
		i = skipSpace(data, i+1)
		n := valueLen(data[i:])
		if n <= 0 {
			return dst, false
		}
		dst = append(dst, Member{Key: key, Value: data[i : i+n]})
		i = skipSpace(data, i+n)
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
		switch c {
		case ',', '}', ']', ' ', '\t', '\r', '\n', '"', '{', '[', ':':
			return i
		}
	}
	return len(b)
}
