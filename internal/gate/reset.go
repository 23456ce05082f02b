package gate

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The clock times agent CLIs give for a usage limit's reset:
//
//	Claude Code  "You've hit your limit · resets 3pm (America/New_York)",
//	             "5-hour limit reached ∙ resets 3:30pm", and the older
//	             "Claude AI usage limit reached|1764601200" (Unix seconds)
//	codex        "... or try again at 3:04 PM.", and for another day
//	             "... try again at Dec 2nd, 2026 3:04 PM."
var (
	reResetsClock = regexp.MustCompile(`(?i)\bresets\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]m)\b(?:\s*\(([A-Za-z_]+(?:/[A-Za-z0-9_+-]+)+)\))?`)
	reTryAgainAt  = regexp.MustCompile(`(?i)\btry again at\s+(?:([A-Z][a-z]{2})\s+(\d{1,2})(?:st|nd|rd|th)?,\s*(\d{4})\s+)?(\d{1,2}):(\d{2})\s*([ap]m)\b`)
	reLimitEpoch  = regexp.MustCompile(`(?i)usage limit reached\|(\d{9,11})\b`)
)

// resetTime reads when a usage limit resets from a CLI's own words, given
// now: the next such clock time (in the zone the text names, else now's),
// or the date and time it gives. ok is false when the text names none.
func resetTime(text string, now time.Time) (time.Time, bool) {
	if m := reLimitEpoch.FindStringSubmatch(text); m != nil {
		if sec, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			return time.Unix(sec, 0), true
		}
	}
	if m := reResetsClock.FindStringSubmatch(text); m != nil {
		loc := now.Location()
		if m[4] != "" {
			if l, err := time.LoadLocation(m[4]); err == nil {
				loc = l
			}
		}
		return nextClock(now.In(loc), m[1], m[2], m[3])
	}
	if m := reTryAgainAt.FindStringSubmatch(text); m != nil {
		if m[1] == "" {
			return nextClock(now, m[4], m[5], m[6])
		}
		month, err := time.Parse("Jan", m[1])
		day, derr := strconv.Atoi(m[2])
		year, yerr := strconv.Atoi(m[3])
		h, min, ok := clock(m[4], m[5], m[6])
		if err != nil || derr != nil || yerr != nil || !ok {
			return time.Time{}, false
		}
		return time.Date(year, month.Month(), day, h, min, 0, 0, now.Location()), true
	}
	return time.Time{}, false
}

// nextClock is the first time at hour:minute am/pm after now, in now's zone.
func nextClock(now time.Time, hour, minute, ampm string) (time.Time, bool) {
	h, m, ok := clock(hour, minute, ampm)
	if !ok {
		return time.Time{}, false
	}
	t := time.Date(now.Year(), now.Month(), now.Day(), h, m, 0, 0, now.Location())
	if !t.After(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t, true
}

// clock reads a 12-hour clock time.
func clock(hour, minute, ampm string) (h, m int, ok bool) {
	h, err := strconv.Atoi(hour)
	if err != nil || h < 1 || h > 12 {
		return 0, 0, false
	}
	if minute != "" {
		if m, err = strconv.Atoi(minute); err != nil || m > 59 {
			return 0, 0, false
		}
	}
	h %= 12
	if strings.EqualFold(ampm, "pm") {
		h += 12
	}
	return h, m, true
}
