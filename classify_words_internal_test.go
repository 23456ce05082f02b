package pilot

import (
	"regexp"
	"regexp/syntax"
	"testing"
)

// Every alternative of the patterns that prove a class without provider
// context holds one of strongWords: classifyLine decides a line holding
// none of them without running those patterns, so a phrase added to a
// pattern without its word would never match.
func TestStrongWordsCoverPatterns(t *testing.T) {
	for name, re := range map[string]*regexp.Regexp{
		"reAuthStrong": reAuthStrong, "reQuotaStrong": reQuotaStrong, "reContextStrong": reContextStrong,
		"reContextNoBody": reContextNoBody, "reRateStrong": reRateStrong, "reServerStrong": reServerStrong,
		"reStreamStrong": reStreamStrong, "reConnectionStrong": reConnectionStrong,
	} {
		tree, err := syntax.Parse(re.String(), syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		for _, lit := range literalTexts(tree) {
			if !containsAny(lit, strongWords) {
				t.Errorf("%s: a match with literal text %q holds no word of strongWords", name, lit)
			}
		}
	}
}

// literalTexts are the literal runs of the ways r can match, joined with
// a NUL where anything else comes between them: a word found in one of
// them is in every match that way. Alternatives and small character
// classes are each a way.
func literalTexts(r *syntax.Regexp) []string {
	switch r.Op {
	case syntax.OpLiteral:
		return []string{string(r.Rune)}
	case syntax.OpCharClass:
		var ws []string
		for i := 0; i+1 < len(r.Rune); i += 2 {
			for c := r.Rune[i]; c <= r.Rune[i+1] && len(ws) <= 4; c++ {
				ws = append(ws, string(c))
			}
		}
		if len(ws) <= 4 {
			return ws
		}
	case syntax.OpAlternate:
		var ws []string
		for _, s := range r.Sub {
			ws = append(ws, literalTexts(s)...)
		}
		return ws
	case syntax.OpConcat:
		ws := []string{""}
		for _, s := range r.Sub {
			var next []string
			for _, w := range ws {
				for _, x := range literalTexts(s) {
					next = append(next, w+x)
				}
			}
			ws = next
		}
		return ws
	case syntax.OpCapture:
		return literalTexts(r.Sub[0])
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpEndLine, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpEmptyMatch:
		return []string{""}
	}
	return []string{"\x00"}
}
