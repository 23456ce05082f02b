// Package size reads and writes byte sizes as people type them: "5GiB",
// "512MB", "1048576".
package size

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the suffixes Parse takes, in lower case: the binary ones are
// powers of 1024, the decimal ones powers of 1000.
var units = map[string]int64{
	"b":   1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// ErrSyntax is wrapped by Parse's errors.
var ErrSyntax = errors.New("size: not a size")

const want = "want a size like 5GiB, 512MB or 1048576: a number and one of B, KiB, MiB, GiB, TiB (powers of 1024), KB, MB, GB, TB (powers of 1000), or plain bytes"

// Parse reads s as a number of bytes: plain digits, or a number (a decimal
// fraction allowed) followed by a unit, case-insensitive, with or without
// a space between ("5GiB", "1.5 gb", "100B"). A unit of a bare letter
// ("5G") is refused as ambiguous, and so is anything negative or past
// math.MaxInt64; the error says what is wanted.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" || num == "." || strings.Count(num, ".") > 1 {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("%w: %q is negative; %s", ErrSyntax, s, want)
		}
		return 0, fmt.Errorf("%w: %q: %s", ErrSyntax, s, want)
	}
	mult := int64(1)
	if unit != "" {
		m, ok := units[unit]
		if !ok {
			if k, ok := units[unit+"ib"]; ok && len(unit) == 1 && k > 1 {
				return 0, fmt.Errorf("%w: %q: say %s%siB (powers of 1024) or %s%sB (of 1000)", ErrSyntax, s, num, strings.ToUpper(unit), num, strings.ToUpper(unit))
			}
			return 0, fmt.Errorf("%w: %q: unknown unit %q; %s", ErrSyntax, s, strings.TrimSpace(t[i:]), want)
		}
		mult = m
	}
	if whole, frac, ok := strings.Cut(num, "."); ok {
		if mult == 1 {
			return 0, fmt.Errorf("%w: %q: a number of bytes is whole; %s", ErrSyntax, s, want)
		}
		f, err := strconv.ParseFloat(whole+"."+frac+"0", 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %s", ErrSyntax, s, want)
		}
		v := math.Round(f * float64(mult))
		if v >= math.MaxInt64 {
			return 0, fmt.Errorf("%w: %q is too large", ErrSyntax, s)
		}
		return int64(v), nil
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%w: %q is too large", ErrSyntax, s)
	}
	return n * mult, nil
}

// Format is n in the largest binary unit it reaches, with one decimal:
// "512 B", "1.5 KiB", "5.0 GiB".
func Format(n int64) string {
	if n < 1<<10 && n > -1<<10 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		v /= 1 << 10
		unit = u
		if math.Abs(v) < 1<<10 {
			break
		}
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}
