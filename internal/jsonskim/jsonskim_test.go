package jsonskim

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestShrink(t *testing.T) {
	long := strings.Repeat("abcdefgh", 10) // 80 bytes
	for _, tc := range []struct {
		name, src, want string
	}{
		{"short strings unchanged", `{"type":"user","n":1,"a":["x","y"]}`, `{"type":"user","n":1,"a":["x","y"]}`},
		{"long value cut", `{"text":"` + long + `","id":"z"}`, `{"text":"` + long[:16] + `","id":"z"}`},
		{"long key kept", `{"` + long + `" :1}`, `{"` + long + `" :1}`},
		{"escaped quote inside", `{"t":"` + `ab\"cd` + long + `"}`, `{"t":"ab\"cdabcdefghab"}`},
		{"escaped backslash before the end", `["` + long + `\\"]`, `["` + long[:16] + `"]`},
		{"no cut inside an escape", `["abcdefghijklmn\u00e9` + long + `"]`, `["abcdefghijklmn"]`},
		{"escape that fits", `["abcdefghij\u00e9` + long + `"]`, `["abcdefghij\u00e9"]`},
		{"no cut inside UTF-8", `["abcdefghijklmnoé` + long + `"]`, `["abcdefghijklmno"]`},
		{"white space only kept whole", `["` + strings.Repeat(`\n `, 30) + `"]`, `["` + strings.Repeat(`\n `, 30) + `"]`},
		{"unterminated copied", `{"t":"` + long, `{"t":"` + long},
		{"not JSON", `hello`, `hello`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(Shrink(nil, []byte(tc.src), 16))
			if got != tc.want {
				t.Errorf("Shrink(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

// FuzzShrink checks that a valid JSON text stays valid with the same
// structure and the same short strings, and that every cut string is a
// prefix of the original that still holds a letter or digit.
func FuzzShrink(f *testing.F) {
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"hello there, a long text indeed"}]}}`), 8)
	f.Add([]byte(`["a\"b\\c\u00e9d\n             e", 1, null, true]`), 4)
	f.Add([]byte(`"\ud83d\ude00\ud83d\ude00\ud83d\ude00x"`), 3)
	f.Fuzz(func(t *testing.T, src []byte, keep int) {
		keep = 16 + (keep&0xff)%64
		out := Shrink(nil, src, keep)
		if !json.Valid(src) {
			return
		}
		var a, b any
		if err := json.Unmarshal(src, &a); err != nil {
			t.Skip()
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("Shrink(%q) = %q: %v", src, out, err)
		}
		same(t, a, b)
	})
}

func same(t *testing.T, a, b any) {
	t.Helper()
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(bm) != len(a) {
			t.Fatalf("object %v became %v", a, b)
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok {
				t.Fatalf("key %q lost", k)
			}
			same(t, av, bv)
		}
	case []any:
		bs, ok := b.([]any)
		if !ok || len(bs) != len(a) {
			t.Fatalf("array %v became %v", a, b)
		}
		for i := range a {
			same(t, a[i], bs[i])
		}
	case string:
		bs, ok := b.(string)
		if !ok || !strings.HasPrefix(a, strings.TrimSuffix(bs, string(utf8.RuneError))) {
			t.Fatalf("string %q became %v", a, b)
		}
		if strings.TrimSpace(a) != "" && strings.TrimSpace(bs) == "" {
			t.Fatalf("string %q with text became white space %q", a, bs)
		}
	default:
		if a != b {
			t.Fatalf("%v became %v", a, b)
		}
	}
}
