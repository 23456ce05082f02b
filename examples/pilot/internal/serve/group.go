package serve

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/runs"
)

// segment is a stretch of a job's time: waiting (holding no slot), or one
// attempt's run.
type segment struct {
	Start, End time.Time
	Open       bool   // still going: End is now
	Kind       string // "waiting", "running", or the attempt's status
	Why        string // a wait's reason
	RunID      string
	Class      string
}

// jobLine is a job of a group: its segments and where it stands.
type jobLine struct {
	Index    int
	Name     string
	Worker   string
	Deps     []string
	Segments []segment
	State    string // waiting | running | completed | error (class) | the status it ended with
	Class    string
	Why      string   // why it waits, or why it ended without a run
	Runs     []string // its attempts' run ids, in order
	Attempts int
}

// groupModel is a group's page.
type groupModel struct {
	Title   string
	ID      string
	Kind    string
	Started time.Time
	Ended   time.Time
	Over    bool
	Lost    string // how the group's pilot was found gone, when it died before the group's end
	Jobs    []jobLine
	Live    string
	Refresh bool
	SVG     template.HTML
	Deps    template.HTML
}

// loadGroup reads group id's log and the records of its runs.
func (s *server) loadGroup(id string) (groupModel, error) {
	g, err := grouplog.Read(s.dir, id)
	if err != nil {
		return groupModel{}, err
	}
	now := s.now()
	recs := map[string]pilot.Record{}
	byJob := map[string][]runs.Run{}
	list, _ := runs.List(s.dir)
	for _, r := range list {
		if r.Record.Group == id {
			recs[r.ID] = r.Record
			byJob[r.Record.GroupJob] = append([]runs.Run{r}, byJob[r.Record.GroupJob]...) // oldest first
		}
	}
	m := groupModel{Title: g.Kind + " " + id, ID: id, Kind: g.Kind, Started: g.Started, Ended: g.Ended}
	end := now
	if !g.Ended.IsZero() {
		end = g.Ended
	}
	running := false
	for i, j := range g.Jobs {
		jl := jobLine{Index: i, Name: j.Name, Worker: j.Worker, Deps: j.Deps, State: "waiting"}
		why := "not started yet"
		if len(j.Deps) > 0 {
			why = "waiting on " + strings.Join(j.Deps, ", ")
		}
		open := &segment{Start: g.Started, Kind: "waiting", Why: why, Open: true}
		seen := map[string]bool{}
		endedWith := "" // the status of an ended line, if any
		closeWait := func(t time.Time) {
			if open != nil && open.Kind == "waiting" {
				open.End, open.Open = t, false
				if open.End.Sub(open.Start) > 0 {
					jl.Segments = append(jl.Segments, *open)
				}
				open = nil
			}
		}
		for _, e := range g.Entries {
			if e.Job != i {
				continue
			}
			switch e.Type {
			case grouplog.TypeWaiting:
				if open != nil && open.Kind == "waiting" {
					closeWait(e.Time)
				}
				if open == nil {
					open = &segment{Start: e.Time, Kind: "waiting", Why: e.Why, Open: true}
				}
				jl.State, jl.Why = "waiting", e.Why
			case grouplog.TypeStarting:
				closeWait(e.Time)
			case grouplog.TypeStarted:
				closeWait(e.Time)
				seen[e.RunID] = true
				jl.Runs = append(jl.Runs, e.RunID)
				open = &segment{Start: e.Time, Kind: "running", RunID: e.RunID, Open: true}
				jl.State, jl.Why = "running", ""
			case grouplog.TypeVerdict:
				if open != nil && open.RunID == e.RunID {
					open.End, open.Open, open.Kind, open.Class = e.Time, false, e.Status, e.Class
					jl.Segments = append(jl.Segments, *open)
					open = nil
				}
				jl.State, jl.Class = e.Status, e.Class
			case grouplog.TypeEnded:
				closeWait(e.Time)
				if jl.State == "waiting" || jl.State == "running" || endedWith != "" {
					jl.State = e.Status
				}
				endedWith, jl.Why = e.Status, e.Why
			}
		}
		if open != nil {
			open.End = end
			if open.Kind == "waiting" && !g.Ended.IsZero() {
				open.Open = false
			}
			jl.Segments = append(jl.Segments, *open)
		}
		// The records are the truth about each attempt; they also hold
		// the attempts of a log that lost them.
		for _, r := range byJob[j.Name] {
			if !seen[r.ID] {
				jl.Runs = append(jl.Runs, r.ID)
				jl.Segments = append(jl.Segments, segment{Start: r.Record.StartedAt, RunID: r.ID, Kind: "running", End: end, Open: true})
			}
		}
		for k := range jl.Segments {
			sg := &jl.Segments[k]
			rec, ok := recs[sg.RunID]
			if sg.RunID != "" && !ok && !g.Ended.IsZero() {
				// The group is over and the run has no record (removed,
				// or never written): it runs no more.
				sg.Kind, sg.Open = "unknown", false
			}
			if sg.RunID == "" || !ok {
				continue
			}
			sg.Start = rec.StartedAt
			if rec.Status == runs.StatusRunning {
				sg.Kind, sg.Open, sg.End = "running", true, now
				continue
			}
			sg.Kind, sg.Class, sg.Open = rec.Status, string(rec.FailureClass), false
			if rec.EndedAt != nil {
				sg.End = *rec.EndedAt
			}
		}
		if n := len(jl.Segments); n > 0 {
			if last := jl.Segments[n-1]; last.RunID != "" {
				jl.State, jl.Class = last.Kind, last.Class
			}
		}
		if jl.State == "waiting" && !g.Ended.IsZero() && endedWith == "" {
			jl.State = "not run" // the group ended first
		}
		jl.Attempts = len(jl.Runs)
		if jl.State == "running" || (jl.State == "waiting" && g.Ended.IsZero()) {
			running = true
		}
		m.Jobs = append(m.Jobs, jl)
	}
	m.Over = !g.Ended.IsZero() && !running
	m.Lost = g.Lost
	m.SVG = timelineSVG(m, end)
	if m.Kind == grouplog.KindGraph {
		m.Deps = depsSVG(m)
	}
	return m, nil
}

func (s *server) group(w http.ResponseWriter, r *http.Request) {
	m, err := s.loadGroup(r.PathValue("id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if !m.Over {
		m.Live, m.Refresh = "/group/"+m.ID+"/live", true
	}
	s.render(w, "group", "page", m)
}

func (s *server) groupLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.loadGroup(id); err != nil {
		http.NotFound(w, r)
		return
	}
	s.stream(w, r, s.cfg.Poll, func() (string, bool) {
		m, err := s.loadGroup(id)
		if err != nil {
			return "", true
		}
		html, err := s.fragment("group", "body", m)
		return html, err != nil || m.Over
	})
}

// colour is a segment's or a job's fill.
func colour(kind string) string {
	switch kind {
	case "waiting":
		return "#c8c8c8"
	case "running":
		return "#3b82f6"
	case string(pilot.Completed), "complete":
		return "#16a34a"
	case string(pilot.StepCappedPartial):
		return "#84cc16"
	case runs.StatusAbandoned, "interrupted", "external-active":
		return "#f59e0b"
	case "blocked":
		return "#78716c"
	}
	return "#dc2626" // error, empty, failed
}

// timelineSVG draws one bar per job over the group's time: waiting grey,
// each attempt coloured by its outcome (blue while it runs), each a link
// to its run.
func timelineSVG(m groupModel, end time.Time) template.HTML {
	const labelW, barW, rowH, top = 180, 720, 24, 24
	span := end.Sub(m.Started)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		d := t.Sub(m.Started)
		d = max(0, min(d, span))
		return labelW + float64(d)/float64(span)*barW
	}
	h := top + rowH*len(m.Jobs) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="timeline">`, labelW+barW+30, h, labelW+barW+30, h)
	for k := 0; k <= 4; k++ {
		xx := labelW + float64(k)*barW/4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e7eb"/>`, xx, top-6, xx, h)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle" fill="#555">+%s</text>`, xx, top-10, runs.Duration(span*time.Duration(k)/4))
	}
	for i, j := range m.Jobs {
		y := top + i*rowH
		fmt.Fprintf(&b, `<g class="job" data-job="%s" data-state="%s">`, esc(j.Name), esc(j.State))
		fmt.Fprintf(&b, `<text x="4" y="%d" font-size="12">%s</text>`, y+15, esc(cut(j.Name, 26)))
		for _, sg := range j.Segments {
			x0, x1 := x(sg.Start), x(sg.End)
			w := max(x1-x0, 2)
			title := sg.Kind
			if sg.Class != "" {
				title += " (" + sg.Class + ")"
			}
			if sg.Why != "" {
				title += ": " + sg.Why
			}
			title += " " + runs.Duration(sg.End.Sub(sg.Start))
			if sg.Open {
				title += "+"
			}
			rect := fmt.Sprintf(`<rect class="seg seg-%s" x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"><title>%s</title></rect>`,
				esc(sg.Kind), x0, y+3, w, rowH-8, colour(sg.Kind), esc(title))
			if sg.Kind == "waiting" {
				// Waiting is drawn apart: a thin bar.
				rect = fmt.Sprintf(`<rect class="seg seg-waiting" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`,
					x0, y+9, w, 4, colour("waiting"), esc(title))
			}
			if sg.RunID != "" {
				rect = fmt.Sprintf(`<a href="/run/%s">%s</a>`, esc(sg.RunID), rect)
			}
			b.WriteString(rect)
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// depsSVG draws a graph's dependencies: jobs in columns by depth, an
// arrow from each dependency to its dependent, each job coloured by where
// it stands.
func depsSVG(m groupModel) template.HTML {
	index := map[string]int{}
	for i, j := range m.Jobs {
		index[j.Name] = i
	}
	depth := make([]int, len(m.Jobs))
	for range m.Jobs { // longest path, relaxed; graphs are acyclic
		for i, j := range m.Jobs {
			for _, d := range j.Deps {
				if k, ok := index[d]; ok && depth[k]+1 > depth[i] {
					depth[i] = depth[k] + 1
				}
			}
		}
	}
	const colW, rowH, boxW, boxH = 190, 40, 160, 26
	rowOf := make([]int, len(m.Jobs))
	perCol := map[int]int{}
	cols, rows := 0, 0
	for i := range m.Jobs {
		rowOf[i] = perCol[depth[i]]
		perCol[depth[i]]++
		cols, rows = max(cols, depth[i]+1), max(rows, perCol[depth[i]])
	}
	pos := func(i int) (float64, float64) { return float64(10 + depth[i]*colW), float64(10 + rowOf[i]*rowH) }
	w, h := 20+cols*colW, 20+rows*rowH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="deps" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="dependencies">`, w, h, w, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>`)
	for i, j := range m.Jobs {
		for _, d := range j.Deps {
			k, ok := index[d]
			if !ok {
				continue
			}
			x0, y0 := pos(k)
			x1, y1 := pos(i)
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#555" marker-end="url(#arrow)"/>`, x0+boxW, y0+boxH/2, x1, y1+boxH/2)
		}
	}
	for i, j := range m.Jobs {
		x, y := pos(i)
		fmt.Fprintf(&b, `<g class="node" data-job="%s"><rect x="%.0f" y="%.0f" width="%d" height="%d" rx="4" fill="%s" fill-opacity="0.85"><title>%s: %s</title></rect><text x="%.0f" y="%.0f" font-size="12" fill="%s">%s</text></g>`,
			esc(j.Name), x, y, boxW, boxH, colour(j.State), esc(j.Name), esc(j.State), x+6, y+17, textColour(j.State), esc(cut(j.Name, 22)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// textColour is the colour of a label on colour(kind).
func textColour(kind string) string {
	if colour(kind) == colour("waiting") {
		return "#111"
	}
	return "#fff"
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// cut is s cut to n runes, with "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
