// Command clidrift compares two runs of the end-to-end scenario table
// (package e2e with PILOT_E2E_REPORT set: one JSON line per run of a row)
// and prints the rows whose verdict, failure class, evidence source or
// phases differ, with the CLI versions of both runs. scripts/cli-drift runs
// the table on the pinned CLIs and on each CLI's latest release and then
// this:
//
//	go run ./tools/clidrift PINNED.jsonl LATEST.jsonl
//
// "Phases" are whether the phase (and stall inspection) the table wants of
// the row was seen, and the verdict's session phase unless pilot ended the
// worker in both runs (a stalled worker ends in whatever phase the kill
// finds it: Claude Code's tool-stall row ended tool-running in one run and
// awaiting-model in the next, one release). The list of every phase seen
// is printed but not compared, for which of them a quick run shows
// depends on when pilot looked. It exits 0 when no row differs, 1
// when one does (or ran in one run only), 2 on bad input.
//
// With -peaks it reads one report and prints each CLI's peak resident
// memory per process tree (the rows' peak_rss_bytes): the median, the
// least and the most over its rows, and the command that held the most.
// README's per-CLI table comes from it:
//
//	PILOT_E2E_REPORT=/tmp/e2e.jsonl go test -run 'TestScenarios$' ./e2e
//	go run ./tools/clidrift -peaks /tmp/e2e.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// row is one line of an e2e report (e2e's reportedRow).
type row struct {
	Scenario string   `json:"scenario"`
	CLI      string   `json:"cli"`
	Defaults bool     `json:"defaults"`
	Package  string   `json:"package"`
	Version  string   `json:"version"`
	Verdict  string   `json:"verdict"`
	Class    string   `json:"class"`
	Source   string   `json:"evidence_source"`
	Phase    string   `json:"phase"`
	PhaseOK  bool     `json:"phase_ok"`
	Phases   []string `json:"phases"`
	Seconds  float64  `json:"seconds"`
	PeakRSS  int64    `json:"peak_rss_bytes"`
	PeakTop  string   `json:"peak_rss_command"`
}

// key names a row of the table: a scenario on one CLI, with its retry
// settings turned down or its own.
type key struct {
	scenario, cli string
	defaults      bool
}

func (k key) String() string {
	s := k.scenario + " × " + k.cli
	if k.defaults {
		s += " (default retries)"
	}
	return s
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-peaks" {
		rows, err := readReport(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "clidrift:", err)
			os.Exit(2)
		}
		peaks(os.Stdout, rows)
		return
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: clidrift PINNED.jsonl LATEST.jsonl\n       clidrift -peaks REPORT.jsonl")
		os.Exit(2)
	}
	pinned, err := readReport(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "clidrift:", err)
		os.Exit(2)
	}
	latest, err := readReport(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "clidrift:", err)
		os.Exit(2)
	}
	if compare(os.Stdout, pinned, latest) > 0 {
		os.Exit(1)
	}
}

// readReport reads a report file. A row run twice keeps its last run.
func readReport(path string) (map[key]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows := map[key]row{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		rows[key{r.Scenario, r.CLI, r.Defaults}] = r
	}
	return rows, sc.Err()
}

// compare prints the CLIs' versions in both runs, then every row that
// differs, and returns how many do.
func compare(w io.Writer, pinned, latest map[key]row) int {
	versions := func(rows map[key]row) map[string]string {
		v := map[string]string{}
		for _, r := range rows {
			v[r.CLI] = r.Package + " " + r.Version
		}
		return v
	}
	pv, lv := versions(pinned), versions(latest)
	clis := map[string]bool{}
	for c := range pv {
		clis[c] = true
	}
	for c := range lv {
		clis[c] = true
	}
	fmt.Fprintln(w, "CLI versions (pinned → latest):")
	for _, c := range sorted(clis) {
		mark := ""
		if pv[c] != lv[c] {
			mark = "  (changed)"
		}
		fmt.Fprintf(w, "  %-9s %s → %s%s\n", c, orDash(pv[c]), orDash(lv[c]), mark)
	}

	keys := map[key]bool{}
	for k := range pinned {
		keys[k] = true
	}
	for k := range latest {
		keys[k] = true
	}
	order := make([]key, 0, len(keys))
	for k := range keys {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.cli != b.cli {
			return a.cli < b.cli
		}
		if a.scenario != b.scenario {
			return a.scenario < b.scenario
		}
		return !a.defaults && b.defaults
	})
	n := 0
	for _, k := range order {
		p, pok := pinned[k]
		l, lok := latest[k]
		var diffs []string
		switch {
		case !pok:
			diffs = []string{"ran only on the latest release"}
		case !lok:
			diffs = []string{"ran only on the pinned release"}
		default:
			diffs = differences(p, l)
		}
		if len(diffs) == 0 {
			continue
		}
		if n == 0 {
			fmt.Fprintln(w, "\nRows that differ:")
		}
		n++
		fmt.Fprintf(w, "\n%s: %s → %s\n", k, version(p, pok), version(l, lok))
		for _, d := range diffs {
			fmt.Fprintf(w, "  %s\n", d)
		}
		if pok && lok {
			fmt.Fprintf(w, "  phases seen: %s → %s\n", strings.Join(p.Phases, ","), strings.Join(l.Phases, ","))
		}
	}
	if n == 0 {
		fmt.Fprintf(w, "\nNo row differs (%d rows).\n", len(order))
	} else {
		fmt.Fprintf(w, "\n%d of %d rows differ.\n", n, len(order))
	}
	return n
}

// differences lists the fields in which two runs of a row differ.
func differences(p, l row) []string {
	var out []string
	add := func(name, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s: %s → %s", name, orDash(a), orDash(b)))
		}
	}
	add("verdict", p.Verdict, l.Verdict)
	add("class", p.Class, l.Class)
	add("evidence source", p.Source, l.Source)
	if p.Source != "pilot" || l.Source != "pilot" {
		// A worker pilot ended (a stall) may end in any phase the kill
		// finds it in: seen to differ between two runs of one release.
		add("phase", p.Phase, l.Phase)
	}
	add("wanted phase seen", fmt.Sprint(p.PhaseOK), fmt.Sprint(l.PhaseOK))
	return out
}

func version(r row, ok bool) string {
	if !ok {
		return "-"
	}
	return r.Version
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// peaks prints each CLI's peak RSS per tree over its rows that have one:
// median, least, most, and the command the most was held by.
func peaks(w io.Writer, rows map[key]row) {
	by := map[string][]row{}
	for _, r := range rows {
		if r.PeakRSS > 0 {
			by[r.CLI] = append(by[r.CLI], r)
		}
	}
	clis := map[string]bool{}
	for c := range by {
		clis[c] = true
	}
	fmt.Fprintf(w, "%-9s %-40s %4s %8s %8s %8s  %s\n", "CLI", "package", "rows", "median", "least", "most", "most held by")
	for _, c := range sorted(clis) {
		rs := by[c]
		sort.Slice(rs, func(i, j int) bool { return rs[i].PeakRSS < rs[j].PeakRSS })
		n := len(rs)
		median := rs[n/2].PeakRSS
		if n%2 == 0 {
			median = (rs[n/2-1].PeakRSS + rs[n/2].PeakRSS) / 2
		}
		top := rs[n-1]
		fmt.Fprintf(w, "%-9s %-40s %4d %8s %8s %8s  %s\n", c, top.Package+" "+top.Version, n,
			mb(median), mb(rs[0].PeakRSS), mb(top.PeakRSS), orDash(top.PeakTop))
	}
	if len(clis) == 0 {
		fmt.Fprintln(w, "no row has a peak_rss_bytes")
	}
}

// mb writes n bytes in MB (10^6), as README's table does.
func mb(n int64) string { return fmt.Sprintf("%d MB", (n+500_000)/1_000_000) }
