// Package worklog keeps a task's WORK_LOG.md as the seed dispatcher does:
// the dispatcher-owned timeline of stage attempts (a START and a FINISH row
// per attempt, in KST), the execution id of each attempt, and the seed's
// work-log contract (a block per attempt with checkpoints, unexpected
// issues, verification and a final report, and the checks of it).
//
// The timeline is the dispatcher's own: a worker's WORK_LOG.md content is
// kept as it is and the timeline section is added to it, never rewritten.
// The contract's Korean vocabulary and its block template are data
// (contract.json, attempt.md), not code.
package worklog

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FileName is a task's work log, in the task's directory.
const FileName = "WORK_LOG.md"

// Zone is the seed's work-log time zone: its timestamps carry +09:00.
var Zone = time.FixedZone("KST", 9*60*60)

// Format formats t as a work-log timestamp, in Zone.
func Format(t time.Time) string { return t.In(Zone).Format(time.RFC3339) }

// The timeline's events.
const (
	Start  = "START"
	Finish = "FINISH"
)

// TimelineHeading heads the dispatcher's section of a work log.
const TimelineHeading = "## Dispatcher Timeline"

const timelineIntro = "Dispatcher-owned execution timeline: the task loop writes one START and one FINISH row per stage attempt (times in KST, +09:00). Edit above this section, not in it.\n\n" +
	"| # | time | event | task | stage | attempt | cli | status | execution | record |\n" +
	"|---|---|---|---|---|---|---|---|---|---|\n"

// An Entry is one row of the timeline.
type Entry struct {
	Time  time.Time
	Event string // Start or Finish
	Task  string
	Stage string
	// Attempt counts the stage's attempts of the task from 0; ExecutionID
	// names this one (see ExecutionID).
	Attempt     int
	ExecutionID string
	// CLI is the worker's runner ("pi"); Status is "running" at the
	// start, then "<outcome>:<exit>" ("succeeded:0", "failed:cancelled").
	CLI    string
	Status string
	// Record is pilot's record.json of the attempt, when there is one.
	Record string
}

func (e Entry) row(n int) string {
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	rec := ""
	if e.Record != "" {
		rec = "`" + cell(e.Record) + "`"
	}
	return fmt.Sprintf("| %d | %s | %s | %s | %s | %d | %s | %s | `%s` | %s |\n",
		n, Format(e.Time), e.Event, cell(e.Task), cell(e.Stage), e.Attempt, cell(e.CLI), cell(e.Status), cell(e.ExecutionID), rec)
}

// Append adds e to the timeline of the work log at path: the file and its
// timeline section are created when missing; whatever else the file holds
// is kept. The file is replaced atomically.
func Append(path string, e Entry) error {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	text := string(data)
	start := strings.Index(text, TimelineHeading+"\n")
	if start < 0 {
		if text == "" {
			text = "# Work Log\n"
		}
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "\n" + TimelineHeading + "\n\n" + timelineIntro
		start = strings.Index(text, TimelineHeading+"\n")
	}
	// The rows end where the section's table does.
	lines := strings.SplitAfter(text[start:], "\n")
	at, rows, inTable := start, 0, false
	for i, l := range lines {
		at += len(l)
		if i == 0 {
			continue
		}
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "|") {
			inTable = true
			if reRow.MatchString(t) {
				rows++
			}
			continue
		}
		if inTable || strings.HasPrefix(t, "## ") {
			at -= len(l)
			break
		}
	}
	if at > len(text) {
		at = len(text)
	}
	if at > 0 && text[at-1] != '\n' {
		text = text[:at] + "\n" + text[at:]
		at++
	}
	out := text[:at] + e.row(rows+1) + text[at:]
	return writeAtomic(path, []byte(out))
}

var reRow = regexp.MustCompile(`^\|\s*\d+\s*\|`)

// ExecutionID names the attempt-th attempt (from 0) of a task's stage under
// plan number plan: "task__p0__worker__a00". task is the plan header's task
// name, or the task's directory name.
func ExecutionID(task string, plan int, stage string, attempt int) string {
	return fmt.Sprintf("%s__p%d__%s__a%02d", safe(task), plan, stage, attempt)
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '+' || r == ',' {
			return r
		}
		return '-'
	}, s)
}

// Has reports whether the work log at path names execution id anywhere (a
// timeline row or an attempt block): after the dispatcher's state was lost,
// an id already used must not be used again.
func Has(path, id string) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.Contains(string(data), "`"+id+"`"), nil
}

// NextExecution returns the first attempt number, asked of next in turn,
// whose execution id the work log at path does not already name. next is
// the dispatcher's own counter (it returns 0, 1, 2... as the state
// allows); after a loss of that state it starts over, and the work log
// says which ids are taken.
func NextExecution(path string, next func() (int, error), id func(attempt int) string) (int, string, error) {
	for range 1000 {
		n, err := next()
		if err != nil {
			return 0, "", err
		}
		taken, err := Has(path, id(n))
		if err != nil {
			return 0, "", err
		}
		if !taken {
			return n, id(n), nil
		}
	}
	return 0, "", fmt.Errorf("worklog: %s: 1000 execution ids in a row already taken", path)
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(dirOf(path), ".worklog-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[:i+1]
	}
	return "."
}

//go:embed contract.json
var contractJSON []byte

//go:embed attempt.md
var attemptTemplate string

// Contract is the seed's work-log contract: its vocabulary (contract.json)
// and the block an attempt must fill (attempt.md).
type Contract struct {
	AttemptHeading      string   `json:"attempt_heading"`
	RuntimeHeading      string   `json:"runtime_heading"`
	CheckpointsSection  string   `json:"checkpoints_section"`
	IssuesSection       string   `json:"issues_section"`
	VerificationSection string   `json:"verification_section"`
	ReportSection       string   `json:"report_section"`
	Unwritten           string   `json:"unwritten"`
	NoRecord            string   `json:"no_record"`
	None                string   `json:"none"`
	StatusField         string   `json:"status_field"`
	SyncField           string   `json:"sync_field"`
	Complete            string   `json:"complete"`
	ReportFields        []string `json:"report_fields"`
	Errors              struct {
		CheckpointsMissing  string `json:"checkpoints_missing"`
		CheckpointFormat    string `json:"checkpoint_format"`
		IssuesMissing       string `json:"issues_missing"`
		IssueFormat         string `json:"issue_format"`
		VerificationMissing string `json:"verification_missing"`
		ReportFieldMissing  string `json:"report_field_missing"`
		SyncIncomplete      string `json:"sync_incomplete"`
		AttemptMissing      string `json:"attempt_missing"`
	} `json:"errors"`
	PromptTemplate string `json:"prompt"`
	// Template is the attempt block, placeholders in braces.
	Template string `json:"-"`
}

// DefaultContract is the embedded contract.
func DefaultContract() Contract {
	var c Contract
	if err := json.Unmarshal(contractJSON, &c); err != nil {
		panic(err) // a bug in the embedded file
	}
	c.Template = attemptTemplate
	if i := strings.Index(c.Template, "-->\n"); strings.HasPrefix(c.Template, "<!--") && i >= 0 {
		c.Template = c.Template[i+len("-->\n"):]
	}
	return c
}

func fill(s string, kv ...string) string { return strings.NewReplacer(kv...).Replace(s) }

// Attempt describes one stage attempt for its contract block.
type Attempt struct {
	ExecutionID string
	Stage       string
	CLI, Model  string
	Record      string
	StartedAt   time.Time
}

// AppendAttempt adds a's block, to be filled by the worker, to the work log
// at path (creating it), and returns path.
func (c Contract) AppendAttempt(path string, a Attempt) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	text := string(data)
	if text == "" {
		text = "# Work Log\n"
	}
	block := fill(c.Template, "{execution_id}", a.ExecutionID, "{stage}", a.Stage, "{cli}", a.CLI,
		"{model}", a.Model, "{record}", a.Record, "{started_at}", Format(a.StartedAt))
	// The block goes before the dispatcher's timeline, which stays last.
	if i := strings.Index(text, TimelineHeading+"\n"); i >= 0 {
		text = text[:i] + block + "\n" + text[i:]
	} else {
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "\n" + block
	}
	return path, writeAtomic(path, []byte(text))
}

// Prompt is what a worker is told of the contract for its attempt.
func (c Contract) Prompt(path, id string) string {
	return fill(c.PromptTemplate, "{work_log}", path, "{execution_id}", id)
}

var (
	reCheckpoint = regexp.MustCompile(`^- \S+ \| [^|]+ \| [^|]+ \| [^|]+ \| evidence=.+ \| next=.+$`)
	reIssue      = regexp.MustCompile(`^- \S+ \| [^|]+ \| [^|]+ \| impact=.+ \| action=.+ \| disposition=.+$`)
)

// AttemptResult checks the block of execution id in the work log at path:
// status is its final report's status ("" while unwritten), errors what
// the contract finds missing or malformed, in the contract's words.
func (c Contract) AttemptResult(path, id string) (status string, errs []string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	block, ok := c.block(string(data), id)
	if !ok {
		return "", []string{c.Errors.AttemptMissing}, nil
	}
	sec := subsections(block)
	bullets := func(name string) []string {
		var out []string
		for _, l := range sec[name] {
			if t := strings.TrimSpace(l); strings.HasPrefix(t, "- ") {
				out = append(out, t)
			}
		}
		return out
	}
	unrecorded := func(b []string) bool { return len(b) == 0 || len(b) == 1 && b[0] == "- "+c.NoRecord }
	if b := bullets(c.CheckpointsSection); unrecorded(b) {
		errs = append(errs, c.Errors.CheckpointsMissing)
	} else if !all(b, reCheckpoint) {
		errs = append(errs, c.Errors.CheckpointFormat)
	}
	if b := bullets(c.IssuesSection); unrecorded(b) {
		errs = append(errs, c.Errors.IssuesMissing)
	} else if !(len(b) == 1 && b[0] == "- "+c.None) && !all(b, reIssue) {
		errs = append(errs, c.Errors.IssueFormat)
	}
	if unrecorded(bullets(c.VerificationSection)) {
		errs = append(errs, c.Errors.VerificationMissing)
	}
	fields := map[string]string{}
	for _, b := range bullets(c.ReportSection) {
		if k, v, ok := strings.Cut(strings.TrimPrefix(b, "- "), ":"); ok {
			fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	for _, f := range c.ReportFields {
		v := fields[f]
		if v == "" || v == c.Unwritten {
			errs = append(errs, fill(c.Errors.ReportFieldMissing, "{field}", f))
			continue
		}
		if f == c.SyncField && v != c.Complete {
			errs = append(errs, c.Errors.SyncIncomplete)
		}
	}
	if v := fields[c.StatusField]; v != c.Unwritten {
		status = v
	}
	return status, errs, nil
}

func all(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if !re.MatchString(l) {
			return false
		}
	}
	return true
}

// block is the text of execution id's block: from its heading to the next
// "## " heading.
func (c Contract) block(text, id string) (string, bool) {
	head := fill(c.AttemptHeading, "{execution_id}", id)
	i := strings.Index(text, head+"\n")
	if i < 0 {
		return "", false
	}
	rest := text[i+len(head)+1:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j+1]
	}
	return rest, true
}

// subsections splits a block into its "### " sections.
func subsections(block string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(block, "\n") {
		if name, ok := strings.CutPrefix(l, "### "); ok {
			cur = strings.TrimSpace(name)
			continue
		}
		if cur != "" {
			out[cur] = append(out[cur], l)
		}
	}
	return out
}

// AppendRuntimeResult records under execution id's block how the attempt
// ended: its exit code (or how it ended without one), its failure class
// ("none" for none) and pilot's record.
func (c Contract) AppendRuntimeResult(path, id, exit, class, record string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	if class == "" {
		class = "none"
	}
	add := fill(c.RuntimeHeading, "{execution_id}", id) + "\n\n" +
		"- exit_code: `" + exit + "`\n- failure_class: `" + class + "`\n- record: `" + record + "`\n\n"
	head := fill(c.AttemptHeading, "{execution_id}", id)
	at := len(text)
	if i := strings.Index(text, head+"\n"); i >= 0 {
		if j := strings.Index(text[i+len(head):], "\n## "); j >= 0 {
			at = i + len(head) + j + 1
		}
	}
	if at == len(text) && !strings.HasSuffix(text, "\n\n") {
		add = "\n" + add
	}
	return writeAtomic(path, []byte(text[:at]+add+text[at:]))
}

// Exit is the timeline's and runtime record's word for how a worker ended:
// its exit code, or "cancelled", "signal" or "none".
func Exit(code *int, cancelled bool, signal string) string {
	switch {
	case cancelled:
		return "cancelled"
	case code != nil:
		return strconv.Itoa(*code)
	case signal != "":
		return signal
	}
	return "none"
}
