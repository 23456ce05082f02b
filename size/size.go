// Package size is memory as pilot counts it: an amount (Bytes), as its
// limits and budgets take it, a number of bytes that reads and writes
// itself as "2GiB" in JSON (a providers file's "memory_limit") and on
// command lines; and what a worker's process tree was seen to hold (Tree,
// with the Process that held the most).
package size

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes is an amount of memory, in bytes. In JSON (a providers file's
// "memory_limit") and on command lines it is a number of bytes or a
// number with a unit, as [Parse] reads it: "2GiB", "512MiB".
type Bytes int64

// Units of Bytes.
const (
	KiB Bytes = 1 << (10 * (iota + 1))
	MiB
	GiB
	TiB
)

// errBytesSyntax is what a size that is not one gets told.
const errBytesSyntax = `want a number of bytes, or a number and a unit: KiB, MiB, GiB, TiB (also K, M, G, T), or KB, MB, GB, TB (powers of 1000), like "2GiB"`

// Parse reads a size: a non-negative number of bytes ("1048576"), or a
// number (a fraction is allowed) and a unit, in any case, spaces allowed
// between: KiB, MiB, GiB and TiB, and K, M, G, T for the same, are powers
// of 1024; KB, MB, GB and TB powers of 1000; B is bytes. Its errors name
// the size and what it wants.
func Parse(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q: %s", s, errBytesSyntax)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return Bytes(n * mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %s", s, errBytesSyntax)
	}
	if f*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Bytes(f * float64(mult)), nil
}

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// String is b in the largest binary unit that holds it exactly ("2GiB",
// "1536MiB", "100B"), which Parse reads back.
func (b Bytes) String() string {
	for _, u := range []struct {
		n    Bytes
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b != 0 && b%u.n == 0 {
			return strconv.FormatInt(int64(b/u.n), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// Approx is b for people, to a tenth of its unit: "312.4MiB".
func (b Bytes) Approx() string {
	for _, u := range []struct {
		n    Bytes
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b >= u.n || -b >= u.n {
			return strconv.FormatFloat(float64(b)/float64(u.n), 'f', 1, 64) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalJSON writes b as String does.
func (b Bytes) MarshalJSON() ([]byte, error) { return json.Marshal(b.String()) }

// UnmarshalJSON reads a number of bytes or a string Parse reads.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var n int64
	if err := json.Unmarshal(data, &n); err == nil {
		if n < 0 {
			return fmt.Errorf("size %d is negative: %s", n, errBytesSyntax)
		}
		*b = Bytes(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("size %s: %s", data, errBytesSyntax)
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Tree is one look at the resident memory of a worker's process tree:
// the worker and every descendant pilot's supervisor holds (an event's
// Memory, a verdict's peak).
type Tree struct {
	// RSSBytes is the sum of the processes' resident memory.
	RSSBytes  int64 `json:"rss_bytes"`
	Processes int   `json:"processes"`
	// Top is the process that held the most.
	Top Process `json:"top"`
}

// Process is one process of a worker's tree and the resident memory it
// held.
type Process struct {
	Pid int `json:"pid"`
	// Command is its command name as the kernel keeps it (comm: at most
	// 15 bytes, "node", "claude").
	Command  string `json:"command"`
	RSSBytes int64  `json:"rss_bytes"`
}
