// Package text holds the small string shapings pilot's packages share: names
// fit for files and branches, the last characters of a tail, and the copy
// of a line that failure patterns match.
package text

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// SafeName is s with every character other than ASCII letters, digits, '-',
// '_' and '.' replaced by repl: fit for file and branch names.
func SafeName(s string, repl rune) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return repl
	}, s)
}

// LastRunes keeps the last n characters of s.
func LastRunes(s string, n int) string {
	if c := utf8.RuneCountInString(s); c > n {
		for i := range s {
			if c <= n {
				return s[i:]
			}
			c--
		}
	}
	return s
}

// FirstRunes keeps the first n characters of s.
func FirstRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

var reANSI = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// Plain is line without its ANSI escape sequences.
func Plain(line string) string {
	if strings.IndexByte(line, 0x1b) < 0 {
		return line
	}
	return reANSI.ReplaceAllString(line, "")
}

// Matching is the copy of line that failure patterns match: Plain, with
// typographic apostrophes made plain, in lower case.
func Matching(line string) string {
	return strings.ToLower(strings.ReplaceAll(Plain(line), "\u2019", "'"))
}
