package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/retry"
)

// progress is fanout's stderr: the started lines and warnings, and, when
// stderr is a terminal, a live table of the jobs redrawn in place below
// them. It never touches stdout.
type progress struct {
	w     io.Writer
	term  *os.File // stderr when it is a terminal; nil otherwise
	color bool
	now   func() time.Time

	mu    sync.Mutex
	rows  []progressRow
	runs  map[string]int // run id → job index, for output-line activity
	live  bool           // a job has an event: the guards passed, draw
	drawn int            // lines of the table on the screen now
	shown string         // the table as last drawn

	stopc chan struct{}
	done  chan struct{}
}

// redrawEvery bounds how often the table is redrawn.
const redrawEvery = 200 * time.Millisecond

// newProgress returns the progress of jobs written to stderr. The table is
// drawn only when stderr is a terminal (not a pipe, a file or /dev/null) and
// TERM is not "dumb"; NO_COLOR turns its colours off.
func newProgress(stderr io.Writer, labels []string) *progress {
	p := &progress{
		w:     stderr,
		color: os.Getenv("NO_COLOR") == "",
		now:   time.Now,
		runs:  map[string]int{},
	}
	if f, ok := stderr.(*os.File); ok && os.Getenv("TERM") != "dumb" {
		if _, _, ok := termSize(f); ok {
			p.term = f
		}
	}
	for _, l := range labels {
		p.rows = append(p.rows, progressRow{Label: l})
	}
	return p
}

// start starts the redraw ticker when there is a table to draw; stop ends
// it and clears the table.
func (p *progress) start() {
	if p.term == nil {
		return
	}
	p.stopc, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				p.redraw()
			}
		}
	}()
}

func (p *progress) stop() {
	if p.stopc == nil {
		return
	}
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
}

// event is the Fanout's OnEvent.
func (p *progress) event(i int, e pilot.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.Started != nil:
		p.printJSON(e.Started)
	case e.Type == "fanout.warning":
		p.print(e.Message)
	case e.Retry != nil && i >= 0 && i < len(p.rows):
		p.print("pilot fanout: " + p.rows[i].Label + ": " + e.Message)
	}
	if i < 0 || i >= len(p.rows) {
		return
	}
	p.live = true
	r := &p.rows[i]
	now := p.now()
	r.Last = now
	switch {
	case e.Started != nil:
		r.Started = now
		r.Phase = "running"
		r.Ended, r.Verdict, r.OK = time.Time{}, "", false // a retry's attempt
		p.runs[e.Started.RunID] = i
	case e.Verdict != nil:
		r.Ended = now
		r.Verdict, r.OK = verdictText(*e.Verdict), e.Verdict.Verdict.Success()
	case e.Type == "worker_runner.phase" && e.Session != nil:
		r.Phase = string(e.Session.Phase)
	case e.Type == "worker_runner.terminate":
		r.Phase = "terminating"
	case e.Type == retry.EventRetry:
		r.Phase = "retry wait"
	}
}

// line is the Dispatcher's OnLine: output is activity.
func (p *progress) line(runID string, _ pilot.Line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := p.runs[runID]; ok {
		p.rows[i].Last = p.now()
	}
}

func (p *progress) printJSON(v any) {
	var b strings.Builder
	writeJSON(&b, v)
	p.print(strings.TrimSuffix(b.String(), "\n"))
}

// print writes one line above the table; the next tick redraws the table.
func (p *progress) print(line string) {
	var b strings.Builder
	b.WriteString(eraseLines(p.drawn))
	p.drawn, p.shown = 0, ""
	b.WriteString(line)
	b.WriteByte('\n')
	io.WriteString(p.w, b.String())
}

func (p *progress) erase() {
	if p.drawn > 0 {
		io.WriteString(p.w, eraseLines(p.drawn))
		p.drawn, p.shown = 0, ""
	}
}

func (p *progress) redraw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live {
		return
	}
	width, height, ok := termSize(p.term)
	if !ok {
		width, height = 80, 24
	}
	s := renderProgress(p.rows, p.now(), width, height, p.color)
	if s == p.shown {
		return
	}
	io.WriteString(p.w, eraseLines(p.drawn)+s)
	p.drawn, p.shown = strings.Count(s, "\n"), s
}

// eraseLines moves the cursor up over the last n lines, clearing each.
func eraseLines(n int) string {
	return strings.Repeat("\x1b[1A\x1b[2K", n)
}

// A progressRow is one job in the live table.
type progressRow struct {
	Label   string
	Phase   string    // session phase, "running", "terminating" or "retry wait"; "" before the start
	Started time.Time // zero until the worker started
	Last    time.Time // the job's last event or output line
	Ended   time.Time // zero until the verdict
	Verdict string    // "completed", "error (timeout)", ...; "" until the end
	OK      bool      // Verdict is a success
}

// verdictText is the verdict as the table shows it.
func verdictText(v pilot.Verdict) string {
	if v.FailureClass != "" {
		return string(v.Verdict) + " (" + string(v.FailureClass) + ")"
	}
	return string(v.Verdict)
}

// ANSI colours of the table.
const (
	sgrGreen = "\x1b[32m"
	sgrRed   = "\x1b[31m"
	sgrReset = "\x1b[0m"
)

// renderProgress draws the table of rows at time now for a terminal of
// width columns and height lines: a summary line, a header and one line per
// job, each line ending in "\n". Lines are cut to width-1 columns so none
// wraps, and the table keeps to height-1 lines so that the cursor can
// always climb back over it: when the jobs do not fit, running jobs are
// shown first, then waiting ones, then finished ones, and one last line
// counts the rest. Colour marks verdicts when color is set.
func renderProgress(rows []progressRow, now time.Time, width, height int, color bool) string {
	var running, waiting, done int
	for _, r := range rows {
		switch {
		case !r.Ended.IsZero():
			done++
		case !r.Started.IsZero():
			running++
		default:
			waiting++
		}
	}
	var b strings.Builder
	line := func(s, verdict, sgr string) {
		max := width - 1
		if n := utf8.RuneCountInString(s); n >= max {
			s, verdict = cut(s, max), ""
		} else {
			verdict = cut(verdict, max-n)
		}
		b.WriteString(s)
		if color && sgr != "" && verdict != "" {
			verdict = sgr + verdict + sgrReset
		}
		b.WriteString(verdict)
		b.WriteByte('\n')
	}
	line(fmt.Sprintf("pilot fanout: %d/%d done, %d running, %d waiting", done, len(rows), running, waiting), "", "")
	if height-1 < 3 {
		return b.String()
	}

	// Which rows fit: all of them, or the most interesting, in job order.
	show := make([]bool, len(rows))
	room := height - 1 - 2 // summary and header lines
	if len(rows) <= room {
		for i := range show {
			show[i] = true
		}
	} else {
		room-- // the "more" line
		for _, want := range []func(progressRow) bool{
			func(r progressRow) bool { return !r.Started.IsZero() && r.Ended.IsZero() },
			func(r progressRow) bool { return r.Started.IsZero() && r.Ended.IsZero() },
			func(r progressRow) bool { return !r.Ended.IsZero() },
		} {
			for i, r := range rows {
				if room > 0 && !show[i] && want(r) {
					show[i] = true
					room--
				}
			}
		}
	}

	labelW := len("JOB")
	for i, r := range rows {
		if show[i] {
			labelW = max(labelW, utf8.RuneCountInString(r.Label))
		}
	}
	labelW = min(labelW, 40)
	numW := len(fmt.Sprint(len(rows)))
	const phaseW = 14
	row := func(num, label, phase, elapsed, idle string) string {
		return fmt.Sprintf("%*s  %-*s  %-*s  %7s  %6s  ", numW, num, labelW, cut(label, labelW), phaseW, cut(phase, phaseW), elapsed, idle)
	}
	line(row("#", "JOB", "PHASE", "ELAPSED", "IDLE"), "VERDICT", "")
	hidden := 0
	for i, r := range rows {
		if !show[i] {
			hidden++
			continue
		}
		phase, elapsed, idle := "starting", "-", "-"
		switch {
		case !r.Ended.IsZero():
			phase = "done"
			if !r.Started.IsZero() {
				elapsed = shortDuration(r.Ended.Sub(r.Started))
			}
		case !r.Started.IsZero():
			phase = r.Phase
			if phase == "" {
				phase = "running"
			}
			elapsed = shortDuration(now.Sub(r.Started))
			idle = shortDuration(now.Sub(r.Last))
		}
		verdict, sgr := r.Verdict, sgrRed
		switch {
		case verdict == "":
			verdict, sgr = "-", ""
		case r.OK:
			sgr = sgrGreen
		}
		line(row(fmt.Sprint(i+1), r.Label, phase, elapsed, idle), verdict, sgr)
	}
	if hidden > 0 {
		line(fmt.Sprintf("%*s  … and %d more", numW, "", hidden), "", "")
	}
	return b.String()
}

// cut shortens s to at most n runes, marking a cut with "…".
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// shortDuration is d in whole seconds: "7s", "1m05s", "2h03m".
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}
