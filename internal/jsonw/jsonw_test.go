package jsonw

import (
	"encoding/json"
	"testing"
	"time"
)

var strings = []string{
	"", "plain", `"quoted"`, `back\slash`, "<script>&amp;</script>", "tab\tnew\nline\rret",
	"\b\f\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c", "line\u2028para\u2029", "bad \xff\xfe utf8 \xe2\x82",
	"emoji \U0001F600", "\xed\xa0\x80 surrogate",
}

func marshal(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStringIsMarshals(t *testing.T) {
	for _, s := range strings {
		if got, want := string(String(nil, s)), marshal(t, s); got != want {
			t.Errorf("String(%q) = %s, Marshal writes %s", s, got, want)
		}
	}
}

func TestStringsIsMarshals(t *testing.T) {
	if got := string(Strings(nil, nil)); got != "[]" {
		t.Errorf("Strings(nil) = %s, want []", got)
	}
	if got, want := string(Strings(nil, strings)), marshal(t, strings); got != want {
		t.Errorf("Strings = %s, Marshal writes %s", got, want)
	}
}

func TestTimeIsMarshals(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 12, 7, 2, 3, 4, 500600700, time.UTC),
		time.Date(2026, 12, 7, 2, 3, 4, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 6, 1, 0, 0, 0, 1, time.FixedZone("x", 5*3600+1800)),
		time.Date(2026, 6, 1, 0, 0, 0, 1, time.FixedZone("y", -(23*3600+59*60))),
		{},
		time.Now(),
	} {
		got, ok := Time(nil, tm)
		if !ok {
			t.Errorf("Time(%v) refused", tm)
			continue
		}
		if want := marshal(t, tm); string(got) != want {
			t.Errorf("Time(%v) = %s, Marshal writes %s", tm, got, want)
		}
	}
	for _, tm := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", 24*3600)),
	} {
		if _, ok := Time(nil, tm); ok {
			t.Errorf("Time(%v) accepted a time Marshal refuses", tm)
		}
		if _, err := json.Marshal(tm); err == nil {
			t.Errorf("Marshal(%v) takes it: Time need not refuse it", tm)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range strings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(String(nil, s)), marshal(t, s); got != want {
			t.Errorf("String(%q) = %s, Marshal writes %s", s, got, want)
		}
	})
}

func FuzzTime(f *testing.F) {
	f.Add(int64(1796000000), int64(123456789), 0)
	f.Add(int64(-62135596800), int64(0), 3600)
	f.Fuzz(func(t *testing.T, sec, nsec int64, off int) {
		tm := time.Unix(sec, nsec).In(time.FixedZone("f", off%(48*3600)))
		want, err := json.Marshal(tm)
		got, ok := Time(nil, tm)
		if ok != (err == nil) {
			t.Fatalf("Time(%v) ok %v, Marshal's error %v", tm, ok, err)
		}
		if ok && string(got) != string(want) {
			t.Errorf("Time(%v) = %s, Marshal writes %s", tm, got, want)
		}
	})
}
