// Package text holds the small string shapings pilot's packages share: names
// fit for files and branches, and the last characters of a tail.
package text

import (
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
