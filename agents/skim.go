package agents

import "github.com/pilotworkers/pilot/internal/jsonskim"

// skim reads the fields of one JSON event line without decoding it
// (internal/jsonskim): the watchers' hot path, where encoding/json would
// cost most of a dispatch's time on streams of short events. The members
// alias the line, so they are read during Watcher.Line only; the buffer is
// reused from line to line.
//
// Keys are matched exactly (encoding/json also matches a struct field's
// key case-insensitively; no agent CLI writes its keys in another case).
type skim struct {
	ms []jsonskim.Member
}

// object reads the members of the JSON object line data and reports
// whether it is one (lexically well-formed, as jsonskim.Members checks).
func (s *skim) object(data []byte) bool {
	var ok bool
	s.ms, ok = jsonskim.Members(s.ms[:0], data)
	return ok
}

// raw returns the raw value of member key, or nil.
func (s *skim) raw(key string) []byte { return jsonskim.Get(s.ms, key) }

// str returns the string member key, unescaped: empty when it is absent
// or null, and ok false when it holds something else (where decoding the
// line into a struct with a string field would fail).
func (s *skim) str(key string) (v []byte, ok bool) {
	return skimString(s.raw(key))
}

// skimString is str for a raw value.
func skimString(raw []byte) ([]byte, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	return jsonskim.Text(raw)
}
