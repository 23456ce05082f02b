// Package taskfile reads the seed dispatcher's agent-task directories
// (agent-task/<group>/<NN[+deps]_name>/ with PLAN-<lane>-G<grade>.md,
// CODE_REVIEW-<lane>-G<grade>.md and an optional USER_REVIEW.md) and makes
// the checks the seed makes: which stage a task is at, whether a user
// review is a real stop, whether the implementation-review fields are
// filled. Section names and markers are data (seed.json, embedded;
// LoadSeed reads another).
package taskfile

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

//go:embed seed.json
var seedJSON []byte

//go:embed review-stub.md
var reviewStub string

// ReviewStub is a new CODE_REVIEW file for plan header h: the sections the
// implementing agent fills, unfilled (the seed's local review stub; the
// official review adds its verdict section).
func ReviewStub(h Header) string {
	return strings.NewReplacer("{task}", h.Task, "{plan}", strconv.Itoa(h.Plan), "{tag}", h.Tag).Replace(reviewStub)
}

// Seed is the seed dispatcher's vocabulary: section names, labels, markers,
// error texts and the routes of grades to CLIs and models.
type Seed struct {
	WriteSetSection        string   `json:"write_set_section"`
	OfficialVerdictSection string   `json:"official_verdict_section"`
	VerdictLabel           string   `json:"verdict_label"`
	Verdicts               []string `json:"verdicts"`
	// PassVerdict is the verdict that completes a task.
	PassVerdict string `json:"pass_verdict"`
	// ReviewSyncItem is how the review checklist's sync item begins
	// (its wording after that varies between templates).
	ReviewSyncItem string   `json:"review_sync_item"`
	NoneValues     []string `json:"none_values"`
	UserReview     struct {
		StatusSection   string `json:"status_section"`
		StatusValue     string `json:"status_value"`
		ReasonSection   string `json:"reason_section"`
		TypeLabel       string `json:"type_label"`
		TargetLabel     string `json:"target_label"`
		EvidenceSection string `json:"evidence_section"`
		EvidenceLabel   string `json:"evidence_label"`
		DecisionSection string `json:"decision_section"`
		ResumeSection   string `json:"resume_section"`
	} `json:"user_review"`
	ImplementationReview struct {
		ItemsSection        string   `json:"items_section"`
		ChecklistSection    string   `json:"checklist_section"`
		ChangesSection      string   `json:"changes_section"`
		DecisionsSection    string   `json:"decisions_section"`
		VerificationSection string   `json:"verification_section"`
		VerificationLabel   string   `json:"verification_label"`
		Unwritten           []string `json:"unwritten"`
		Errors              struct {
			Checklist, Items, Changes, Decisions, Verification, Sync string
		} `json:"errors"`
	} `json:"implementation_review"`
	// Prompts are the stages' prompts ("worker", "selfcheck", "review"),
	// with {plan} and {review} standing for the task's files, and
	// "resume", the prompt of an attempt that continues a stalled one's
	// session.
	Prompts map[string]string `json:"prompts"`
	Routes  []Route           `json:"routes"`
}

// A Route sends the tasks of a range of grades to a CLI and model: the
// worker and selfcheck stages to Provider, the official review to
// ReviewProvider (pilot provider names, in the registry the task loop
// dispatches with). CLI, Model and LocalPi say what the seed meant the
// provider to be.
type Route struct {
	MinGrade       int    `json:"min_grade"`
	MaxGrade       int    `json:"max_grade"`
	CLI            string `json:"cli"`
	Model          string `json:"model"`
	LocalPi        bool   `json:"local_pi"`
	Provider       string `json:"provider"`
	ReviewProvider string `json:"review_provider"`
}

// ProviderFor is the provider that runs stage for the route.
func (r Route) ProviderFor(stage string) string {
	if stage == StageReview {
		return r.ReviewProvider
	}
	return r.Provider
}

// Prompt is stage's prompt for task t, its file paths filled in.
func (s Seed) Prompt(stage string, t Task) string {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	return strings.NewReplacer("{plan}", abs(t.Plan), "{review}", abs(t.Review)).Replace(s.Prompts[stage])
}

// DefaultSeed is the embedded seed.json.
func DefaultSeed() Seed {
	s, err := parseSeed(seedJSON, "the embedded seed.json")
	if err != nil {
		panic(err) // a bug in the embedded file
	}
	return s
}

// LoadSeed reads a file of seed.json's shape; unknown fields are an error
// that names them.
func LoadSeed(path string) (Seed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Seed{}, err
	}
	return parseSeed(data, path)
}

// LoadRoutes reads a routes file, {"routes": [...]} in seed.json's shape,
// and returns s with those routes instead of its own.
func (s Seed) LoadRoutes(path string) (Seed, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	var f struct {
		Routes []Route `json:"routes"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return s, fmt.Errorf("%s: %v (want {\"routes\": [{\"min_grade\": 0, \"max_grade\": 6, \"provider\": \"...\", \"review_provider\": \"...\"}]})", path, err)
	}
	if len(f.Routes) == 0 {
		return s, fmt.Errorf("%s: no routes", path)
	}
	for i, r := range f.Routes {
		if r.Provider == "" || r.ReviewProvider == "" {
			return s, fmt.Errorf("%s: route %d (grades %d-%d) names no provider or review_provider", path, i+1, r.MinGrade, r.MaxGrade)
		}
	}
	s.Routes = f.Routes
	return s, nil
}

func parseSeed(data []byte, name string) (Seed, error) {
	var s Seed
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return s, fmt.Errorf("%s: %v", name, err)
	}
	delete(raw, "_comment")
	clean, _ := json.Marshal(raw)
	dec := json.NewDecoder(strings.NewReader(string(clean)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %v", name, err)
	}
	return s, nil
}

// Route is the route of grade: the first whose range holds it.
func (s Seed) Route(grade int) (Route, bool) {
	for _, r := range s.Routes {
		if grade >= r.MinGrade && grade <= r.MaxGrade {
			return r, true
		}
	}
	return Route{}, false
}

// sections splits markdown text into its "## " sections: name -> body
// lines, the first section of a name winning.
func sections(text string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if name, ok := strings.CutPrefix(line, "## "); ok {
			cur = strings.TrimSpace(name)
			if _, seen := out[cur]; seen {
				cur = "\x00" + cur // a repeat: its lines belong to no section
			}
			out[cur] = []string{}
			continue
		}
		if strings.HasPrefix(line, "# ") {
			cur = ""
			continue
		}
		if cur != "" {
			out[cur] = append(out[cur], line)
		}
	}
	return out
}

// plain is line without list markers and emphasis.
func plain(line string) string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "- ")
	line = strings.ReplaceAll(line, "**", "")
	return strings.TrimSpace(line)
}

// labelled returns the value of "label: value" in lines.
func labelled(lines []string, label string) (string, bool) {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(plain(l), label); ok {
			if v, ok := strings.CutPrefix(strings.TrimSpace(v), ":"); ok {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

func (s Seed) isNone(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || slices.Contains(s.NoneValues, v)
}

// OfficialVerdict reports whether review text holds the official verdict
// section with a verdict ("- **종합 판정**: WARN"): only that starts review
// recovery; the same words elsewhere do not.
func (s Seed) OfficialVerdict(review string) bool { return s.Verdict(review) != "" }

// Verdict is the verdict of review text's official verdict section
// ("PASS", "WARN", "FAIL"), or "" when the section gives none.
func (s Seed) Verdict(review string) string {
	v, ok := labelled(sections(review)[s.OfficialVerdictSection], s.VerdictLabel)
	if !ok {
		return ""
	}
	word, _, _ := strings.Cut(v, " ")
	if !slices.Contains(s.Verdicts, word) {
		return ""
	}
	return word
}

// reviewSynced reports whether the review's sync item is checked.
func (s Seed) reviewSynced(review string) (checked, present bool) {
	for _, l := range strings.Split(review, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "- [x] "+s.ReviewSyncItem) || strings.HasPrefix(t, "- [X] "+s.ReviewSyncItem):
			return true, true
		case strings.HasPrefix(t, "- [ ] "+s.ReviewSyncItem):
			present = true
		}
	}
	return false, present
}

// UserReviewStop reports whether a USER_REVIEW.md text is a real stop: its
// status says USER_REVIEW and it gives the blocking contract (the reason's
// type and target, the evidence, a decision to make, a resume condition),
// none of them a none value ("없음").
func (s Seed) UserReviewStop(text string) bool {
	u := s.UserReview
	sec := sections(text)
	if !slices.ContainsFunc(sec[u.StatusSection], func(l string) bool { return strings.TrimSpace(l) == u.StatusValue }) {
		return false
	}
	for _, f := range []struct{ section, label string }{
		{u.ReasonSection, u.TypeLabel}, {u.ReasonSection, u.TargetLabel}, {u.EvidenceSection, u.EvidenceLabel},
	} {
		if v, ok := labelled(sec[f.section], f.label); !ok || s.isNone(v) {
			return false
		}
	}
	for _, name := range []string{u.DecisionSection, u.ResumeSection} {
		found := false
		for _, l := range sec[name] {
			t := strings.TrimSpace(l)
			if !strings.HasPrefix(t, "- ") {
				continue
			}
			t = strings.TrimSpace(strings.TrimPrefix(t, "- "))
			for _, box := range []string{"[ ] ", "[x] ", "[X] "} {
				t = strings.TrimPrefix(t, box)
			}
			if !s.isNone(t) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ImplementationReviewErrors lists the implementation-review fields of a
// CODE_REVIEW text that are not filled, in the seed's order: the checklist,
// the per-item completion table, the changes against the plan, the design
// decisions, the verification result, and the review sync item.
func (s Seed) ImplementationReviewErrors(review string) []string {
	ir := s.ImplementationReview
	sec := sections(review)
	var errs []string
	unwritten := func(lines []string) bool {
		body := strings.TrimSpace(strings.Join(lines, "\n"))
		return body == "" || slices.Contains(ir.Unwritten, body)
	}
	checklist := sec[ir.ChecklistSection]
	open := slices.ContainsFunc(checklist, func(l string) bool {
		t := strings.TrimSpace(l)
		return strings.HasPrefix(t, "- [ ]") && !strings.Contains(t, s.ReviewSyncItem)
	})
	if checklist == nil || open {
		errs = append(errs, ir.Errors.Checklist)
	}
	items := sec[ir.ItemsSection]
	if items == nil || slices.ContainsFunc(items, func(l string) bool { return strings.Contains(l, "[ ]") }) {
		errs = append(errs, ir.Errors.Items)
	}
	if unwritten(sec[ir.ChangesSection]) {
		errs = append(errs, ir.Errors.Changes)
	}
	if unwritten(sec[ir.DecisionsSection]) {
		errs = append(errs, ir.Errors.Decisions)
	}
	if !s.verified(sec[ir.VerificationSection]) {
		errs = append(errs, ir.Errors.Verification)
	}
	if checked, _ := s.reviewSynced(review); !checked {
		errs = append(errs, ir.Errors.Sync)
	}
	return errs
}

// verified reports whether a verification section states a result: the
// label's value, or the line after a bare label, is not an unwritten mark.
func (s Seed) verified(lines []string) bool {
	ir := s.ImplementationReview
	for i, l := range lines {
		v, ok := labelled([]string{l}, ir.VerificationLabel)
		if !ok {
			continue
		}
		if v == "" {
			for _, next := range lines[i+1:] {
				if n := strings.TrimSpace(next); n != "" {
					v = n
					break
				}
			}
		}
		return v != "" && !slices.Contains(ir.Unwritten, v)
	}
	return false
}

// The stages of a task.
const (
	StageWorker     = "worker"
	StageSelfcheck  = "selfcheck"
	StageReview     = "review"
	StageUserReview = "user-review"
	StageBlocked    = "blocked"
)

// Progress is what the dispatcher's state says of a task's stages.
type Progress struct {
	WorkerDone, SelfcheckDone bool
}

// Stage is the stage task t is at: a user review that is a real stop holds
// it (with an active plan/review pair, or without the blocking contract, it
// is blocked instead); a worker's success needs a selfcheck before review;
// review text with the official verdict, or a checked sync item, resumes
// review; otherwise the worker runs.
func (s Seed) Stage(t Task, p Progress) (string, error) {
	if t.UserReview != "" {
		if t.Plan != "" || t.Review != "" {
			return StageBlocked, nil
		}
		data, err := os.ReadFile(t.UserReview)
		if err != nil {
			return "", err
		}
		if s.UserReviewStop(string(data)) {
			return StageUserReview, nil
		}
		return StageBlocked, nil
	}
	if p.WorkerDone {
		if !p.SelfcheckDone {
			return StageSelfcheck, nil
		}
		return StageReview, nil
	}
	if t.Review != "" {
		data, err := os.ReadFile(t.Review)
		if err != nil {
			return "", err
		}
		if s.OfficialVerdict(string(data)) {
			return StageReview, nil
		}
		if checked, _ := s.reviewSynced(string(data)); checked {
			return StageReview, nil
		}
	}
	return StageWorker, nil
}

// A Header is a task file's first line, <!-- task=NAME plan=N tag=TAG -->.
type Header struct {
	Task string `json:"task"`
	Plan int    `json:"plan"`
	Tag  string `json:"tag"`
}

var reHeader = regexp.MustCompile(`<!--\s*task=(\S+)\s+plan=(\d+)\s+tag=(\S+)\s*-->`)

// ParseHeader reads the header of a task file's text.
func ParseHeader(text string) (Header, bool) {
	m := reHeader.FindStringSubmatch(text)
	if m == nil {
		return Header{}, false
	}
	n, _ := strconv.Atoi(m[2])
	return Header{Task: m[1], Plan: n, Tag: m[3]}, true
}

// WriteSetPaths returns the paths a plan lists in its write-set section's
// table (the first column, in backquotes), as written.
func (s Seed) WriteSetPaths(plan string) []string {
	var out []string
	for _, l := range sections(plan)[s.WriteSetSection] {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(t, "|"), "|")
		cell := strings.TrimSpace(cells[0])
		if len(cell) < 3 || cell[0] != '`' || cell[len(cell)-1] != '`' {
			continue
		}
		// One code span: `path`; a cell of backquotes alone names nothing.
		if p := cell[1 : len(cell)-1]; strings.TrimSpace(p) != "" && !strings.Contains(p, "`") {
			out = append(out, p)
		}
	}
	return out
}

// A Task is one task directory.
type Task struct {
	// Name is its path under agent-task/ ("group/01_gate"); Dir its
	// directory.
	Name string
	Dir  string
	// Plan, Review and UserReview are its files, or "".
	Plan, Review, UserReview string
	// Recovery is set when it has no active plan and review, only the
	// logs of earlier ones.
	Recovery bool
	Lane     string
	Grade    int
	// Index and Deps come from the directory name: "03+01,02_join" is
	// index 3, depending on the tasks of index 1 and 2 in its group.
	Index int
	Deps  []int
	// Header is the plan's header (or, in recovery, the review log's).
	Header Header
	// WriteSet is the plan's write-set paths as written; WriteSetKnown is
	// false when no plan (or matching archived plan) gives one.
	WriteSet      []string
	WriteSetKnown bool
}

var (
	reDirName   = regexp.MustCompile(`^(\d+)(?:\+([\d,]+))?_`)
	rePlan      = regexp.MustCompile(`^PLAN-([a-z]+)-G(\d+)\.md$`)
	reReview    = regexp.MustCompile(`^CODE_REVIEW-([a-z]+)-G(\d+)\.md$`)
	rePlanLog   = regexp.MustCompile(`^plan_([a-z]+)_G(\d+)_(\d+)\.log$`)
	reReviewLog = regexp.MustCompile(`^code_review_([a-z]+)_G(\d+)_(\d+)\.log$`)
)

// Read reads the task directory dir of workspace; ok is false when dir
// holds no task (no plan, review, logs or user review).
func (s Seed) Read(workspace, dir string) (t Task, ok bool, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Task{}, false, err
	}
	root := filepath.Join(workspace, "agent-task")
	name, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(name, "..") {
		name = filepath.Base(dir)
	}
	t = Task{Name: filepath.ToSlash(name), Dir: dir}
	if m := reDirName.FindStringSubmatch(filepath.Base(dir)); m != nil {
		t.Index, _ = strconv.Atoi(m[1])
		for _, d := range strings.Split(m[2], ",") {
			if n, err := strconv.Atoi(d); err == nil {
				t.Deps = append(t.Deps, n)
			}
		}
	}
	var planLogs, reviewLogs []string
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == "USER_REVIEW.md":
			t.UserReview = filepath.Join(dir, n)
		case rePlan.MatchString(n):
			m := rePlan.FindStringSubmatch(n)
			t.Plan, t.Lane = filepath.Join(dir, n), m[1]
			t.Grade, _ = strconv.Atoi(m[2])
		case reReview.MatchString(n):
			t.Review = filepath.Join(dir, n)
		case rePlanLog.MatchString(n):
			planLogs = append(planLogs, n)
		case reReviewLog.MatchString(n):
			reviewLogs = append(reviewLogs, n)
		}
	}
	switch {
	case t.Plan != "":
		data, err := os.ReadFile(t.Plan)
		if err != nil {
			return t, true, err
		}
		t.Header, _ = ParseHeader(string(data))
		t.WriteSet = s.WriteSetPaths(string(data))
		t.WriteSetKnown = t.WriteSet != nil
	case len(reviewLogs) > 0:
		t.Recovery = true
		if err := s.recover(&t, planLogs, reviewLogs); err != nil {
			return t, true, err
		}
	case t.UserReview == "" && t.Review == "" && len(planLogs) == 0:
		return Task{}, false, nil
	}
	return t, true, nil
}

// recover restores a recovering task's header, route and write set from
// its newest review log and the plan log whose header matches it.
func (s Seed) recover(t *Task, planLogs, reviewLogs []string) error {
	sort.Slice(reviewLogs, func(i, j int) bool { return logNumber(reviewLogs[i]) < logNumber(reviewLogs[j]) })
	latest := reviewLogs[len(reviewLogs)-1]
	m := reReviewLog.FindStringSubmatch(latest)
	t.Lane = m[1]
	t.Grade, _ = strconv.Atoi(m[2])
	data, err := os.ReadFile(filepath.Join(t.Dir, latest))
	if err != nil {
		return err
	}
	h, ok := ParseHeader(string(data))
	if !ok {
		return nil
	}
	t.Header = h
	for _, p := range planLogs {
		plan, err := os.ReadFile(filepath.Join(t.Dir, p))
		if err != nil {
			return err
		}
		if ph, ok := ParseHeader(string(plan)); ok && ph == h {
			t.WriteSet = s.WriteSetPaths(string(plan))
			t.WriteSetKnown = t.WriteSet != nil
			return nil
		}
	}
	return nil
}

func logNumber(name string) int {
	m := reReviewLog.FindStringSubmatch(name)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[3])
	return n
}

// Signature is a digest of everything in task t's directory but the
// dispatcher's own work log: a review that changed nothing else made no
// progress.
func Signature(t Task) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(t.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(t.Dir, path)
		if rel == WorkLogName || strings.HasPrefix(d.Name(), ".worklog-") {
			return nil
		}
		if d.IsDir() {
			fmt.Fprintf(h, "dir %s\n", filepath.ToSlash(rel))
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %s %d\n", filepath.ToSlash(rel), len(data))
		h.Write(data)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// WorkLogName is the work log's name in a task directory (the task loop's
// worklog package writes it); Signature leaves it out.
const WorkLogName = "WORK_LOG.md"
