// Package pisession reads pi's native session file (a JSONL tree of
// entries) and says which phase the worker is in, whole (Parse) or
// incrementally as pi appends to it (Tail).
package pisession

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"github.com/pilotworkers/pilot"
	"io"
	"io/fs"
	"os"
	"strconv"
	"unicode/utf8"
)

// This file reads pi's native session file (a JSONL tree of entries, format
// version 3) and says which phase the worker is in. Everything here is pure
// except Tail.Update and ParseFile, which read a file.
//
// How a file is read:
//
//   - Lines end at "\n". A last line with no "\n" yet is torn (pi is
//     appending it) and is ignored until its "\n" arrives; it is never
//     corrupt. Lines of only spaces, tabs and "\r" are skipped. A line may
//     be any length.
//   - The first line must be the header {"type":"session","id":"…",
//     "version":N}. A missing version means 1. Versions 1 to 3 are read;
//     a higher one gives unknown "unsupported-session-version:N".
//   - Versions 2 and 3 are a tree: every entry has an "id" and a "parentId"
//     (null for a root). The last entry in the file is the current leaf and
//     the active branch is its chain of parents; entries on other branches
//     do not count. A parentId that names no earlier entry makes the entry
//     a root, as pi treats orphans; when ids repeat, a parentId means the
//     latest earlier entry with that id. A later "session" line is skipped,
//     as pi skips it.
//   - Version 1 files (pi before the tree) have no ids: the file order is
//     the branch, and ids are not checked.
//   - pilot does not guess about a file it cannot fully read. The first
//     complete line that is not valid UTF-8 or not valid JSON, or that breaks
//     the schema (no header, an entry without an id, an id without a
//     parentId key), makes the state unknown for the rest of the file
//     (pi itself would skip a malformed line). Unknown gets the
//     conservative tool threshold, so such a worker is ended only after a
//     long silence.

// JSON contract. ReasonUnsupportedSessionVersion is a prefix: the reason is
// "unsupported-session-version:N".
const (
	// Starting.
	ReasonNoSessionFile  = "no-session-file"  // the file does not exist (yet)
	ReasonNoCompleteLine = "no-complete-line" // the file holds no complete line
	ReasonHeaderOnly     = "header-only"      // the header and nothing else
	ReasonNoMessages     = "no-messages"      // entries, but no user, assistant or tool result on the branch

	// Awaiting the model.
	ReasonUserMessage            = "user-message"              // the branch's newest message is the user's
	ReasonAllToolResultsRecorded = "all-tool-results-recorded" // every tool call of the last assistant message has its result

	// Tool running.
	ReasonToolResultsPending = "tool-results-pending"

	// Finished and errored.
	ReasonFinalAssistantMessage = "final-assistant-message"
	ReasonAssistantError        = "assistant-error"

	// Unknown: the branch.
	ReasonToolResultIDMissing         = "tool-result-id-missing"        // a tool result with no toolCallId
	ReasonToolResultIDUnmatched       = "tool-result-id-unmatched"      // a tool result for no call of the last assistant message
	ReasonToolCallIDMissing           = "tool-call-id-missing"          // a toolCall block with no id
	ReasonUnsupportedAssistantContent = "unsupported-assistant-content" // a content block pilot does not know
	ReasonUnsupportedMessageRole      = "unsupported-message-role"      // after the last assistant message
	ReasonUnsupportedStopReason       = "unsupported-stop-reason"
	ReasonStopReasonMissing           = "stop-reason-missing"         // no tool calls and no stopReason
	ReasonToolUseWithoutToolCalls     = "tool-use-without-tool-calls" // stopReason "toolUse" but no toolCall block

	// Unknown: the file (these hold for the rest of the file).
	ReasonUnsupportedSessionVersion = "unsupported-session-version:"
	ReasonCorruptEntry              = "corrupt-entry"          // invalid UTF-8 or JSON, or a field of the wrong type
	ReasonMissingParent             = "missing-parent"         // an entry with an id but no parentId key
	ReasonMissingID                 = "missing-id"             // an entry with no id (version 2 and later)
	ReasonMissingSessionHeader      = "missing-session-header" // the first line is not a session header
)

// Version is the newest pi session format version pilot reads.
const Version = 3

func piState(phase pilot.SessionPhase, reason string) pilot.SessionState {
	return pilot.SessionState{
		Phase:                phase,
		Reason:               reason,
		ExpectedToolCallIDs:  []string{},
		CompletedToolCallIDs: []string{},
		PendingToolCallIDs:   []string{},
	}
}

// Parse reads a whole pi session file and returns the phase of its
// active branch. A torn last line (no "\n" yet) is ignored. The error is
// only ever r's: what the file says, however broken, is a state.
func Parse(r io.Reader) (pilot.SessionState, error) {
	var x Index
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		x.Feed(buf[:n])
		if err == io.EOF {
			return x.State(), nil
		}
		if err != nil {
			return x.State(), err
		}
	}
}

// ParseFile is Parse on the file at path. A file that does
// not exist is not an error: pi has not written it yet, and the state is
// starting with reason "no-session-file".
func ParseFile(path string) (pilot.SessionState, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return piState(pilot.PhaseStarting, ReasonNoSessionFile), nil
	}
	if err != nil {
		return pilot.SessionState{}, err
	}
	defer f.Close()
	return Parse(f)
}

// Index is the incremental core of the session reader: Feed it a
// session file's bytes in order, in pieces of any size, and State gives what
// Parse would give for everything fed up to the last complete
// line. It keeps a compact index, never message contents: per entry its id
// and a small, shared summary of its branch (the last assistant message's
// tool call ids, stop reason and error message, which of those calls have
// results, and the kind of the newest message), so that Feed costs time in
// proportion to the bytes fed and State does not walk the tree. The zero
// value is an empty index.
type Index struct {
	partial []byte // a line without its "\n" yet
	header  bool
	version int
	fatal   string               // a file-level unknown reason; nothing more is read
	byID    map[string]*piBranch // versions 2 and 3
	leaf    *piBranch
	leafID  string
	entries int

	scan piScan // reused between lines
}

// Reset empties the index, as for a file that was truncated or replaced.
func (x *Index) Reset() { *x = Index{} }

// Feed adds the next bytes of the file.
func (x *Index) Feed(p []byte) {
	for len(p) > 0 {
		if x.fatal != "" {
			x.partial = nil
			return
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			x.keep(p)
			return
		}
		if len(x.partial) > 0 {
			x.keep(p[:i])
			x.line(x.partial)
			if cap(x.partial) > 1<<20 {
				x.partial = nil // do not keep a huge line's buffer
			} else {
				x.partial = x.partial[:0]
			}
		} else {
			x.line(p[:i])
		}
		p = p[i+1:]
	}
}

// keep appends p to the partial line, doubling the buffer as it grows (a
// long line arrives in many pieces; append's gentler growth would copy it
// several times over).
func (x *Index) keep(p []byte) {
	if n := len(x.partial) + len(p); n > cap(x.partial) {
		buf := make([]byte, len(x.partial), max(n, 2*cap(x.partial), 4096))
		copy(buf, x.partial)
		x.partial = buf
	}
	x.partial = append(x.partial, p...)
}

// State returns the phase of the active branch of what was fed up to its
// last complete line.
func (x *Index) State() pilot.SessionState {
	switch {
	case x.fatal != "":
		s := piState(pilot.PhaseUnknown, x.fatal)
		s.Version = x.version
		return s
	case !x.header:
		return piState(pilot.PhaseStarting, ReasonNoCompleteLine)
	case x.entries == 0:
		s := piState(pilot.PhaseStarting, ReasonHeaderOnly)
		s.Version = x.version
		return s
	}
	s := x.leaf.state()
	s.Version = x.version
	s.LeafID = x.leafID
	return s
}

// line takes one complete line, without its "\n".
func (x *Index) line(l []byte) {
	if len(bytes.Trim(l, " \t\r")) == 0 {
		return
	}
	e := &x.scan
	ok := utf8.Valid(l) && e.entry(l)
	e.b = nil // do not keep the caller's buffer
	if !ok {
		x.fatal = ReasonCorruptEntry
		return
	}
	if !x.header {
		x.readHeader(e)
		return
	}
	if e.typ == "session" {
		return // pi skips a later header, so does pilot
	}
	if e.typBad || e.typ == "" {
		x.fatal = ReasonCorruptEntry
		return
	}
	var parent *piBranch
	var id string
	if x.version >= 2 {
		switch e.id.kind {
		case jsAbsent:
			x.fatal = ReasonMissingID
			return
		case jsString:
			id = e.id.str
		default:
			x.fatal = ReasonCorruptEntry
			return
		}
		switch e.parent.kind {
		case jsAbsent:
			x.fatal = ReasonMissingParent
			return
		case jsNull:
		case jsString:
			parent = x.byID[e.parent.str] // nil: a root, or an orphan
		default:
			x.fatal = ReasonCorruptEntry
			return
		}
	} else {
		parent = x.leaf
		if e.id.kind == jsString {
			id = e.id.str
		}
	}
	b := parent
	if e.typ == "message" {
		if !e.msg {
			x.fatal = ReasonCorruptEntry
			return
		}
		if e.role.kind != jsString {
			x.fatal = ReasonCorruptEntry
			return
		}
		b = parent.step(e)
	}
	if x.version >= 2 {
		if x.byID == nil {
			x.byID = make(map[string]*piBranch)
		}
		x.byID[id] = b
	}
	x.leaf = b
	x.leafID = id
	x.entries++
}

func (x *Index) readHeader(e *piScan) {
	x.header = true
	if e.typBad || e.typ != "session" || e.id.kind != jsString {
		x.fatal = ReasonMissingSessionHeader
		return
	}
	switch e.version.kind {
	case jsAbsent, jsNull:
		x.version = 1
		return
	case jsNumber:
		if v, err := strconv.Atoi(e.version.str); err == nil {
			x.version = v
			if v >= 1 && v <= Version {
				return
			}
		}
	}
	var raw string
	switch e.version.kind {
	case jsNumber:
		raw = e.version.str
	case jsString:
		raw = strconv.QuoteToASCII(e.version.str)
	default:
		raw = "invalid"
	}
	if len(raw) > 32 {
		raw = raw[:32]
	}
	x.fatal = ReasonUnsupportedSessionVersion + raw
}

// A piBranch summarises the active branch that ends at one entry. It is
// never changed once made: entries that do not change the summary share
// their parent's, so the index costs a pointer per entry plus one small
// summary per message.
type piBranch struct {
	asst  *piAssistant // the newest assistant message; nil if none
	done  []uint64     // which of asst.calls have a result after it
	nDone int
	bad   string // the first problem after asst: an unknown reason
	last  piConv // the kind of the newest conversation message
}

type piConv uint8

const (
	piConvNone piConv = iota
	piConvUser
	piConvAssistant
	piConvToolResult
)

type piAssistant struct {
	calls  []string       // toolCall ids, first occurrence of each
	pos    map[string]int // index of calls, when there are many
	stop   string
	stopOK bool // stopReason is absent, null or a string
	errMsg string
	bad    string // unsupported content or a call without an id
}

func (a *piAssistant) index(id string) int {
	if a.pos != nil {
		if i, ok := a.pos[id]; ok {
			return i
		}
		return -1
	}
	for i, c := range a.calls {
		if c == id {
			return i
		}
	}
	return -1
}

// step is the branch summary after message e, whose parent's summary is b
// (nil for a root).
func (b *piBranch) step(e *piScan) *piBranch {
	var nb piBranch
	if b != nil {
		nb = *b
	}
	switch e.role.str {
	case "user":
		nb.last = piConvUser
	case "assistant":
		return &piBranch{asst: e.assistant(), last: piConvAssistant}
	case "toolResult":
		nb.last = piConvToolResult
		if nb.bad != "" {
			break
		}
		if e.toolCallID.kind != jsString || e.toolCallID.str == "" {
			nb.bad = ReasonToolResultIDMissing
			break
		}
		i := -1
		if nb.asst != nil {
			i = nb.asst.index(e.toolCallID.str)
		}
		if i < 0 {
			nb.bad = ReasonToolResultIDUnmatched
			break
		}
		if nb.done == nil || nb.done[i/64]&(1<<(i%64)) == 0 {
			done := make([]uint64, (len(nb.asst.calls)+63)/64)
			copy(done, nb.done)
			done[i/64] |= 1 << (i % 64)
			nb.done = done
			nb.nDone++
		}
	case "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary", "system":
		// Not part of the model/tool exchange: walked past. pi 1.x
		// records the system prompt as a "system" message (content "",
		// its parts in "sections") before the first user message.
		return b
	default:
		if nb.bad != "" {
			return b
		}
		nb.bad = ReasonUnsupportedMessageRole
	}
	return &nb
}

// state is the phase the summary gives (b may be nil: no messages).
func (b *piBranch) state() pilot.SessionState {
	if b == nil || b.bad == "" && b.last == piConvNone {
		return piState(pilot.PhaseStarting, ReasonNoMessages)
	}
	if b.bad == "" && b.last == piConvUser {
		return piState(pilot.PhaseAwaitingModel, ReasonUserMessage)
	}
	s := piState(pilot.PhaseUnknown, b.bad)
	a := b.asst
	if a == nil {
		return s
	}
	s.StopReason, s.ErrorMessage = a.stop, a.errMsg
	switch {
	case b.bad != "":
	case a.bad != "":
		s.Reason = a.bad
	case a.stopOK && (a.stop == "error" || a.stop == "aborted"):
		// pi never runs the tool calls of a failed message: no lists.
		s.Phase, s.Reason = pilot.PhaseErrored, ReasonAssistantError
		return s
	case len(a.calls) > 0:
		// pi runs the tool calls of any message that did not fail,
		// whatever its stopReason ("toolUse", or "length", whose calls
		// it answers with error results); so results are expected.
		if b.nDone == len(a.calls) {
			s.Phase, s.Reason = pilot.PhaseAwaitingModel, ReasonAllToolResultsRecorded
		} else {
			s.Phase, s.Reason = pilot.PhaseToolRunning, ReasonToolResultsPending
		}
	case !a.stopOK:
		s.Reason = ReasonUnsupportedStopReason
	case a.stop == "stop" || a.stop == "length":
		s.Phase, s.Reason = pilot.PhaseFinished, ReasonFinalAssistantMessage
	case a.stop == "toolUse":
		s.Reason = ReasonToolUseWithoutToolCalls
	case a.stop == "":
		s.Reason = ReasonStopReasonMissing
	default:
		s.Reason = ReasonUnsupportedStopReason
	}
	for i, id := range a.calls {
		s.ExpectedToolCallIDs = append(s.ExpectedToolCallIDs, id)
		if b.done != nil && b.done[i/64]&(1<<(i%64)) != 0 {
			s.CompletedToolCallIDs = append(s.CompletedToolCallIDs, id)
		} else {
			s.PendingToolCallIDs = append(s.PendingToolCallIDs, id)
		}
	}
	return s
}

// Tail follows a pi session file that is being appended to: each
// Update reads only the bytes added since the last one and returns the
// state Parse would give for the whole file. It starts over when
// the file is truncated (it shrank), replaced (another inode or device) or
// rewritten in place (its first bytes changed, as when pi migrates or
// re-creates a file). A file that does not exist gives starting with reason
// "no-session-file".
//
// An Update costs an open, a stat, a read of the file's first 256 bytes
// and a read of what was appended, whatever the file's size. Memory is the
// index (about a hundred bytes per entry) plus, while a line is incomplete
// or being read, that line. Set Path before the first Update and do not
// change it; a Tail is for one goroutine at a time.
type Tail struct {
	Path string

	x      Index
	off    int64       // bytes of the file fed to x
	fi     os.FileInfo // the file as last seen
	prefix []byte      // its first bytes, to notice a rewrite
	buf    []byte
}

const piTailPrefix = 256

// Update reads what was appended since the last call. On an error the
// returned state is that of what was read before it.
func (t *Tail) Update() (pilot.SessionState, error) {
	f, err := os.Open(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		t.restart()
		return piState(pilot.PhaseStarting, ReasonNoSessionFile), nil
	}
	if err != nil {
		return t.x.State(), err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return t.x.State(), err
	}
	if t.fi != nil && (!os.SameFile(fi, t.fi) || fi.Size() < t.off) {
		t.restart()
	}
	if len(t.prefix) > 0 {
		if t.buf == nil {
			t.buf = make([]byte, 64<<10)
		}
		p := t.buf[:len(t.prefix)]
		if n, err := f.ReadAt(p, 0); n < len(p) || !bytes.Equal(p, t.prefix) {
			if n < len(p) && err != nil && err != io.EOF {
				return t.x.State(), err
			}
			t.restart()
		}
	}
	t.fi = fi
	if t.buf == nil {
		t.buf = make([]byte, 64<<10)
	}
	for {
		n, err := f.ReadAt(t.buf, t.off)
		if n > 0 {
			if t.off < piTailPrefix {
				k := min(int64(n), piTailPrefix-t.off)
				t.prefix = append(t.prefix, t.buf[:k]...)
			}
			t.x.Feed(t.buf[:n])
			t.off += int64(n)
		}
		if err == io.EOF {
			return t.x.State(), nil
		}
		if err != nil {
			return t.x.State(), err
		}
	}
}

func (t *Tail) restart() {
	t.x.Reset()
	t.off = 0
	t.fi = nil
	t.prefix = t.prefix[:0]
}

// ---- a validating JSON skimmer ----
//
// piScan checks that a line is exactly one valid JSON value (as
// encoding/json's Valid does, including its nesting limit) and, in the same
// pass, picks out the few fields the phase needs. Keys match exactly and a
// repeated key's last value wins, as in JSON.parse. It never copies a value
// it does not keep; skipping a large string costs a memchr.

type jsKind uint8

const (
	jsAbsent jsKind = iota
	jsNull
	jsString
	jsNumber
	jsOther // bool, object or array
)

type jsField struct {
	kind jsKind
	str  string // the string, or a number's literal text
}

// piBlock is one assistant content block.
type piBlock struct {
	typ   jsField
	id    jsField
	isObj bool
}

type piScan struct {
	b     []byte
	i     int
	depth int
	bad   bool

	// The entry.
	typ     string
	typBad  bool
	id      jsField
	parent  jsField
	version jsField
	msg     bool // "message" is an object

	// Its message.
	role       jsField
	toolCallID jsField
	stopReason jsField
	errMsg     jsField
	content    jsKind // jsAbsent, jsNull, jsOther for an array; jsString etc. otherwise
	contentArr bool
	blocks     []piBlock
}

const jsMaxDepth = 10000 // encoding/json's limit

// entry scans line l. It reports false when l is not exactly one valid
// JSON object.
func (s *piScan) entry(l []byte) bool {
	blocks := s.blocks[:0]
	*s = piScan{b: l, blocks: blocks}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.object(s.entryKey)
	s.ws()
	return !s.bad && s.i == len(s.b)
}

func (s *piScan) entryKey(key string) {
	switch key {
	case "type":
		f := s.field()
		s.typ, s.typBad = f.str, f.kind != jsString
	case "id":
		s.id = s.field()
	case "parentId":
		s.parent = s.field()
	case "version":
		s.version = s.field()
	case "message":
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '{' {
			s.msg = true
			s.role, s.toolCallID, s.stopReason, s.errMsg = jsField{}, jsField{}, jsField{}, jsField{}
			s.content, s.contentArr, s.blocks = jsAbsent, false, s.blocks[:0]
			s.object(s.messageKey)
		} else {
			s.msg = false
			s.value()
		}
	default:
		s.value()
	}
}

func (s *piScan) messageKey(key string) {
	switch key {
	case "role":
		s.role = s.field()
	case "toolCallId":
		s.toolCallID = s.field()
	case "stopReason":
		s.stopReason = s.field()
	case "errorMessage":
		s.errMsg = s.field()
	case "content":
		s.ws()
		s.blocks = s.blocks[:0]
		if s.i < len(s.b) && s.b[s.i] == '[' {
			s.content, s.contentArr = jsOther, true
			s.array(s.contentElem)
		} else {
			f := s.field()
			s.content, s.contentArr = f.kind, false
		}
	default:
		s.value()
	}
}

func (s *piScan) contentElem() {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '{' {
		s.blocks = append(s.blocks, piBlock{isObj: true})
		k := len(s.blocks) - 1
		s.object(func(key string) {
			switch key {
			case "type":
				s.blocks[k].typ = s.field()
			case "id":
				s.blocks[k].id = s.field()
			default:
				s.value()
			}
		})
		return
	}
	s.blocks = append(s.blocks, piBlock{})
	s.value()
}

// assistant summarises the scanned assistant message.
func (s *piScan) assistant() *piAssistant {
	a := &piAssistant{}
	switch s.stopReason.kind {
	case jsAbsent, jsNull:
		a.stopOK = true
	case jsString:
		a.stop, a.stopOK = s.stopReason.str, true
	}
	if s.errMsg.kind == jsString {
		a.errMsg = s.errMsg.str
	}
	switch {
	case s.content == jsAbsent || s.content == jsNull:
	case !s.contentArr:
		a.bad = ReasonUnsupportedAssistantContent
	}
	for _, bl := range s.blocks {
		if a.bad != "" {
			break
		}
		if !bl.isObj || bl.typ.kind != jsString {
			a.bad = ReasonUnsupportedAssistantContent
			break
		}
		switch bl.typ.str {
		case "text", "thinking":
		case "toolCall":
			if bl.id.kind != jsString || bl.id.str == "" {
				a.bad = ReasonToolCallIDMissing
				break
			}
			if a.index(bl.id.str) < 0 {
				a.calls = append(a.calls, bl.id.str)
				if len(a.calls) > 16 {
					if a.pos == nil {
						a.pos = make(map[string]int, len(a.calls))
						for i, c := range a.calls {
							a.pos[c] = i
						}
					} else {
						a.pos[bl.id.str] = len(a.calls) - 1
					}
				}
			}
		default:
			a.bad = ReasonUnsupportedAssistantContent
		}
	}
	if a.bad != "" {
		a.calls, a.pos = nil, nil
	}
	return a
}

func (s *piScan) fail() {
	if !s.bad {
		s.bad = true
		s.i = len(s.b)
	}
}

func (s *piScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// field reads a value, keeping it if it is a string or a number.
func (s *piScan) field() jsField {
	s.ws()
	if s.i >= len(s.b) {
		s.fail()
		return jsField{}
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return jsField{kind: jsString, str: s.str()}
	case c == 'n':
		s.value()
		return jsField{kind: jsNull}
	case c == '-' || c >= '0' && c <= '9':
		start := s.i
		s.number()
		return jsField{kind: jsNumber, str: string(s.b[start:s.i])}
	default:
		s.value()
		return jsField{kind: jsOther}
	}
}

// value checks and skips one value.
func (s *piScan) value() {
	s.ws()
	if s.i >= len(s.b) {
		s.fail()
		return
	}
	switch c := s.b[s.i]; {
	case c == '"':
		s.skipStr()
	case c == '{':
		s.object(func(string) { s.value() })
	case c == '[':
		s.array(s.value)
	case c == 't':
		s.lit("true")
	case c == 'f':
		s.lit("false")
	case c == 'n':
		s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		s.number()
	default:
		s.fail()
	}
}

func (s *piScan) lit(w string) {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		s.fail()
		return
	}
	s.i += len(w)
}

func (s *piScan) number() {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		s.fail()
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.fail()
			return
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			s.fail()
			return
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
}

// object checks an object at s.i, calling member for each key with s.i
// just after the ':'; member must consume the value.
func (s *piScan) object(member func(key string)) {
	if !s.enter('}') {
		return
	}
	for !s.bad {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			s.fail()
			return
		}
		key := s.key()
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			s.fail()
			return
		}
		s.i++
		member(key)
		if s.bad || s.next('}') {
			return
		}
	}
}

func (s *piScan) array(elem func()) {
	if !s.enter(']') {
		return
	}
	for !s.bad {
		elem()
		if s.bad || s.next(']') {
			return
		}
	}
}

// enter steps into the object or array at s.i, whose closing byte is
// closing, and reports whether it has members to read: false when it is
// empty (then s.i is past it) or nested too deep (a failure).
func (s *piScan) enter(closing byte) bool {
	s.depth++
	if s.depth > jsMaxDepth {
		s.fail()
		return false
	}
	s.i++ // the opening byte
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		s.depth--
		return false
	}
	return true
}

// next reads what follows a member or element: a ',' (false: another
// comes) or the container's closing byte (true: it ended). Anything else
// is a failure, which also ends it.
func (s *piScan) next(closing byte) bool {
	s.ws()
	switch {
	case s.i >= len(s.b):
		s.fail()
		return true
	case s.b[s.i] == ',':
		s.i++
		return false
	case s.b[s.i] == closing:
		s.i++
		s.depth--
		return true
	}
	s.fail()
	return true
}

// key reads an object key. Only the keys pilot looks for are kept; others
// come back as "", which matches none of them.
func (s *piScan) key() string {
	start := s.i
	esc := s.skipStr()
	if s.bad {
		return ""
	}
	raw := s.b[start+1 : s.i-1]
	if esc {
		return s.unescape(s.b[start:s.i])
	}
	switch string(raw) { // no allocation
	case "type":
		return "type"
	case "id":
		return "id"
	case "parentId":
		return "parentId"
	case "version":
		return "version"
	case "message":
		return "message"
	case "role":
		return "role"
	case "toolCallId":
		return "toolCallId"
	case "stopReason":
		return "stopReason"
	case "errorMessage":
		return "errorMessage"
	case "content":
		return "content"
	}
	return ""
}

// str reads a string value.
func (s *piScan) str() string {
	start := s.i
	esc := s.skipStr()
	if s.bad {
		return ""
	}
	if esc {
		return s.unescape(s.b[start:s.i])
	}
	raw := s.b[start+1 : s.i-1]
	switch string(raw) { // common values, without allocating
	case "message":
		return "message"
	case "session":
		return "session"
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "toolResult":
		return "toolResult"
	case "text":
		return "text"
	case "thinking":
		return "thinking"
	case "toolCall":
		return "toolCall"
	case "stop":
		return "stop"
	case "toolUse":
		return "toolUse"
	}
	return string(raw)
}

// unescape decodes a quoted string with escapes exactly as encoding/json
// does (bad surrogates become U+FFFD).
func (s *piScan) unescape(quoted []byte) string {
	var v string
	if err := json.Unmarshal(quoted, &v); err != nil {
		s.fail()
	}
	return v
}

// skipStr checks and skips the string at s.i and reports whether it has
// escapes. Every byte is looked at once: the next quote and the next
// backslash are found with memchr and the runs between them are checked
// for control characters eight bytes at a time.
func (s *piScan) skipStr() (esc bool) {
	b := s.b
	i := s.i + 1
	q := -1 // absolute index of the next '"' at or after i, when known
	for {
		if q < i {
			j := bytes.IndexByte(b[i:], '"')
			if j < 0 {
				s.fail()
				return esc
			}
			q = i + j
		}
		k := bytes.IndexByte(b[i:q], '\\')
		if k < 0 {
			if jsHasCtl(b[i:q]) {
				s.fail()
				return esc
			}
			s.i = q + 1
			return esc
		}
		if jsHasCtl(b[i : i+k]) {
			s.fail()
			return esc
		}
		esc = true
		p := i + k + 1 // the escaped character
		if p >= len(b) {
			s.fail()
			return esc
		}
		switch b[p] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i = p + 1
		case 'u':
			if p+5 > len(b) || !jsHex(b[p+1]) || !jsHex(b[p+2]) || !jsHex(b[p+3]) || !jsHex(b[p+4]) {
				s.fail()
				return esc
			}
			i = p + 5
		default:
			s.fail()
			return esc
		}
	}
}

func jsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// jsHasCtl reports whether p holds a byte below 0x20.
func jsHasCtl(p []byte) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		// A byte c < 0x20 makes (c - 0x20) borrow into its top bit while
		// c's own top bit is clear.
		if (x-0x20*lo)&^x&hi != 0 {
			return true
		}
		p = p[8:]
	}
	for _, c := range p {
		if c < 0x20 {
			return true
		}
	}
	return false
}
