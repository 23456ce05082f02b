package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/examples/pilot/internal/grouplog"
	"github.com/pilotworkers/pilot/runs"
	"github.com/pilotworkers/pilot/size"
)

type server struct {
	cfg   Config
	dir   string
	pages map[string]*template.Template
	now   func() time.Time

	mu    sync.Mutex
	found map[evidenceKey]int64 // where the evidence line was found, by log
}

// evidenceKey names a search for an evidence line: the run, its log's
// size (an ended run's log does not change) and the line.
type evidenceKey struct {
	run, needle string
	size        int64
}

// maxEvidenceScan is how much of the end of a log is searched for the
// evidence line.
const maxEvidenceScan = 256 << 20

// evidenceAt is the offset of the evidence line needle in run's log f, -1
// when it is not in the last maxEvidenceScan bytes, looked for once per
// size of the log.
func (s *server) evidenceAt(run string, f *os.File, needle string) int64 {
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	k := evidenceKey{run, needle, st.Size()}
	s.mu.Lock()
	off, ok := s.found[k]
	s.mu.Unlock()
	if ok {
		return off
	}
	off = findLast(f, []byte(needle), maxEvidenceScan)
	s.mu.Lock()
	if len(s.found) > 10000 {
		clear(s.found)
	}
	s.found[k] = off
	s.mu.Unlock()
	return off
}

// forget drops what evidenceAt found.
func (s *server) forget() {
	s.mu.Lock()
	clear(s.found)
	s.mu.Unlock()
}

func newServer(cfg Config) *server {
	if cfg.RunDir == "" {
		cfg.RunDir = pilot.DefaultRunDir()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.TailBytes <= 0 {
		cfg.TailBytes = 64 << 10
	}
	cfg.StateDirs = slices.Clone(cfg.StateDirs)
	s := &server{cfg: cfg, dir: cfg.RunDir, pages: map[string]*template.Template{}, now: time.Now, found: map[evidenceKey]int64{}}
	base := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/base.html", "assets/parts.html"))
	for _, p := range []string{"index", "run", "group"} {
		s.pages[p] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/"+p+".html"))
	}
	return s
}

var funcs = template.FuncMap{
	"inc": func(i int) int { return i + 1 },
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"json": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	},
}

// render writes page with data, or a 500.
func (s *server) render(w http.ResponseWriter, page, name string, data any) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// fragment is template name of page rendered to a string.
func (s *server) fragment(page, name string, data any) (string, error) {
	var b strings.Builder
	err := s.pages[page].ExecuteTemplate(&b, name, data)
	return b.String(), err
}

// findRun is the run whose id is id in the run directory's listing; the
// request names a run, never a path.
func (s *server) findRun(id string) (runs.Run, bool) {
	list, _ := runs.List(s.dir)
	for _, r := range list {
		if r.ID == id {
			return r, true
		}
	}
	return runs.Run{}, false
}

// runRow is a run as the runs table shows it.
type runRow struct {
	ID, Job, Provider, Mode, Status, Class, Duration, Tokens, Cost, Peak, Workdir, Age, Group string
	Running, OK                                                                               bool
}

func (s *server) row(r runs.Run, now time.Time) runRow {
	rec := r.Record
	row := runRow{ID: r.ID, Job: cmpOr(rec.GroupJob, rec.Label), Provider: rec.Provider, Mode: string(rec.Mode),
		Status: rec.Status, Class: string(rec.FailureClass), Workdir: rec.Workdir, Group: rec.Group,
		Running: rec.Status == runs.StatusRunning, OK: rec.Verdict.Success()}
	if rec.Verdict != "" && string(rec.Verdict) != rec.Status {
		row.Status += "/" + string(rec.Verdict)
	}
	if row.Running {
		if alive, _ := r.Owner(); !alive {
			row.Status += " (pilot gone)"
		}
	}
	switch {
	case rec.EndedAt != nil:
		row.Duration = runs.Duration(rec.EndedAt.Sub(rec.StartedAt))
	case row.Running:
		row.Duration = runs.Duration(now.Sub(rec.StartedAt)) + "+"
	}
	if u := rec.Usage; u != nil {
		row.Tokens = strconv.FormatInt(u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens, 10)
		if u.CostUSD != nil {
			row.Cost = fmt.Sprintf("$%.4f", *u.CostUSD)
		}
	}
	if rec.PeakRSSBytes > 0 {
		row.Peak = size.Bytes(rec.PeakRSSBytes).String()
	}
	row.Age = runs.Duration(now.Sub(rec.StartedAt))
	return row
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// filter is the runs page's filters, from its query.
type filter struct {
	Provider, Status, Job, Workdir, Age string
	within                              time.Duration
}

func parseFilter(q map[string][]string) (filter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	f := filter{Provider: get("provider"), Status: get("status"), Job: get("job"), Workdir: get("workdir"), Age: get("age")}
	if f.Age != "" {
		d, err := parseAge(f.Age)
		if err != nil {
			return f, err
		}
		f.within = d
	}
	return f, nil
}

// parseAge is a Go duration (2h) or days (7d).
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err == nil && n > 0 {
			return time.Duration(n * 24 * float64(time.Hour)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("age: want a duration (2h) or days (7d), got %q", s)
	}
	return d, nil
}

func (f filter) keep(r runs.Run, now time.Time) bool {
	rec := r.Record
	switch {
	case f.Provider != "" && rec.Provider != f.Provider:
		return false
	case f.Status == "failed" && (rec.Status == runs.StatusRunning || rec.Verdict.Success()):
		return false
	case f.Status != "" && f.Status != "failed" && f.Status != rec.Status && f.Status != string(rec.Verdict) && f.Status != string(rec.FailureClass):
		return false
	case f.Job != "" && !strings.Contains(rec.GroupJob+"\x00"+rec.Label, f.Job):
		return false
	case f.Workdir != "" && !strings.Contains(rec.Workdir, f.Workdir):
		return false
	case f.within > 0 && now.Sub(rec.StartedAt) > f.within:
		return false
	}
	return true
}

// indexData is the runs page.
type indexData struct {
	Title    string
	Dir      string
	Filter   filter
	Err      string
	Rows     []runRow
	Groups   []groupRow
	States   []stateFile
	Live     string
	Refresh  bool
	Provider []string
}

type groupRow struct {
	ID, Kind, Started, State string
	Jobs                     int
}

func (s *server) indexModel(r *http.Request) indexData {
	now := s.now()
	d := indexData{Title: "pilot runs", Dir: s.dir, Refresh: true}
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		d.Err = err.Error()
	}
	d.Filter = f
	list, err := runs.List(s.dir)
	if err != nil {
		d.Err = strings.TrimSpace(d.Err + " " + err.Error())
	}
	seen := map[string]bool{}
	for _, run := range list {
		if p := run.Record.Provider; !seen[p] {
			seen[p] = true
			d.Provider = append(d.Provider, p)
		}
		if f.keep(run, now) {
			d.Rows = append(d.Rows, s.row(run, now))
		}
	}
	slices.Sort(d.Provider)
	ids, _ := grouplog.List(s.dir)
	for _, id := range ids {
		g, err := grouplog.Read(s.dir, id)
		if err != nil {
			continue
		}
		st := "running"
		if !g.Ended.IsZero() {
			st = "ended after " + runs.Duration(g.Ended.Sub(g.Started))
		}
		d.Groups = append(d.Groups, groupRow{ID: id, Kind: g.Kind, Started: g.Started.Local().Format("2006-01-02 15:04:05"), State: st, Jobs: len(g.Jobs)})
	}
	for _, dir := range s.cfg.StateDirs {
		d.States = append(d.States, readState(dir))
	}
	d.Live = "/live?" + r.URL.RawQuery
	return d
}

func (s *server) index(w http.ResponseWriter, r *http.Request) {
	s.render(w, "index", "page", s.indexModel(r))
}

// indexLive streams the runs table whenever it changes; it ends when the
// client goes.
func (s *server) indexLive(w http.ResponseWriter, r *http.Request) {
	// Every record is read each time: a quarter of a run's pace.
	s.stream(w, r, 4*s.cfg.Poll, func() (string, bool) {
		html, err := s.fragment("index", "runs", s.indexModel(r))
		if err != nil {
			return "", true
		}
		return html, false
	})
}

// stateFile is a schedule state file as the runs page shows it.
type stateFile struct {
	Path string
	Err  string
	Jobs []stateJob
}

type stateJob struct {
	ID, Status, Reason, Branch string
	Updated                    time.Time
}

func readState(dir string) stateFile {
	sf := stateFile{Path: filepath.Join(dir, "schedule.json")}
	data, err := os.ReadFile(sf.Path)
	if err != nil {
		sf.Err = err.Error()
		return sf
	}
	var doc struct {
		Jobs map[string]struct {
			Status    string    `json:"status"`
			Reason    string    `json:"reason"`
			Branch    string    `json:"branch"`
			UpdatedAt time.Time `json:"updated_at"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		sf.Err = err.Error()
		return sf
	}
	for id, j := range doc.Jobs {
		sf.Jobs = append(sf.Jobs, stateJob{ID: id, Status: j.Status, Reason: j.Reason, Branch: j.Branch, Updated: j.UpdatedAt})
	}
	slices.SortFunc(sf.Jobs, func(a, b stateJob) int { return strings.Compare(a.ID, b.ID) })
	return sf
}

// logLine is one line of a stream.log as a page shows it.
type logLine struct {
	Offset   int64
	Stream   string // "out", "err", or "" for a line without the prefix
	Text     string
	Evidence bool
	Cut      bool // the line goes on past the window
}

// runData is a run's page.
type runData struct {
	Title      string
	Run        runRow
	Rec        pilot.Record
	Evidence   string
	EvidenceAt int64 // offset of the evidence line in stream.log; -1 when not found
	LogErr     string
	Lines      []logLine
	Win        window
	Earlier    int64 // from= of the window before; -1 when there is none
	Later      int64 // from= of the window after; -1 when the window ends the log
	Live       string
	Refresh    bool
	Events     []eventRow
	EventsCut  bool
	// Previous and ResumedFrom are the run ids of the attempt before and
	// of the run whose session this one continues, when they are runs of
	// this run directory.
	Previous, ResumedFrom string
}

type eventRow struct {
	Time, Type, Summary string
}

func (s *server) run(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(r.PathValue("id"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	from := int64(-1)
	if v := r.URL.Query().Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "from: want a byte offset", http.StatusBadRequest)
			return
		}
		from = n
	}
	rec := run.Record
	d := runData{Title: run.ID, Run: s.row(run, s.now()), Rec: rec, EvidenceAt: -1, Earlier: -1, Later: -1}
	d.Evidence = evidenceNeedle(rec.EvidenceExcerpt)
	f, err := openRunFile(run, "stream.log")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.LogErr = "no stream.log yet"
	case err != nil:
		d.LogErr = "stream.log cannot be served: " + err.Error()
	default:
		defer f.Close()
		if d.Evidence != "" {
			d.EvidenceAt = s.evidenceAt(run.ID, f, d.Evidence)
		}
		if from < 0 && d.EvidenceAt >= 0 {
			st, _ := f.Stat()
			if st != nil && d.EvidenceAt < st.Size()-s.cfg.TailBytes {
				from = max(0, lineStart(f, d.EvidenceAt)-s.cfg.TailBytes/2)
			}
		}
		win, err := readWindow(f, from, s.cfg.TailBytes)
		if err != nil {
			d.LogErr = err.Error()
			break
		}
		d.Win = win
		d.Lines = splitLines(win, d.EvidenceAt)
		if win.Start > 0 {
			d.Earlier = max(0, win.Start-s.cfg.TailBytes)
		}
		if win.End < win.Size {
			d.Later = win.End
		}
	}
	d.Events, d.EventsCut = s.events(run)
	d.Previous, d.ResumedFrom = s.runOf(rec.PreviousRecord), s.runOf(rec.ResumedFrom)
	if rec.Status == runs.StatusRunning && d.Later < 0 {
		d.Refresh = true
		d.Live = fmt.Sprintf("/run/%s/live?offset=%d", run.ID, d.Win.End)
	}
	s.render(w, "run", "page", d)
}

// runOf is the id of the run whose record.json is path, when it is a run
// of the run directory; "" otherwise.
func (s *server) runOf(path string) string {
	if path == "" {
		return ""
	}
	id := filepath.Base(filepath.Dir(path))
	if r, ok := s.findRun(id); ok && filepath.Clean(r.RecordPath()) == filepath.Clean(path) {
		return id
	}
	return ""
}

// evidenceNeedle is what of an evidence excerpt is looked for in the log:
// its first line, without an ellipsis a cut left, at most 200 bytes.
func evidenceNeedle(ex string) string {
	ex, _, _ = strings.Cut(ex, "\n")
	ex = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(ex), "…"))
	if len(ex) > 200 {
		ex = ex[:200]
		for len(ex) > 0 && ex[len(ex)-1]&0xc0 == 0x80 {
			ex = ex[:len(ex)-1]
		}
		if len(ex) > 0 && ex[len(ex)-1] >= 0xc0 {
			ex = ex[:len(ex)-1]
		}
	}
	return ex
}

// splitLines cuts a window into lines, marking the one holding offset
// evidence.
func splitLines(win window, evidence int64) []logLine {
	var out []logLine
	off := win.Start
	for data := win.Data; len(data) > 0; {
		line, cut := data, false
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data, cut = nil, true
		}
		l := logLine{Offset: off, Text: string(line), Cut: cut}
		for _, p := range []string{"out", "err"} {
			if rest, ok := bytes.CutPrefix(line, []byte(p+" ")); ok {
				l.Stream, l.Text = p, string(rest)
			}
		}
		end := off + int64(len(line))
		l.Evidence = evidence >= off && evidence <= end
		out = append(out, l)
		off = end + 1
	}
	return out
}

// maxEvents is how much of the end of events.log a run's page shows.
const maxEvents = 256 << 10

// events reads the end of the run's events.log: time, type and what it
// says of each event; cut reports that earlier events were left out.
func (s *server) events(run runs.Run) (rows []eventRow, cut bool) {
	f, err := openRunFile(run, "events.log")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	win, err := readWindow(f, -1, maxEvents)
	if err != nil {
		return nil, false
	}
	br := bufio.NewReader(bytes.NewReader(win.Data))
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			rows = append(rows, eventSummary(line))
		}
		if err != nil {
			break
		}
	}
	return rows, win.Start > 0
}

// eventSummary is an events.log line as a timeline row: its time, type,
// and the rest of its fields.
func eventSummary(line []byte) eventRow {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return eventRow{Type: "?", Summary: string(bytes.TrimSpace(line))}
	}
	var row eventRow
	var t, typ string
	for _, k := range []string{"time", "started_at", "ended_at"} {
		if t == "" {
			json.Unmarshal(m[k], &t)
		}
	}
	json.Unmarshal(m["type"], &typ)
	for _, k := range []string{"time", "type", "run_id", "provider", "mode", "record"} {
		delete(m, k) // the page says them already
	}
	if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
		row.Time = ts.Local().Format("15:04:05.000")
	}
	row.Type = strings.TrimPrefix(typ, "worker_runner.")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 600 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	row.Summary = strings.TrimSpace(b.String())
	return row
}

// runLive streams a running run: its log's new lines from ?offset=, its
// status when it changes, and "end" once the record says it is over (all
// of the log is out then: pilot closes the log before the final record).
func (s *server) runLive(w http.ResponseWriter, r *http.Request) {
	run, ok := s.findRun(r.PathValue("id"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	off, err := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
	if err != nil || off < 0 {
		http.Error(w, "offset: want a byte offset", http.StatusBadRequest)
		return
	}
	status := ""
	serveEvents(w, r, s.cfg.Poll, func() (bool, string) {
		rec, err := pilot.ReadRecord(run.RecordPath())
		over := err == nil && rec.Status != runs.StatusRunning
		if err == nil && rec.Status != status {
			status = rec.Status
			b, _ := json.Marshal(map[string]string{"status": rec.Status, "verdict": string(rec.Verdict), "class": string(rec.FailureClass)})
			sendEvent(w, "status", string(b))
		}
		// At most 16 windows a look: a client far behind (a small
		// offset into a huge log) catches up at a bounded pace.
		behind := false
		for n := 0; ; n++ {
			f, err := openRunFile(run, "stream.log")
			if err != nil {
				break
			}
			win, err := readWindow(f, off, s.cfg.TailBytes)
			f.Close()
			if err != nil || len(win.Data) == 0 {
				break
			}
			if n == 16 {
				behind = true // more at the next look
				break
			}
			type jl struct {
				S   string `json:"s"`
				T   string `json:"t"`
				Cut bool   `json:"cut,omitempty"` // it goes on in the next event
			}
			var lines []jl
			for _, l := range splitLines(win, -1) {
				lines = append(lines, jl{l.Stream, l.Text, l.Cut})
			}
			b, _ := json.Marshal(map[string]any{"offset": win.End, "lines": lines})
			sendEvent(w, "log", string(b))
			off = win.End
			if win.End >= win.Size {
				break
			}
		}
		return over && !behind, status
	})
}

// stream sends what next returns as a "fragment" event whenever it
// changes, looking at every tick of every, until next says done (then
// "end") or the client goes.
func (s *server) stream(w http.ResponseWriter, r *http.Request, every time.Duration, next func() (html string, done bool)) {
	last := ""
	serveEvents(w, r, every, func() (bool, string) {
		html, done := next()
		if html != last {
			sendEvent(w, "fragment", html)
			last = html
		}
		return done, ""
	})
}

// serveEvents answers r with server-sent events: look writes one look's events,
// every tick of every, until it says done (then "end", with end as its
// data) or the client goes.
func serveEvents(w http.ResponseWriter, r *http.Request, every time.Duration, look func() (done bool, end string)) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		done, end := look()
		if done {
			sendEvent(w, "end", end)
			fl.Flush()
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// sendEvent writes one server-sent event.
func sendEvent(w io.Writer, name, data string) {
	var b strings.Builder
	b.WriteString("event: " + name + "\n")
	for _, l := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimSuffix(l, "\r") + "\n")
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}
