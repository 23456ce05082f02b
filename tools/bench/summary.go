package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
)

// summarize reads the -json output of several runs (files) and writes,
// for every row, the minimum, median and maximum of its figure and of its
// ratio, and in how many runs it met its goal: issue 38's report of three
// full runs.
//
//	go run ./tools/bench -json > run1.json   # three times
//	go run ./tools/bench summary run1.json run2.json run3.json
func summarize(w io.Writer, files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("give the -json outputs of the runs to summarize: bench summary run1.json run2.json run3.json")
	}
	var order []string
	byID := map[string][]row{}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var rs []row
		if err := json.Unmarshal(data, &rs); err != nil {
			return fmt.Errorf("%s: not the output of bench -json: %w", name, err)
		}
		for _, r := range rs {
			if r.Skipped {
				continue
			}
			if _, ok := byID[r.ID]; !ok {
				order = append(order, r.ID)
			}
			byID[r.ID] = append(byID[r.ID], r)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row\tunit\tpilot min / median / max\tratio min / median / max\tgoal\tmet\t")
	for _, id := range order {
		rs := byID[id]
		var figs, ratios []float64
		met := 0
		for _, r := range rs {
			figs = append(figs, r.Pilot)
			if r.Ratio != nil {
				ratios = append(ratios, *r.Ratio)
			}
			if r.Pass {
				met++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d of %d\t\n", id, rs[0].Unit, spread(figs), spread(ratios), rs[0].Goal, met, len(rs))
	}
	return tw.Flush()
}

// spread is "min / median / max" of fs (the lower median of an even
// count), or "-" for none.
func spread(fs []float64) string {
	if len(fs) == 0 {
		return "-"
	}
	s := slices.Clone(fs)
	slices.Sort(s)
	return num(s[0]) + " / " + num(s[(len(s)-1)/2]) + " / " + num(s[len(s)-1])
}
