package cli

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// forPerson reports whether stdout is a terminal and --json was not
// given: a person reads it, and gets a table. Anything else (a pipe, a
// file, --json) gets the JSON programs read.
func forPerson(stdout io.Writer, asJSON bool) bool {
	f, ok := stdout.(*os.File)
	return !asJSON && ok && isTerminal(f)
}

// table writes a header and rows, columns aligned; an empty cell is "-".
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			cells[i] = dash(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// counts is a map of counts as "a=1, b=2", in key order.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
