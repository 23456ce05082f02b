package jsonskim

import (
	"bytes"
	"encoding/json"
	"testing"
)

var indentCases = []string{
	`{}`, `[]`, `{"a":[]}`, `{"a":{},"b":[{}]}`, `[1,2,[3,[]]]`, `"x"`, `null`, `12.5e3`,
	`{"k":"v with , and : and { [ \" \\ inside","n":-1,"t":true,"f":false,"z":null}`,
	`{"deep":{"er":{"est":[1,{"x":"y"}]}}}`,
	`{"run_id":"20261201T194817Z-echo-ffe5c511","argv":["/bin/echo","ok"],"exit_code":0,"usage":{"input_tokens":1}}`,
}

// Indent writes what json.Indent(dst, src, "", "  ") writes for compact
// text, which json.MarshalIndent is.
func TestIndentIsMarshalIndent(t *testing.T) {
	for _, c := range indentCases {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(c), "", "  "); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if got := Indent([]byte("prefix:"), []byte(c)); string(got) != "prefix:"+want.String() {
			t.Errorf("Indent(%s) =\n%s\nwant\n%s", c, got[len("prefix:"):], want.String())
		}
	}
}

// Any valid JSON text, compacted as json.Marshal writes it, is indented as
// json.Indent indents it.
func FuzzIndent(f *testing.F) {
	for _, c := range indentCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, data); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := Indent(nil, compact.Bytes()); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("Indent(%q) =\n%s\nwant\n%s", compact.Bytes(), got, want.Bytes())
		}
	})
}

func BenchmarkIndent(b *testing.B) {
	src := []byte(indentCases[len(indentCases)-1])
	var dst []byte
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		dst = Indent(dst[:0], src)
	}
}
