package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

// progress is fanout's (and schedule's) stderr. When stderr is not a
// terminal, it is the started lines, the warnings and the retry notes, one
// per line, as pilot-workers wrote them. When stderr is a terminal, it is a
// live table of the jobs redrawn in place, and at the end a summary of
// them that stays; nothing else is written there while the table is drawn
// (the started lines, JSON for programs, are left out: the table shows
// each start). It never touches stdout.
type progress struct {
	cmd   string // the command, for the table's head: "fanout", "schedule"
	w     io.Writer
	term  *os.File // stderr when it is a terminal; nil otherwise
	color bool
	now   func() time.Time

	mu    sync.Mutex
	rows  []progressRow
	runs  map[string]int // run id → job index, for output-line activity
	live  bool           // a job has an event: the guards passed, draw
	began time.Time      // the first job event
	drawn int            // lines of the table on the screen now
	shown string         // the table as last drawn

	stopc chan struct{}
	done  chan struct{}

	// glog, when set, is the group's log (see package grouplog), and
	// logged each job's last waiting reason in it.
	glog   *grouplog.Log
	logged map[int]string
}

// logJob appends job i's entry e to the group log; p.mu is held. A
// waiting entry that says what the last one said is left out.
func (p *progress) logJob(i int, e grouplog.Entry) {
	if p.glog == nil {
		return
	}
	if p.logged == nil {
		p.logged = map[int]string{}
	}
	if e.Type == grouplog.TypeWaiting {
		if last, ok := p.logged[i]; ok && last == e.Why {
			return
		}
		p.logged[i] = e.Why
	} else {
		delete(p.logged, i)
	}
	e.Job = i
	if e.Time.IsZero() {
		e.Time = p.now().UTC()
	}
	p.glog.Add(e)
}

// A progressJob is what the table says a job is: its label (its name, or
// its task file's base name) and its worker ("provider:mode").
type progressJob struct {
	Label, Worker string
}

// redrawEvery bounds how often the table is redrawn.
const redrawEvery = 200 * time.Millisecond

// newProgress returns the progress of command cmd's jobs written to stderr.
// The table is drawn only when stderr is a terminal (not a pipe, a file or
// /dev/null) and TERM is not "dumb"; NO_COLOR turns its colours off.
func newProgress(stderr io.Writer, cmd string, jobs []progressJob) *progress {
	p := &progress{
		cmd:   cmd,
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
	for _, j := range jobs {
		p.rows = append(p.rows, progressRow{Label: j.Label, Worker: j.Worker})
	}
	return p
}

// start starts the redraw ticker when there is a table to draw.
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

// finish ends the live table. On a terminal it replaces the table with the
// summary of verdicts, the jobs' verdicts in job order, when any job ran
// (nil verdicts: the jobs were refused, and the table only goes).
func (p *progress) finish(verdicts []outVerdict) {
	p.glog.Close(p.now().UTC())
	if p.stopc == nil {
		return
	}
	close(p.stopc)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	if !p.live || len(verdicts) != len(p.rows) {
		return
	}
	width, _, ok := termSize(p.term)
	if !ok {
		width = 80
	}
	io.WriteString(p.w, renderSummary(p.cmd, p.rows, verdicts, p.now().Sub(p.began), width, p.color))
}

// event is the Fanout's OnEvent.
func (p *progress) event(i int, e pilot.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	valid := i >= 0 && i < len(p.rows)
	switch {
	case e.Type == event.FanoutWarning:
		// The guards' warnings come before any job starts, so before
		// the table.
		p.print(e.Message)
	case p.term != nil:
		// The table shows starts and retry waits.
	case e.Started != nil:
		p.printJSON(e.Started)
	case e.Retry != nil && valid, e.Type == event.FanoutJobWaiting && valid:
		p.note(i, e.Message)
	}
	if !valid {
		return
	}
	now := p.now()
	if !p.live {
		p.live, p.began = true, now
	}
	r := &p.rows[i]
	r.Last = now
	switch {
	case e.Type == event.FanoutJobStarting:
		r.Slot = true
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeStarting})
	case e.Type == event.FanoutJobWaiting:
		if r.waiting() {
			r.Wait = e.Message // "waiting for memory: ..."
			p.logJob(i, grouplog.Entry{Type: grouplog.TypeWaiting, Why: e.Message})
		}
	case e.Started != nil:
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeStarted, RunID: e.Started.RunID})
		r.Slot = true
		r.Started = now
		r.Phase = "running"
		r.Ended, r.Verdict, r.OK, r.Wait = time.Time{}, "", false, "" // a retry's attempt
		p.runs[e.Started.RunID] = i
	case e.Verdict != nil:
		r.Ended = now
		r.Verdict, r.OK, r.Class = verdictText(*e.Verdict), e.Verdict.Verdict.Success(), e.Verdict.FailureClass
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeVerdict, RunID: e.Verdict.RunID, Status: string(e.Verdict.Verdict),
			Class: string(e.Verdict.FailureClass)})
		p.endLine(i)
	case e.Type == event.Phase && e.Session != nil:
		r.Phase = string(e.Session.Phase)
	case e.Type == event.Terminate:
		r.Phase = "terminating"
	case e.Type == retry.EventRetry:
		at := e.Time
		if at.IsZero() {
			at = now
		}
		if info, ok := e.Retry.(*retry.Info); ok {
			at = at.Add(time.Duration(info.DelayMS) * time.Millisecond)
		}
		r.wait(retryNote(r.Class, at))
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeWaiting, Why: r.Wait})
	}
}

// row is job i's row, nil for no job, after marking the table live; p.mu
// is held.
func (p *progress) row(i int) *progressRow {
	if i < 0 || i >= len(p.rows) {
		return nil
	}
	if !p.live {
		p.live, p.began = true, p.now()
	}
	return &p.rows[i]
}

// gated shows job i waiting, holding no slot, until its provider's limit
// resets at until; then it runs again.
func (p *progress) gated(i int, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.row(i); r != nil {
		p.note(i, limitNote(r.Class, until)+", then it runs again")
		r.wait(limitNote(r.Class, until))
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeWaiting, Why: r.Wait})
	}
}

// waiting shows job i waiting for why (its slot, a dependency), unless it
// has started.
func (p *progress) waiting(i int, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.row(i); r != nil && r.waiting() {
		r.Wait = why
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeWaiting, Why: why})
	}
}

// selected shows job i given its slot: it is starting.
func (p *progress) selected(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.row(i); r != nil {
		r.Slot, r.Wait = true, ""
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeStarting})
	}
}

// ended shows job i over with status st when it has no verdict to show (it
// never ran here, or its dispatch failed before one).
func (p *progress) ended(i int, st schedule.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.row(i); r != nil && r.Ended.IsZero() {
		r.Ended, r.Verdict, r.OK, r.Wait = p.now(), string(st), st == schedule.StatusComplete, ""
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeEnded, Status: string(st)})
		p.endLine(i)
	}
}

// endLine says, when there is no table, that job i's attempt ended: its
// verdict and class, and how long it ran ("pilot fanout: fix (glm:code):
// error (timeout) after 2m01s"). A table shows it in the job's row.
func (p *progress) endLine(i int) {
	r := p.rows[i]
	msg := r.Verdict
	if !r.Started.IsZero() {
		msg += " after " + shortDuration(r.Ended.Sub(r.Started))
	}
	p.note(i, msg)
}

// settle says what the summary shows of job i in place of its verdict: its
// state when it has no verdict of its own ("waiting", "blocked"), and why.
func (p *progress) settle(i int, state, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= 0 && i < len(p.rows) {
		p.rows[i].State, p.rows[i].Wait = state, why
		p.logJob(i, grouplog.Entry{Type: grouplog.TypeEnded, Status: state, Why: why})
	}
}

// note prints a line about job i when there is no table (the table shows
// it in the job's row).
func (p *progress) note(i int, msg string) {
	if p.term == nil {
		name := p.rows[i].Label
		if w := p.rows[i].Worker; w != "" && w != name {
			name += " (" + w + ")"
		}
		p.print("pilot " + p.cmd + ": " + name + ": " + msg)
	}
}

// retryNote says why a job waits for the retry of its failure of class c,
// and until when.
func retryNote(c pilot.FailureClass, at time.Time) string {
	switch c {
	case pilot.FailProviderRateLimit, pilot.FailProviderQuota:
		return limitNote(c, at)
	case "":
		return "retry at " + clock(at)
	}
	return string(c) + ": retry at " + clock(at)
}

// limitNote says that a job waits for its provider's limit (of class c) to
// reset at until.
func limitNote(c pilot.FailureClass, until time.Time) string {
	if c == pilot.FailProviderQuota {
		return "usage limit until " + clock(until)
	}
	return "rate limit until " + clock(until)
}

// clock is t as the terminal shows it: the local time of day.
func clock(t time.Time) string { return t.Local().Format("15:04:05") }

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

// print writes one line (above the table, were one drawn; the next tick
// redraws it).
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
	s := renderProgress(p.cmd, p.rows, p.now(), width, height, p.color)
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
	Label   string             // the job's name, or its task file's base name
	Worker  string             // "provider:mode"
	Slot    bool               // the job has its slot: it is starting, or started
	Phase   string             // session phase, "running" or "terminating"; "" before the start
	Started time.Time          // zero until the worker started
	Last    time.Time          // the job's last event or output line
	Ended   time.Time          // zero until the verdict
	Verdict string             // "completed", "error (timeout)", ...; "" until the end
	OK      bool               // Verdict is a success
	Class   pilot.FailureClass // the last verdict's failure class
	// Wait says why a waiting job waits ("rate limit until 10:42:03",
	// "waiting on a because a failed"); the summary shows it under a
	// job whose State is set.
	Wait string
	// State is what the summary shows in place of the verdict of a job
	// that has none of its own ("waiting", "blocked"); "" shows the
	// verdict.
	State string
}

// waiting reports whether the job waits: for a slot, a dependency, or the
// retry of a failed attempt.
func (r progressRow) waiting() bool { return !r.Slot && r.Started.IsZero() && r.Ended.IsZero() }

// wait makes the job wait again, for why: its attempt is over and another
// follows.
func (r *progressRow) wait(why string) {
	r.Slot, r.Started, r.Ended = false, time.Time{}, time.Time{}
	r.Phase, r.Verdict, r.OK, r.Wait = "", "", false, why
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

// tableWriter writes the lines of a table for a terminal width columns
// wide: each line is cut to width-1 columns so none wraps, and its last
// cell, when given apart, coloured.
type tableWriter struct {
	b     strings.Builder
	width int
	color bool
}

// line writes s followed by last (in sgr when colour is on), cut to fit.
func (t *tableWriter) line(s, last, sgr string) {
	max := t.width - 1
	if n := utf8.RuneCountInString(s); n >= max {
		s, last = cut(s, max), ""
	} else {
		last = cut(last, max-n)
	}
	t.b.WriteString(s)
	if t.color && sgr != "" && last != "" {
		last = sgr + last + sgrReset
	}
	t.b.WriteString(last)
	t.b.WriteByte('\n')
}

// painted writes s cut to fit, with its n runes from start in sgr when
// colour is on.
func (t *tableWriter) painted(s string, start, n int, sgr string) {
	r := []rune(cut(s, t.width-1))
	n = min(n, len(r)-start)
	if t.color && start >= 0 && n > 0 {
		s = string(r[:start]) + sgr + string(r[start:start+n]) + sgrReset + string(r[start+n:])
	} else {
		s = string(r)
	}
	t.b.WriteString(s)
	t.b.WriteByte('\n')
}

// columnWidths returns the widths of the label and worker columns of rows
// (those with show set): as wide as the widest, but at most 32 and 24
// columns, and narrower when the table would leave the last column fewer
// than 16 of width, down to 8 each. fixed is the width of the other
// columns and the gaps.
func columnWidths(rows []progressRow, show []bool, width, fixed int) (labelW, workerW int) {
	labelW, workerW = len("JOB"), len("WORKER")
	for i, r := range rows {
		if show == nil || show[i] {
			labelW = max(labelW, utf8.RuneCountInString(r.Label))
			workerW = max(workerW, utf8.RuneCountInString(r.Worker))
		}
	}
	labelW, workerW = min(labelW, 32), min(workerW, 24)
	for over := fixed + labelW + workerW + 16 - width; over > 0 && (labelW > 8 || workerW > 8); over-- {
		if labelW >= workerW && labelW > 8 {
			labelW--
		} else {
			workerW--
		}
	}
	return labelW, workerW
}

// renderProgress draws command cmd's table of rows at time now for a
// terminal of width columns and height lines: a summary line, a header and
// one line per job, each line ending in "\n"; a waiting job's last cell
// says why it waits, when it is known. Lines are cut to width-1 columns so
// none wraps, and the table keeps to height-1 lines so that the cursor can
// always climb back over it: when the jobs do not fit, running jobs are
// shown first, then waiting ones, then finished ones, and one last line
// counts the rest. Colour marks verdicts when color is set.
func renderProgress(cmd string, rows []progressRow, now time.Time, width, height int, color bool) string {
	var running, waiting, done int
	for _, r := range rows {
		switch {
		case !r.Ended.IsZero():
			done++
		case r.waiting():
			waiting++
		default:
			running++
		}
	}
	t := &tableWriter{width: width, color: color}
	t.line(fmt.Sprintf("pilot %s: %d/%d done, %d running, %d waiting", cmd, done, len(rows), running, waiting), "", "")
	if height-1 < 3 {
		return t.b.String()
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
			func(r progressRow) bool { return !r.waiting() && r.Ended.IsZero() },
			progressRow.waiting,
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

	numW := len(fmt.Sprint(len(rows)))
	const phaseW = 14
	labelW, workerW := columnWidths(rows, show, width, numW+2+2+phaseW+2+7+2+6+2+2)
	row := func(num, label, worker, phase, elapsed, idle string) string {
		return fmt.Sprintf("%*s  %-*s  %-*s  %-*s  %7s  %6s  ", numW, num, labelW, cut(label, labelW),
			workerW, cut(worker, workerW), phaseW, cut(phase, phaseW), elapsed, idle)
	}
	t.line(row("#", "JOB", "WORKER", "PHASE", "ELAPSED", "IDLE"), "VERDICT", "")
	hidden := 0
	for i, r := range rows {
		if !show[i] {
			hidden++
			continue
		}
		phase, elapsed, idle := "waiting", "-", "-"
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
		case r.Slot:
			phase = "starting"
		}
		verdict, sgr := r.Verdict, sgrRed
		switch {
		case verdict == "" && r.Wait != "" && r.waiting():
			verdict, sgr = r.Wait, "" // why it waits
		case verdict == "":
			verdict, sgr = "-", ""
		case r.OK:
			sgr = sgrGreen
		}
		t.line(row(fmt.Sprint(i+1), r.Label, r.Worker, phase, elapsed, idle), verdict, sgr)
	}
	if hidden > 0 {
		t.line(fmt.Sprintf("%*s  … and %d more", numW, "", hidden), "", "")
	}
	return t.b.String()
}

// renderSummary is what stays on the terminal when command cmd's jobs are
// over: a line of counts, then per job its label, worker, verdict (with
// the failure class; or its state, for a job whose row has one), duration
// and worktree (its branch when kept, with its changes committed there),
// and under each job that failed one line of evidence, or why it is in its
// state. Lines are cut to width-1 columns.
func renderSummary(cmd string, rows []progressRow, vs []outVerdict, elapsed time.Duration, width int, color bool) string {
	ok, failed, interrupted := 0, 0, 0
	var states []string // in order of first appearance
	count := map[string]int{}
	for i, v := range vs {
		switch {
		case rows[i].State != "":
			if count[rows[i].State]++; count[rows[i].State] == 1 {
				states = append(states, rows[i].State)
			}
		case v.Verdict.Verdict.Success():
			ok++
		case v.Interrupted:
			interrupted++
		default:
			failed++
		}
	}
	head := fmt.Sprintf("pilot %s: %d job(s) in %s: %d succeeded, %d failed", cmd, len(vs), shortDuration(elapsed), ok, failed)
	if interrupted > 0 {
		head += fmt.Sprintf(", %d interrupted", interrupted)
	}
	for _, s := range states {
		head += fmt.Sprintf(", %d %s", count[s], s)
	}
	t := &tableWriter{width: width, color: color}
	t.line(head, "", "")

	shown := func(i int) string {
		if rows[i].State != "" {
			return rows[i].State
		}
		return verdictText(vs[i].Verdict)
	}
	numW := len(fmt.Sprint(len(rows)))
	verdictW := len("VERDICT")
	for i := range vs {
		verdictW = max(verdictW, utf8.RuneCountInString(shown(i)))
	}
	verdictW = min(verdictW, 36)
	labelW, workerW := columnWidths(rows, nil, width, numW+2+2+verdictW+2+5+2+2)
	row := func(num, label, worker, verdict, took string) string {
		return fmt.Sprintf("%*s  %-*s  %-*s  %-*s  %5s  ", numW, num, labelW, cut(label, labelW),
			workerW, cut(worker, workerW), verdictW, cut(verdict, verdictW), took)
	}
	t.line(row("#", "JOB", "WORKER", "VERDICT", "TIME"), "WORKTREE", "")
	kept := false
	for i, v := range vs {
		took := "-"
		if v.DurationMS > 0 {
			took = shortDuration(time.Duration(v.DurationMS) * time.Millisecond)
		}
		sgr := sgrRed
		if v.Verdict.Verdict.Success() && rows[i].State == "" {
			sgr = sgrGreen
		}
		verdictAt := numW + 2 + labelW + 2 + workerW + 2
		t.painted(row(strconv.Itoa(i+1), rows[i].Label, rows[i].Worker, shown(i), took)+worktreeText(v.Worktree),
			verdictAt, utf8.RuneCountInString(cut(shown(i), verdictW)), sgr)
		ev := ""
		switch {
		case rows[i].State != "":
			ev = rows[i].Wait
		case !v.Verdict.Verdict.Success():
			ev = evidenceText(v)
		}
		if ev != "" {
			t.line(fmt.Sprintf("%*s  ↳ %s", numW, "", ev), "", "")
		}
		kept = kept || v.Worktree != nil && v.Worktree.Kept
	}
	if kept {
		t.line("each branch holds its job's work: pilot worktrees diff BRANCH; git merge BRANCH", "", "")
	}
	return t.b.String()
}

// worktreeText is a job's worktree as the summary shows it: the branch
// that holds its work, or that it was removed.
func worktreeText(wt *pilot.WorktreeInfo) string {
	switch {
	case wt == nil:
		return "-"
	case !wt.Kept:
		return "removed (no changes)"
	case wt.Commit == "":
		return wt.Branch + " (not committed: see pilot worktrees)"
	}
	return wt.Branch
}

// evidenceText is one line saying why a job failed: its evidence and where
// it comes from, else why it was blocked, else the last line of its
// stderr, else how it exited.
func evidenceText(v outVerdict) string {
	oneLine := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	switch {
	case v.EvidenceExcerpt != "":
		if v.EvidenceSource != "" {
			return v.EvidenceSource + ": " + oneLine(v.EvidenceExcerpt)
		}
		return oneLine(v.EvidenceExcerpt)
	case v.BlockedReason != "":
		return "blocked: " + oneLine(v.BlockedReason)
	}
	lines := strings.Split(strings.TrimSpace(v.StderrTail), "\n")
	if last := oneLine(lines[len(lines)-1]); last != "" {
		return "stderr: " + last
	}
	switch {
	case v.Interrupted:
		return "interrupted"
	case v.Signal != "":
		return "killed by " + v.Signal
	case v.ExitCode != nil:
		return "exit " + strconv.Itoa(*v.ExitCode)
	}
	return ""
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
