package jsonskim

// Indent appends to dst the compact JSON text src (as json.Marshal writes
// it: no white space outside strings) indented as json.MarshalIndent(v, "",
// "  ") writes it: each member and element on a line of its own, two spaces
// a level, a space after each colon, empty objects and arrays kept as {}
// and []. It is json.Indent for that one case at a fraction of its cost
// (pilot writes every run record through it, twice a run). Text with white
// space outside strings is indented as if that white space were not there.
func Indent(dst, src []byte) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			end := closingQuote(src[i+1:])
			if end < 0 {
				return append(dst, src[i:]...)
			}
			dst = append(dst, src[i:i+end+2]...)
			i += end + 1
		case '{', '[':
			dst = append(dst, c)
			j := skipSpace(src, i+1)
			if j < len(src) && (src[j] == '}' || src[j] == ']') {
				dst = append(dst, src[j])
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		case ' ', '\t', '\r', '\n':
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
