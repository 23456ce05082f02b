package temporal

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

// The histories the replay tests replay: RunJobs runs of recordInput,
// recorded against a Temporal server by TestRecordRunJobsHistory.
//
//   - runjobs-history.json: recorded with the workflow as it is, RunJobs'
//     input defaults in a SideEffect ("defaults-recorded" version 1).
//     Re-record it after a change of RunJobs that should be tested against
//     a fresh history (keep the old file under a name of its own if
//     workflows recorded with it may still be running):
//
//     cd contrib/temporal/devserver && go build -o /tmp/devserver . &&
//     mkdir -p /tmp/devrec && /tmp/devserver -addr-file /tmp/devrec/addr &
//     cd contrib/temporal &&
//     PILOT_TEMPORAL_RECORD=testdata/runjobs-history.json \
//     PILOT_TEMPORAL_ADDR=$(sed -n 1p /tmp/devrec/addr) \
//     PILOT_TEMPORAL_NAMESPACE=$(sed -n 2p /tmp/devrec/addr) \
//     go test -count=1 -run TestRecordRunJobsHistory .
//
//   - runjobs-history-v0.json: recorded the same way, with this file
//     added to a copy of commit 5f02149 (git archive 5f02149), whose
//     RunJobs resolved the defaults inline from the constants, before
//     "defaults-recorded". It is what a workflow started by that code
//     left in its history: it stays as it is. Should a change of the
//     defaults make it fail, runs started before "defaults-recorded"
//     would fail the same way; once none is left, it goes with the
//     DefaultVersion branch of RunJobs.
const (
	historyFile   = "testdata/runjobs-history.json"
	historyFileV0 = "testdata/runjobs-history-v0.json"
	// envRecord names the file TestRecordRunJobsHistory writes; the
	// server is PILOT_TEMPORAL_ADDR's, in PILOT_TEMPORAL_NAMESPACE.
	envRecord = "PILOT_TEMPORAL_RECORD"
)

// recordInput is what the recorded runs run: jobs with dependencies, a
// dependency that fails (its dependant is blocked), and two providers
// rate limited in turn, the second for less than the first, so that its
// gate gets a timer of its own while the first's is pending. Its Queue,
// Limit, timeouts and attempts are zero: RunJobs resolves them.
func recordInput() Input {
	job := func(name, provider string, deps ...string) Job {
		return Job{Name: name, Repo: "/repo", Provider: provider, Mode: pilot.ModeCode, Deps: deps}
	}
	return Input{Jobs: []Job{
		job("long", "slow"),
		job("short", "quick"),
		job("fails", "other"),
		job("child", "other", "fails"),
		job("after", "quick", "long", "short"),
	}}
}

// recordResults is the results recordInput's runs give, summarized.
var recordResults = []string{
	"long:completed gen 2",
	"short:completed gen 2",
	"fails:error (provider-auth)",
	"child:error blocked (dependency fails did not succeed)",
	"after:completed gen 1",
}

func summarize(rs []Result) []string {
	var got []string
	for _, r := range rs {
		v := r.Verdict
		s := r.Job + ":" + string(v.Verdict.Verdict)
		switch {
		case v.Blocked:
			s += " blocked (" + v.BlockedReason + ")"
		case v.FailureClass != "":
			s += " (" + string(v.FailureClass) + ")"
		default:
			s += fmt.Sprintf(" gen %d", r.Generation)
		}
		got = append(got, s)
	}
	return got
}

// recordJobs is the RunJob stand-in of the recorded runs: long's first
// attempt is rate limited for 3 s; short's, once long's has ended, for
// 1 s; fails fails for good; the others complete.
type recordJobs struct {
	mu       sync.Mutex
	calls    map[string]int
	longDone chan struct{}
}

func (f *recordJobs) run(ctx context.Context, j Job) (Result, error) {
	f.mu.Lock()
	f.calls[j.Name]++
	n := f.calls[j.Name]
	f.mu.Unlock()
	v := pilot.Verdict{Type: "worker_runner.verdict", Job: j.Name, Provider: j.Provider, Mode: j.Mode, Verdict: pilot.Completed}
	fail := func(class pilot.FailureClass, retryAfterMS int64) {
		v.Verdict = pilot.Failed
		v.FailureClass, v.RetryAfterMS = class, retryAfterMS
	}
	switch {
	case j.Name == "long" && n == 1:
		fail(pilot.FailProviderRateLimit, 3000)
		defer close(f.longDone)
	case j.Name == "short" && n == 1:
		select {
		case <-f.longDone:
			// long's gate timer is set before short's verdict comes in.
			time.Sleep(200 * time.Millisecond)
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
		fail(pilot.FailProviderRateLimit, 1000)
	case j.Name == "fails":
		fail(pilot.FailProviderAuth, 0)
	}
	res := Result{Job: j.Name, Verdict: JobVerdict{Verdict: v}, Generation: n}
	if v.Verdict.Success() {
		return res, nil
	}
	// As RunJob fails a verdict: the failure class is the error's type,
	// the Result its details.
	return res, temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("job %s: %s (%s)", j.Name, v.Verdict, v.FailureClass), string(v.FailureClass),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{res}})
}

// TestRecordRunJobsHistory runs RunJobs over recordInput on a Temporal
// server and writes its history where envRecord says (see historyFile for
// how). It skips unless envRecord is set.
func TestRecordRunJobsHistory(t *testing.T) {
	out := os.Getenv(envRecord)
	if out == "" {
		t.Skipf("records a history only when %s names the file to write", envRecord)
	}
	addr, ns := os.Getenv("PILOT_TEMPORAL_ADDR"), os.Getenv("PILOT_TEMPORAL_NAMESPACE")
	if addr == "" || ns == "" {
		t.Fatalf("%s is set: set PILOT_TEMPORAL_ADDR and PILOT_TEMPORAL_NAMESPACE to a Temporal server's (contrib/temporal/devserver's address file)", envRecord)
	}
	logger := log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: logger, Identity: "pilot-history-recorder"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// RunJobs and its activities on the one default queue.
	w := worker.New(c, DefaultQueue, worker.Options{Identity: "pilot-history-recorder"})
	RegisterWorkflow(w)
	f := &recordJobs{calls: map[string]int{}, longDone: make(chan struct{})}
	w.RegisterActivityWithOptions(f.run, activity.RegisterOptions{Name: ActivityName})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "pilot-runjobs-record-" + time.Now().UTC().Format("20060102T150405"),
		TaskQueue: DefaultQueue,
	}, WorkflowName, recordInput())
	if err != nil {
		t.Fatal(err)
	}
	var rs []Result
	if err := run.Get(ctx, &rs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recordResults, summarize(rs)); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	hist := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		hist.Events = append(hist.Events, e)
	}
	// The JSON ReplayWorkflowHistoryFromJSONFile reads (client.HistoryFromJSON).
	data, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(hist)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d events of workflow %s to %s", len(hist.Events), run.GetID(), out)
}

// recorded is what a recorded history holds: the markers (Version ones by
// their change ID, as "Version earliest-gate-timer"), the timers started,
// the activity failures' types, and the workflow's results.
type recorded struct {
	markers  []string
	timers   int
	failures []string
	results  []Result
}

func readHistory(t *testing.T, file string) recorded {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	hist, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	dc := converter.GetDefaultDataConverter()
	var r recorded
	for _, e := range hist.Events {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			a := e.GetMarkerRecordedEventAttributes()
			m := a.GetMarkerName()
			if p := a.GetDetails()["change-id"]; p != nil {
				var id string
				if err := dc.FromPayloads(p, &id); err != nil {
					t.Fatalf("%s: event %d: %v", file, e.GetEventId(), err)
				}
				m += " " + id
			}
			r.markers = append(r.markers, m)
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			r.timers++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			r.failures = append(r.failures, e.GetActivityTaskFailedEventAttributes().GetFailure().GetApplicationFailureInfo().GetType())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			if err := dc.FromPayloads(e.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &r.results); err != nil {
				t.Fatalf("%s: the workflow's result: %v", file, err)
			}
		}
	}
	if r.results == nil {
		t.Fatalf("%s: no WorkflowExecutionCompleted event: record a run to its end", file)
	}
	return r
}

// replay replays the history in file with RunJobs as it is now and
// returns the results the replay computed.
func replay(t *testing.T, file string) []Result {
	t.Helper()
	r := worker.NewWorkflowReplayer()
	RegisterWorkflow(r)
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, file); err != nil {
		t.Fatalf("replaying %s: %v", file, err)
	}
	// The replayer keeps the result of a replay that completed (by the
	// workflow ID "ReplayId", which the empty ID stands for); its
	// interface does not say so.
	res, ok := r.(interface {
		GetWorkflowResult(workflowID string, valuePtr any) error
	})
	if !ok {
		t.Fatalf("the SDK's WorkflowReplayer (%T) has no GetWorkflowResult", r)
	}
	var rs []Result
	if err := res.GetWorkflowResult("", &rs); err != nil {
		t.Fatalf("replaying %s: %v", file, err)
	}
	return rs
}

// checkCoverage fails t unless the history h covers what a replay of it
// should: a provider gated after a rate limit, a second gate's timer set
// while the first's is pending, and a failed dependency.
func checkCoverage(t *testing.T, file string, h recorded) {
	t.Helper()
	if !contains(h.markers, "Version earliest-gate-timer") {
		t.Errorf("%s records no earliest-gate-timer version marker: %v", file, h.markers)
	}
	if h.timers < 2 {
		t.Errorf("%s starts %d gate timers; want 2 (the second gate's while the first's is pending)", file, h.timers)
	}
	if n := strings.Count(strings.Join(h.failures, ","), string(pilot.FailProviderRateLimit)); n < 2 {
		t.Errorf("%s has %d rate-limited activity failures (%v); want 2", file, n, h.failures)
	}
	if diff := cmp.Diff(recordResults, summarize(h.results)); diff != "" {
		t.Errorf("%s: recorded results (-want +got):\n%s", file, diff)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// RunJobs replays a history it recorded: every command it makes again
// matches the recorded events, the defaults come from the recorded
// SideEffect, and it ends with the results it gave then.
func TestRunJobsReplaysARecordedHistory(t *testing.T) {
	h := readHistory(t, historyFile)
	checkCoverage(t, historyFile, h)
	for _, m := range []string{"Version defaults-recorded", "SideEffect"} {
		if !contains(h.markers, m) {
			t.Errorf("%s has no %q marker (%v): it was not recorded with defaults-recorded at version 1; re-record it", historyFile, m, h.markers)
		}
	}
	if diff := cmp.Diff(h.results, replay(t, historyFile)); diff != "" {
		t.Errorf("replayed results (-recorded +replayed):\n%s", diff)
	}
}

// RunJobs replays a history recorded before its defaults were recorded
// (no defaults-recorded marker, no SideEffect): such a run resolves them
// inline, as it did then, and ends as it did.
func TestRunJobsReplaysAHistoryRecordedBeforeDefaultsWereRecorded(t *testing.T) {
	h := readHistory(t, historyFileV0)
	checkCoverage(t, historyFileV0, h)
	for _, m := range h.markers {
		if m == "Version defaults-recorded" || m == "SideEffect" {
			t.Fatalf("%s has a %q marker: it is not a history of RunJobs before defaults-recorded", historyFileV0, m)
		}
	}
	if diff := cmp.Diff(h.results, replay(t, historyFileV0)); diff != "" {
		t.Errorf("replayed results (-recorded +replayed):\n%s", diff)
	}
}
