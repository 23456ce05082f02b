package supervise

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// frameMsgs are messages of every op, as the client and supervisor send
// them.
var frameMsgs = []*msg{
	{
		Op:      opStart,
		ID:      1,
		Path:    "/usr/bin/agent",
		Argv:    []string{"agent", "--model", "glm-5", "/tmp/run 1/task.md"},
		Env:     []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "PILOT_COOKIE=abc", "EMPTY="},
		Dir:     "/work/tree",
		Cookie:  "PILOT_COOKIE=abc",
		GraceMS: 2500,
	},
	{Op: opSignal, ID: 1, Sig: 15},
	{Op: opStarted, ID: 1, Pid: 4242},
	{Op: opStarted, ID: 2, Err: "fork/exec /nope: no such file or directory"},
	{Op: opExited, ID: 1, Status: 0x8b00},
	{Op: opDone, ID: 1, Leftovers: 3},
	{Op: opDone, ID: 1<<64 - 1, Pid: 1<<31 - 1, Status: 1<<32 - 1, GraceMS: -1, Sig: -9},
	{Op: opStart, ID: 3, Argv: []string{"", "ünïcödé ✓", "quote \" backslash \\ nul \x00 <html>&", "new\nline\ttab"}},
	{Op: opStart, ID: 4, Argv: []string{strings.Repeat("x", 1<<20)}},
	{Op: opStart, ID: 5, Path: "/tmp/latin1-\xe9", Argv: []string{"\xff\xfe not UTF-8"}, Env: []string{"K=\xc3"}, Dir: "/d\x80", Cookie: "C=\xff"},
	{},
}

func TestFrameRoundTrip(t *testing.T) {
	for _, m := range frameMsgs {
		frame, err := encodeFrame(m)
		if err != nil {
			t.Fatalf("encodeFrame(%+v): %v", m.Op, err)
		}
		if n := binary.BigEndian.Uint32(frame); int(n) != len(frame)-4 {
			t.Errorf("op %q: header says %d bytes; the body has %d", m.Op, n, len(frame)-4)
		}
		r := bytes.NewReader(frame)
		got, err := readFrame(r)
		if err != nil {
			t.Fatalf("readFrame(encodeFrame(op %q)): %v", m.Op, err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Errorf("op %q: round trip mismatch (-want +got):\n%s", m.Op, diff)
		}
		if r.Len() != 0 {
			t.Errorf("op %q: readFrame left %d bytes of its frame unread", m.Op, r.Len())
		}
	}
}

// TestFrameStream checks that frames sent back to back are read one at a
// time, in order, without reading into the next.
func TestFrameStream(t *testing.T) {
	var stream []byte
	for _, m := range frameMsgs {
		frame, err := encodeFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, frame...)
	}
	r := bytes.NewReader(stream)
	var got []*msg
	for {
		m, err := readFrame(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("readFrame after %d frames: %v", len(got), err)
		}
		got = append(got, m)
	}
	if diff := cmp.Diff(frameMsgs, got); diff != "" {
		t.Errorf("stream mismatch (-want +got):\n%s", diff)
	}
}

// header returns a frame header claiming n body bytes.
func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		// wantIs, when set, is what the error must match; wantAs, when
		// set, is a pointer to the error type it must contain.
		wantIs error
		wantAs any
	}{
		{name: "no input", input: nil, wantIs: io.EOF},
		{name: "partial header", input: []byte{0, 0}, wantIs: io.ErrUnexpectedEOF},
		{name: "header without body", input: header(5), wantIs: io.ErrUnexpectedEOF},
		{name: "short body", input: append(header(10), `{"op"`...), wantIs: io.ErrUnexpectedEOF},
		{name: "empty body", input: header(0), wantAs: new(*json.SyntaxError)},
		{name: "body not JSON", input: append(header(3), "op!"...), wantAs: new(*json.SyntaxError)},
		{name: "body cut inside JSON", input: append(header(5), `{"op"`...), wantAs: new(*json.SyntaxError)},
		{name: "trailing data in body", input: append(header(4), `{} x`...), wantAs: new(*json.SyntaxError)},
		{name: "wrong field type", input: append(header(8), `{"op":1}`...), wantAs: new(*json.UnmarshalTypeError)},
		{name: "negative id", input: append(header(9), `{"id":-1}`...), wantAs: new(*json.UnmarshalTypeError)},
		{name: "one over the limit", input: header(maxFrame + 1)},
		{name: "2^31", input: header(1 << 31)},
		{name: "largest header", input: header(1<<32 - 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := readFrame(bytes.NewReader(tt.input))
			if err == nil {
				t.Fatalf("readFrame = %+v, nil; want an error", m)
			}
			if m != nil {
				t.Errorf("readFrame returned %+v with error %v; want nil", m, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("readFrame error = %v; want one matching %v", err, tt.wantIs)
			}
			if tt.wantAs != nil && !errors.As(err, tt.wantAs) {
				t.Errorf("readFrame error = %v (%T); want one containing %T", err, err, tt.wantAs)
			}
		})
	}
}

// headerOnly yields a frame header and then fails the test if anything
// reads further: the body of an oversized frame must not be read.
type headerOnly struct {
	t   *testing.T
	hdr []byte
}

func (r *headerOnly) Read(p []byte) (int, error) {
	if len(r.hdr) == 0 {
		r.t.Errorf("readFrame read past the header of an oversized frame")
		return 0, io.ErrNoProgress
	}
	n := copy(p, r.hdr)
	r.hdr = r.hdr[n:]
	return n, nil
}

// TestReadFrameOversizedAllocatesNothing checks that a header claiming more
// than maxFrame is rejected from the header alone: no body is read and no
// body buffer allocated. It measures the heap, so it must not run in
// parallel with other tests.
func TestReadFrameOversizedAllocatesNothing(t *testing.T) {
	for _, n := range []uint32{maxFrame + 1, 1 << 31, 1<<32 - 1} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := readFrame(&headerOnly{t: t, hdr: header(n)})
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("header claiming %d bytes: readFrame = %+v, nil; want an error", n, m)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("header claiming %d bytes: readFrame allocated %d bytes; want it to reject the frame before allocating", n, alloc)
		}
	}
}

// TestReadFrameLimit checks the boundary: a header claiming exactly
// maxFrame bytes is accepted, so readFrame goes on to read the body (here
// too short, which it reports as io.ErrUnexpectedEOF), while one byte more
// is rejected from the header alone.
func TestReadFrameLimit(t *testing.T) {
	_, err := readFrame(bytes.NewReader(append(header(maxFrame), `{"op":"start"}`...)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("header of exactly maxFrame with a short body: readFrame error = %v; want io.ErrUnexpectedEOF", err)
	}
	_, err = readFrame(&headerOnly{t: t, hdr: header(maxFrame + 1)})
	if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("header of maxFrame+1: readFrame error = %v; want the frame rejected as too large", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, m := range frameMsgs[:len(frameMsgs)-2] {
		frame, err := encodeFrame(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Add(header(0))
	f.Add(append(header(2), "{}"...))
	f.Add(append(header(4), "null"...))
	f.Add(append(header(8), `{"op":1}`...))
	f.Add(append(header(30), `{"op":"start","argv":["a","b"]}`...))
	f.Add(append(header(30), `{"op":"start","argv":["\xff\xfe"]}`...))
	f.Add(header(maxFrame + 1))
	f.Add(header(1 << 31))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		m, err := readFrame(r)
		consumed := len(data) - r.Len()
		if len(data) >= 4 {
			if n := binary.BigEndian.Uint32(data); n > maxFrame {
				if err == nil {
					t.Fatalf("header claims %d bytes, over the limit, and readFrame accepted it", n)
				}
				if consumed != 4 {
					t.Fatalf("header claims %d bytes, over the limit; readFrame read %d bytes; want only the 4 of the header", n, consumed)
				}
			}
		}
		if err != nil {
			if m != nil {
				t.Fatalf("readFrame returned %+v with error %v", m, err)
			}
			return
		}
		// A frame read is exactly its header and body.
		if want := 4 + int(binary.BigEndian.Uint32(data)); consumed != want {
			t.Fatalf("readFrame consumed %d bytes; the frame has %d", consumed, want)
		}
		// What was read encodes to a frame that reads back the same.
		frame, err := encodeFrame(m)
		if err != nil {
			return // re-encoding may grow the body past the limit
		}
		again, err := readFrame(bytes.NewReader(frame))
		if err != nil {
			t.Fatalf("readFrame(encodeFrame(%+v)): %v", m, err)
		}
		if diff := cmp.Diff(m, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("re-encoded frame mismatch (-want +got):\n%s", diff)
		}
	})
}
