// Package jsonskim shortens the long string values of a JSON text, so that
// a decoder that needs only an event's short fields reads a megabyte-long
// event at memory speed.
package jsonskim

import "bytes"

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
	off := 0
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
