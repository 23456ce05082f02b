package agents

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pilotworkers/pilot/internal/jsonskim"
)

// recordedLines returns the stdout lines of runner's recorded streams
// (testdata/<runner>/stream/*.stdout at the repository root).
func recordedLines(t testing.TB, runner string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", runner, "stream", "*.stdout"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams for %s: %v", runner, err)
	}
	return fileLines(t, files)
}

// fileLines returns the lines of files that are not blank, trimmed.
func fileLines(t testing.TB, files []string) [][]byte {
	t.Helper()
	var lines [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// plainKeys reports whether the keys of the JSON object obj are plain (no
// escapes) and distinct, also when their letter case is ignored (as
// encoding/json matches a struct field's key): an object in which the
// first member with a key, the last one, and encoding/json's pick are the
// same member. Leading-member fast paths read the first; the full paths
// the last (jsonskim.Get) or encoding/json's.
func plainKeys(obj []byte) bool {
	ms, ok := jsonskim.Members(nil, obj)
	if !ok {
		return false
	}
	for i, m := range ms {
		if bytes.IndexByte(m.Key, '\\') >= 0 {
			return false
		}
		for _, n := range ms[:i] {
			if bytes.EqualFold(m.Key, n.Key) {
				return false
			}
		}
	}
	return true
}

func TestLeadingString(t *testing.T) {
	for _, tc := range []struct {
		name, src, key, want string
		ok                   bool
	}{
		{"first member", `{"type":"item.started","item":{}}`, "type", "item.started", true},
		{"after others", `{"type":"tool_use","timestamp":1787138300274,"sessionID":"ses_1","part":{`, "sessionID", "ses_1", true},
		{"cut short after it", `{"a":"x","b":"yz`, "a", "x", true},
		{"empty", `{"id":""}`, "id", "", true},
		{"escape", `{"id":"a\"b"}`, "id", "", false},
		{"not ASCII", `{"id":"é"}`, "id", "", false},
		{"control byte", "{\"id\":\"a\tb\"}", "id", "", false},
		{"not a string", `{"id":7}`, "id", "", false},
		{"null", `{"id":null}`, "id", "", false},
		{"unterminated", `{"id":"abc`, "id", "", false},
		{"absent", `{"a":"b"}`, "id", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := leadingString([]byte(tc.src), tc.key)
			if ok != tc.ok || string(got) != tc.want {
				t.Errorf("leadingString(%q, %q) = %q %v, want %q %v", tc.src, tc.key, got, ok, tc.want, tc.ok)
			}
		})
	}
	if rest, ok := leadingObject([]byte(`{"type":"x","item":{"id":"i`), "item"); !ok || string(rest) != `{"id":"i` {
		t.Errorf("leadingObject: %q %v", rest, ok)
	}
	if _, ok := leadingObject([]byte(`{"item":null}`), "item"); ok {
		t.Error("leadingObject of null: ok")
	}
}
