package jsonskim

import (
	"bytes"
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

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // key=value pairs; nil when not well-formed
	}{
		{"flat", `{"type":"item.started","n":12,"ok":true,"x":null}`, []string{`type="item.started"`, "n=12", "ok=true", "x=null"}},
		{"nested", ` {"type":"a","item":{"id":"i\"1","t":[1,{"b":"}"}]}} `, []string{`type="a"`, `item={"id":"i\"1","t":[1,{"b":"}"}]}`}},
		{"white space", "{ \"a\" : [ 1 , 2 ] ,\n\"b\":\"c\" }", []string{"a=[ 1 , 2 ]", `b="c"`}},
		{"empty", `{ }`, []string{}},
		{"escaped key kept raw", `{"ty\u0070e":"x"}`, []string{`ty\u0070e="x"`}},
		{"not an object", `["a"]`, nil},
		{"cut short", `{"type":"turn.completed"`, nil},
		{"unterminated string", `{"type":"turn.comple}`, nil},
		{"trailing text", `{"a":1} x`, nil},
		{"missing colon", `{"a" 1}`, nil},
		{"missing comma", `{"a":1 "b":2}`, nil},
		{"trailing comma", `{"a":1,}`, nil},
		{"unbalanced nested", `{"a":{"b":1}`, nil},
		{"empty value", `{"a":,"b":1}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, ok := Members(nil, []byte(tc.src))
			if ok != (tc.want != nil) {
				t.Fatalf("Members(%q): well-formed %v, want %v", tc.src, ok, tc.want != nil)
			}
			if !ok {
				return
			}
			got := []string{}
			for _, m := range ms {
				got = append(got, string(m.Key)+"="+string(m.Value))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("Members(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

func TestGetAndText(t *testing.T) {
	ms, ok := Members(nil, []byte(`{"type":"a","type":"b\u00e9\n","n":1}`))
	if !ok {
		t.Fatal("not well-formed")
	}
	if got := String(Get(ms, "type")); got != "bé\n" {
		t.Errorf("the last type: %q, want %q", got, "bé\n")
	}
	if got := Get(ms, "missing"); got != nil {
		t.Errorf("a missing key: %q, want nil", got)
	}
	if _, ok := Text(Get(ms, "n")); ok {
		t.Error("Text of a number: ok, want not a string")
	}
	if got, ok := Text([]byte(`"plain"`)); !ok || string(got) != "plain" {
		t.Errorf("Text: %q %v", got, ok)
	}
}

// FuzzMembers checks Members against encoding/json: every text it accepts
// as an object is well-formed here, with the same members (by their raw
// keys, the last of duplicates) and the same raw values; and Text decodes
// string values as it does.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"x"}}`,
		`{"a":[1,2,{"b":"\"}"}],"c":-1.5e3,"d":true,"e":null,"f":"\u00e9\\"}`,
		`{ "a" : { } , "b" : [ ] }`,
		`{"a":1} `,
		`{"a":"b"`,
		`[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, ok := Members(nil, data)
		var want map[string]json.RawMessage
		if json.Unmarshal(data, &want) != nil || want == nil {
			return // not an object to encoding/json: Members may say anything but must not panic
		}
		if !ok {
			t.Fatalf("encoding/json reads %q as an object, Members does not", data)
		}
		for _, m := range ms {
			if strings.IndexByte(string(m.Key), '\\') >= 0 || !utf8.Valid(m.Key) {
				continue // encoding/json decodes (or replaces) what the raw key holds
			}
			key := string(m.Key)
			if got := Get(ms, key); string(got) != string(want[key]) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", data, key, got, want[key])
			}
			var s string
			if len(want[key]) > 0 && want[key][0] == '"' && json.Unmarshal(want[key], &s) == nil {
				if got, ok := Text(Get(ms, key)); !ok || string(got) != s {
					t.Fatalf("%q: Text(%q) = %q %v, encoding/json %q", data, key, got, ok, s)
				}
			}
		}
		if len(ms) < len(want) {
			t.Fatalf("%q: %d members, encoding/json %d keys", data, len(ms), len(want))
		}
	})
}

// benchLines are short events like codex's and gemini's.
var benchLines = [][]byte{
	[]byte(`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'go test ./...'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`),
	[]byte(`{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"All tests pass and the linter reports nothing: the change is ready."}}`),
	[]byte(`{"type":"message","timestamp":"2026-11-30T07:32:12.509Z","role":"assistant","content":"I'll run the tests first.","delta":true}`),
}

// BenchmarkValid checks short events, with Valid and with encoding/json.
func BenchmarkValid(b *testing.B) {
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"jsonskim", Valid}, {"encoding-json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			n := 0
			for _, l := range benchLines {
				n += len(l)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				for _, l := range benchLines {
					if !v.valid(l) {
						b.Fatal("not valid")
					}
				}
			}
		})
	}
}

// BenchmarkMembers reads the members of short events like codex's and of
// their nested items, as the watchers do.
func BenchmarkMembers(b *testing.B) {
	lines := benchLines
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	var ms []Member
	for b.Loop() {
		for _, l := range lines {
			var ok bool
			ms, ok = Members(ms[:0], l)
			if !ok {
				b.Fatal("not well-formed")
			}
			if item := Get(ms, "item"); item != nil {
				if _, ok := Members(nil, item); !ok {
					b.Fatal("item not well-formed")
				}
			}
		}
	}
}

func TestValid(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, s := range []string{
		`{"type":"item.started","n":-1.5e+3,"a":[true,false,null,{}],"s":"\u00e9\n\"\\\/"}`,
		` [ 1 , "x" ] `, `0`, `-0`, `1.0`, `1e5`, `1E-5`, `"\uD83D\uDE00"`, "\"\x7f\xff\"",
		``, ` `, `01`, `-`, `1.`, `.5`, `1e`, `+1`, `tru`, `truex`, `nul`, `[1,]`, `{"a":1,}`, `{"a"}`, `{1:2}`,
		`[1 2]`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x01\"", "\"a\tb\"", `"abc`, `{"a":1} {}`, `[`, `]`, `{"a":[}]}`,
		deep(10000), deep(10001), `{"a":` + deep(9999) + `}`, `{"a":` + deep(10000) + `}`,
	} {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.40q) = %v, encoding/json %v", s, got, want)
		}
	}
}

// FuzzValid checks Valid against encoding/json's Valid, and ValidMembers
// against Members and Valid.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"type":"step_finish","part":{"tokens":{"input":1500,"cache":{"read":0}},"cost":0.008}}`,
		`[1,-2.5e+3,true,false,null,"a\u00e9\"\\\/\b\f\n\r\t"]`,
		`{ "a" : { } , "b" : [ ] }`, `{"a":1} `, `{"a":"b"`, `01`, `"\u12g4"`, "\"\x01\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		if got := Valid(data); got != valid {
			t.Fatalf("Valid(%q) = %v, encoding/json %v", data, got, valid)
		}
		ms, ok := ValidMembers(nil, data)
		want, wantOK := Members(nil, data)
		wantOK = wantOK && valid
		if ok != wantOK {
			t.Fatalf("ValidMembers(%q): %v, want %v", data, ok, wantOK)
		}
		if !ok {
			return
		}
		if len(ms) != len(want) {
			t.Fatalf("ValidMembers(%q): %d members, Members %d", data, len(ms), len(want))
		}
		for i := range ms {
			if string(ms[i].Key) != string(want[i].Key) || string(ms[i].Value) != string(want[i].Value) {
				t.Fatalf("ValidMembers(%q): member %d %q=%q, Members %q=%q", data, i, ms[i].Key, ms[i].Value, want[i].Key, want[i].Value)
			}
		}
	})
}

func TestSeek(t *testing.T) {
	for _, tc := range []struct {
		name, src, key string
		want           string // the value's start, up to the end; "" when not found
	}{
		{"first", `{"type":"a","n":1}`, "type", `"a","n":1}`},
		{"after a nested value", `{"a":{"b":[1,"}"]},"id":"x"`, "id", `"x"`},
		{"cut short after it", `{"type":"item.started","item":{"id":"item_1","ty`, "item", `{"id":"item_1","ty`},
		{"malformed after it", `{"id":"x",,,`, "id", `"x",,,`},
		{"white space", " { \"a\" : 1 , \"b\" :\t2 }", "b", "2 }"},
		{"first of duplicates", `{"k":1,"k":2}`, "k", `1,"k":2}`},
		{"absent", `{"a":1,"b":2}`, "c", ""},
		{"cut short before it", `{"a":"xyz`, "b", ""},
		{"nothing after the colon", `{"a":`, "a", ""},
		{"escaped key", `{"\u0061":1}`, "a", ""},
		{"not an object", `["a"]`, "a", ""},
		{"missing colon", `{"a" 1,"b":2}`, "b", ""},
		{"missing comma", `{"a":1 "b":2}`, "b", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, ok := Seek([]byte(tc.src), tc.key)
			if ok != (tc.want != "") || ok && tc.src[i:] != tc.want {
				t.Errorf("Seek(%q, %q) = %d %v, want the value at %q", tc.src, tc.key, i, ok, tc.want)
			}
		})
	}
}

// FuzzSeek checks Seek against Members: on a well-formed object it finds
// the first member with each key, at the offset of its value; it finds it
// as well in any prefix of the object that ends after the value's first
// byte; and it finds no key the object does not have.
func FuzzSeek(f *testing.F) {
	for _, s := range []string{
		`{"type":"item.started","item":{"id":"item_1","type":"command_execution"}}`,
		`{"type":"tool_use","timestamp":1787138300274,"sessionID":"ses_1","part":{"id":"prt"}}`,
		`{ "a" : [ 1 , "]" ] , "a" : { } }`,
	} {
		f.Add([]byte(s), "type", 10)
	}
	f.Fuzz(func(t *testing.T, data []byte, key string, cut int) {
		ms, ok := Members(nil, data)
		if !ok {
			Seek(data, key) // must not panic
			return
		}
		first := -1
		for j, m := range ms {
			if string(m.Key) == key {
				first = j
				break
			}
		}
		i, found := Seek(data, key)
		if first < 0 {
			if found {
				t.Fatalf("Seek(%q, %q) found %d, Members has no such key", data, key, i)
			}
			return
		}
		want := cap(data) - cap(ms[first].Value) // the value's offset in data
		if !found || i != want {
			t.Fatalf("Seek(%q, %q) = %d %v, want %d", data, key, i, found, want)
		}
		if cut < 0 {
			cut = -cut
		}
		n := want + 1 + cut%(len(data)-want)
		if j, ok := Seek(data[:n], key); !ok || j != want {
			t.Fatalf("Seek(%q, %q) = %d %v, want %d", data[:n], key, j, ok, want)
		}
	})
}

// TestClosingQuote checks closingQuote against a byte-by-byte reading,
// with the quote and escapes on either side of where it stops reading
// four bytes a step and where it turns to IndexByte.
func TestClosingQuote(t *testing.T) {
	want := func(s []byte) int {
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '"':
				return i
			case '\\':
				i++
			}
		}
		return -1
	}
	for n := 0; n < 70; n++ {
		for _, tail := range []string{``, `"`, `\"`, `\\"`, `\\\"x"`, `\`, `\\`, `é"`} {
			s := []byte(strings.Repeat("a", n) + tail + `"rest`)
			if got := closingQuote(s); got != want(s) {
				t.Errorf("closingQuote(%q) = %d, want %d", s, got, want(s))
			}
			s = s[:n+len(tail)]
			if got := closingQuote(s); got != want(s) {
				t.Errorf("closingQuote(%q) = %d, want %d", s, got, want(s))
			}
		}
	}
}

func TestElements(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // nil when not well-formed
	}{
		{"values", ` [1, "a,]", {"b":[2]}, null , [ ] ] `, []string{"1", `"a,]"`, `{"b":[2]}`, "null", "[ ]"}},
		{"empty", `[ ]`, []string{}},
		{"not an array", `{"a":1}`, nil},
		{"cut short", `[1,2`, nil},
		{"trailing comma", `[1,]`, nil},
		{"missing comma", `[1 2]`, nil},
		{"trailing text", `[1] x`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, ok := Elements(nil, []byte(tc.src))
			if ok != (tc.want != nil) {
				t.Fatalf("Elements(%q): well-formed %v, want %v", tc.src, ok, tc.want != nil)
			}
			got := []string{}
			for _, e := range es {
				got = append(got, string(e))
			}
			if ok && strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("Elements(%q)\n got %q\nwant %q", tc.src, got, tc.want)
			}
		})
	}
}

// FuzzElements checks Elements against encoding/json: every text it
// accepts as an array is well-formed here, with the same raw elements.
func FuzzElements(f *testing.F) {
	for _, s := range []string{`[{"type":"text","text":"x"},{"type":"toolCall","id":"a"}]`, ` [1, "a,]", null, [[]] ] `, `[1,`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		es, ok := Elements(nil, data)
		var want []json.RawMessage
		if json.Unmarshal(data, &want) != nil || want == nil {
			return
		}
		if !ok || len(es) != len(want) {
			t.Fatalf("Elements(%q) = %d %v, encoding/json %d elements", data, len(es), ok, len(want))
		}
		for i := range es {
			if string(es[i]) != string(want[i]) {
				t.Fatalf("Elements(%q): element %d %q, encoding/json %q", data, i, es[i], want[i])
			}
		}
	})
}

// readAll reads the JSON text data with r: objects through Enter and Key,
// arrays through EnterArray and Elem, down to any depth, other values
// through Raw. It returns the top object's keys and raw values (Members'
// pairs), or nil when data is not an object.
func readAll(r *Reader) []string {
	var top []string
	var walk func(depth int)
	walk = func(depth int) {
		if r.EnterArray() {
			for r.Elem() {
				walk(depth + 1)
			}
			return
		}
		if !r.Enter() {
			r.Raw()
			return
		}
		for {
			k, ok := r.Key()
			if !ok {
				return
			}
			if depth == 0 {
				start := r.Offset()
				walk(depth + 1)
				top = append(top, string(k)+"="+string(bytes.TrimRight(r.data[start:r.Offset()], " \t\r\n")))
				continue
			}
			walk(depth + 1)
		}
	}
	walk(0)
	return top
}

func TestReader(t *testing.T) {
	for _, s := range []string{
		`{"type":"step_finish","part":{"tokens":{"input":1,"cache":{"read":0}},"cost":0.5},"n":[1,{"a":2}]}`,
		` { "a" : { } , "b" : [ ] } `, `{}`, `[1]`, `"x"`, `1`, ``, ` `, `{"a":1}{}`, `{"a":1} 2`, `{"a":1,}`,
		`[]`, ` [ ] `, `[1,]`, `[,1]`, `[1 2]`, `[1,,2]`, `[1}`, `{"a":[1]}`, `{"a":[}`, `{"a":[1,{"b":[[]]}]}`, `[[]`, `[]]`, `[1][2]`,
		strings.Repeat(`[`, 10000) + strings.Repeat("]", 10000), strings.Repeat(`[`, 10001) + strings.Repeat("]", 10001),
		`{,"a":1}`, `{"a" 1}`, `{"a":}`, `{"a":1`, `{"a":{"b":1}`, `{"a":{"b":1}}}`, `{"\x":1}`, "{\"a\":\"\x01\"}",
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	} {
		r := NewReader([]byte(s))
		readAll(&r)
		if got, want := r.Done(), json.Valid([]byte(s)); got != want {
			t.Errorf("reading %.60q: Done %v, encoding/json's Valid %v", s, got, want)
		}
	}
}

// FuzzReader checks that reading any text whole with a Reader finds it
// valid exactly when encoding/json does, with the top object's members
// Members finds.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"type":"step_finish","part":{"tokens":{"input":1,"cache":{"read":0}},"cost":0.5},"n":[1,{"a":2}]}`,
		` { "a" : { } , "b" : [ ] } `, `{"a":1,}`, `[{"a":1}]`, `{"a":"\u00e9"}`, `{"a":[1,[2,{"b":[]}]]}`, `[1,]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(data)
		top := readAll(&r)
		valid := json.Valid(data)
		if r.Done() != valid {
			t.Fatalf("reading %q: Done %v, encoding/json's Valid %v", data, r.Done(), valid)
		}
		if !valid {
			return
		}
		ms, ok := Members(nil, data)
		if !ok {
			return // not an object
		}
		var want []string
		for _, m := range ms {
			want = append(want, string(m.Key)+"="+string(m.Value))
		}
		if strings.Join(top, "|") != strings.Join(want, "|") {
			t.Fatalf("reading %q: members %q, Members %q", data, top, want)
		}
	})
}
