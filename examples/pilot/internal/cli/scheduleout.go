package cli

import (
	"encoding/json"
	"fmt"
	"time"
)

// limit is a graph job's timeout or idle_timeout as the file gives it: a
// number of seconds (90, 1.5) or a string --timeout takes ("30s", "5m",
// "90"); loadGraph checks it.
type limit string

func (l *limit) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = limit(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("timeout and idle_timeout take a number of seconds or a duration such as \"30s\", got %s", b)
	}
	*l = limit(n)
	return nil
}

// duration is l as a duration, 0 when it is not given; the parsing is
// --timeout's.
func (l limit) duration() (time.Duration, error) {
	var d time.Duration
	if l == "" {
		return 0, nil
	}
	err := seconds{&d}.Set(string(l))
	return d, err
}
