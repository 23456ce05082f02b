package gate

import (
	"testing"
	"time"
)

func TestResetTime(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	now := time.Date(2026, 12, 1, 14, 10, 0, 0, time.UTC) // 09:10 in New York
	for _, tt := range []struct {
		text string
		want time.Time
	}{
		{"You've hit your limit · resets 3pm (America/New_York)", time.Date(2026, 12, 1, 15, 0, 0, 0, ny)},
		{"5-hour limit reached ∙ resets 3:30pm", time.Date(2026, 12, 1, 15, 30, 0, 0, time.UTC)},
		{"You've hit your limit · resets 1pm", time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)}, // 1pm passed today
		{"resets 12am", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)},
		{"You've hit your usage limit. Upgrade to Pro or try again at 3:04 PM.", time.Date(2026, 12, 1, 15, 4, 0, 0, time.UTC)},
		{"You've hit your usage limit. Try again at Dec 3rd, 2026 9:05 AM.", time.Date(2026, 12, 3, 9, 5, 0, 0, time.UTC)},
		{"Claude AI usage limit reached|1764601200", time.Unix(1764601200, 0)},
	} {
		got, ok := resetTime(tt.text, now)
		if !ok || !got.Equal(tt.want) {
			t.Errorf("resetTime(%q) = %v, %v; want %v", tt.text, got, ok, tt.want)
		}
	}
	for _, text := range []string{"", "rate limited", "try again in 20s", "resets 13pm", "try again at 25:00 PM", "the cache resets daily"} {
		if got, ok := resetTime(text, now); ok {
			t.Errorf("resetTime(%q) = %v; want none", text, got)
		}
	}
}

// FuzzResetTime: any text gives a reset time or none, never a panic; a
// clock time is within a day of now.
func FuzzResetTime(f *testing.F) {
	for _, s := range []string{"resets 3pm (America/New_York)", "try again at Dec 3rd, 2026 9:05 AM", "usage limit reached|1764601200", "resets 9:99pm", "resets 3pm (Nowhere/Zone)"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 14, 10, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := resetTime(text, now)
		if ok && reResetsClock.MatchString(text) && !reLimitEpoch.MatchString(text) && (got.Before(now) || got.Sub(now) > 49*time.Hour) {
			t.Errorf("resetTime(%q) = %v: a clock time more than a day from now", text, got)
		}
	})
}
