package pilotslog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/pilotslog"
	"github.com/pilotworkers/pilot/pilottest"
	"github.com/pilotworkers/pilot/retry"
	"github.com/pilotworkers/pilot/schedule"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func failed(class pilot.FailureClass) *pilot.Verdict {
	v := &pilot.Verdict{Type: "worker_runner.verdict", Provider: "glm", Mode: pilot.ModeCode, RunID: "r1", Verdict: pilot.Failed, DurationMS: 1500}
	v.FailureClass, v.FailureSource = class, "provider-terminal-diagnostic"
	v.EvidenceSource, v.EvidenceExcerpt = "pi:stderr", "connection refused by api"
	return v
}

func TestLevel(t *testing.T) {
	cost := 0.25
	ok := &pilot.Verdict{Verdict: pilot.Completed, Usage: &pilot.Usage{InputTokens: 10, CostUSD: &cost}}
	for _, tc := range []struct {
		name string
		e    pilot.Event
		want slog.Level
	}{
		{"started", pilot.Event{Type: "worker_runner.started", Started: &pilot.Started{}}, slog.LevelInfo},
		{"success", pilot.Event{Type: "worker_runner.verdict", Verdict: ok}, slog.LevelInfo},
		{"verdict error", pilot.Event{Type: "worker_runner.verdict", Verdict: failed(pilot.FailProviderConnection)}, slog.LevelWarn},
		{"empty", pilot.Event{Type: "worker_runner.verdict", Verdict: &pilot.Verdict{Verdict: pilot.Empty}}, slog.LevelWarn},
		{"phase", pilot.Event{Type: "worker_runner.phase", Session: &pilot.SessionState{Phase: pilot.PhaseToolRunning}}, slog.LevelDebug},
		{"inspection", pilot.Event{Type: "worker_runner.stall_inspection", Inspection: &pilot.StallInspection{Action: "inspect"}}, slog.LevelInfo},
		{"terminate", pilot.Event{Type: "worker_runner.terminate", Message: "timeout: SIGTERM"}, slog.LevelInfo},
		{"leftovers", pilot.Event{Type: "worker_runner.leftovers"}, slog.LevelWarn},
		{"dropped", pilot.Event{Type: "worker_runner.events_dropped"}, slog.LevelWarn},
		{"retry", pilot.Event{Type: retry.EventRetry, Retry: &retry.Info{}}, slog.LevelInfo},
		{"blocked", pilot.Event{Type: retry.EventBlocked, Retry: &retry.Info{}}, slog.LevelWarn},
		{"fanout warning", pilot.Event{Type: "fanout.warning"}, slog.LevelWarn},
		{"job starting", pilot.Event{Type: "fanout.job_starting"}, slog.LevelDebug},
	} {
		if got := pilotslog.Level(tc.e); got != tc.want {
			t.Errorf("%s: Level = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// jsonRecords decodes the JSON handler's output, one record a line.
func jsonRecords(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		recs = append(recs, m)
	}
	return recs
}

func TestPilotFailure(t *testing.T) {
	own := pilot.JobResult{Verdict: pilot.Verdict{Verdict: pilot.Failed}, Synthesized: true}
	own.FailureClass, own.FailureSource = pilot.FailGeneric, "pilot"
	interrupted := own
	interrupted.Interrupted = true
	worker := pilot.JobResult{Verdict: *failed(pilot.FailProviderConnection)}
	if !pilotslog.PilotFailure(own) || pilotslog.PilotFailure(interrupted) || pilotslog.PilotFailure(worker) {
		t.Errorf("PilotFailure: pilot's own %v, interrupted %v, the worker's %v; want true, false, false",
			pilotslog.PilotFailure(own), pilotslog.PilotFailure(interrupted), pilotslog.PilotFailure(worker))
	}
}

func TestAttrsJSON(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cost := 0.5
	code := 1
	v := failed(pilot.FailProviderConnection)
	v.Job, v.ExitCode = "fix-login", &code
	v.Usage = &pilot.Usage{InputTokens: 1200, OutputTokens: 80, CacheReadTokens: 5, CostUSD: &cost}
	obs := pilotslog.Observer(l)
	obs(pilot.Event{Type: "worker_runner.started", RunID: "r1", Time: t0, Started: &pilot.Started{Provider: "glm", Mode: pilot.ModeCode, Runner: "pi", Model: "glm-5", Pid: 42, Job: "fix-login"}})
	obs(pilot.Event{Type: "worker_runner.phase", RunID: "r1", Time: t0, Session: &pilot.SessionState{Phase: pilot.PhaseToolRunning, Reason: "tool call t1 has no result"}})
	obs(pilot.Event{Type: "worker_runner.stall_inspection", RunID: "r1", Time: t0, Inspection: &pilot.StallInspection{Action: "inspect", SilenceSeconds: 2.5, Phase: pilot.PhaseToolRunning, PendingToolCallIDs: []string{"t1"}, StreamTail: "the worker's output"}})
	obs(pilot.Event{Type: "worker_runner.verdict", RunID: "r1", Time: t0.Add(2 * time.Second), Verdict: v})
	obs(pilot.Event{Type: retry.EventRetry, RunID: "r1", Time: t0, Message: "retrying", Retry: &retry.Info{Key: "k", Stage: "code", Attempt: 1, FailureClass: pilot.FailProviderConnection, Failures: 1, MaxFailures: 3, Counted: true, DelayMS: 10000}})
	got := jsonRecords(t, buf.String())
	want := []map[string]any{
		{"time": "2026-11-01T12:00:00Z", "level": "INFO", "msg": "worker_runner.started", "run_id": "r1", "provider": "glm", "mode": "code", "job": "fix-login", "runner": "pi", "model": "glm-5", "pid": 42.0},
		{"time": "2026-11-01T12:00:00Z", "level": "DEBUG", "msg": "worker_runner.phase", "run_id": "r1", "phase": "tool-running", "phase_reason": "tool call t1 has no result"},
		{"time": "2026-11-01T12:00:00Z", "level": "INFO", "msg": "worker_runner.stall_inspection", "run_id": "r1", "action": "inspect", "phase": "tool-running", "silence": 2.5e9, "pending_tool_calls": 1.0},
		{"time": "2026-11-01T12:00:02Z", "level": "WARN", "msg": "worker_runner.verdict", "run_id": "r1", "provider": "glm", "mode": "code", "job": "fix-login",
			"verdict": "error", "failure_class": "provider-connection", "failure_source": "provider-terminal-diagnostic", "evidence_source": "pi:stderr",
			"evidence": "connection refused by api", "exit_code": 1.0, "duration": 1.5e9,
			"usage": map[string]any{"input_tokens": 1200.0, "output_tokens": 80.0, "cache_read_tokens": 5.0, "cache_write_tokens": 0.0, "cost_usd": 0.5}},
		{"time": "2026-11-01T12:00:00Z", "level": "INFO", "msg": "worker_runner.retry", "run_id": "r1", "retry_key": "k", "stage": "code", "attempt": 1.0,
			"failure_class": "provider-connection", "failures": 1.0, "max_failures": 3.0, "counted": true, "delay": 1e10, "message": "retrying"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if strings.Contains(buf.String(), "the worker's output") {
		t.Errorf("a stall inspection's stream tail reached the log:\n%s", buf.String())
	}
}

// The Dispatcher logs every event of a retried task with its attempt, the
// retry event between, and pilot's own failure at Error.
func TestDispatcher(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	calls := 0
	fake := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		calls++
		if tk.Provider == "broken" {
			return pilot.Verdict{}, errors.New("pilot: creating run directory: disk full")
		}
		id := "run" + string(rune('0'+calls))
		tk.Observer(pilot.Event{Type: "worker_runner.started", RunID: id, Time: t0, Started: &pilot.Started{Provider: tk.Provider, Mode: tk.Mode, RunID: id}})
		v := pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, RunID: id, Verdict: pilot.Completed}
		if calls == 1 {
			v = *failed(pilot.FailProviderServerError)
			v.RunID = id
		}
		tk.Observer(pilot.Event{Type: "worker_runner.verdict", RunID: id, Time: t0, Verdict: &v})
		return v, nil
	})
	d := &pilotslog.Dispatcher{Logger: l, Dispatcher: &retry.Dispatcher{Dispatcher: fake, Policy: retry.Policy{
		MaxFailures: 3,
		Sleep:       func(context.Context, time.Duration) error { return nil },
	}}}
	v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "glm", Mode: pilot.ModeCode, Prompt: "p"})
	if err != nil || v.Verdict != pilot.Completed || calls != 2 {
		t.Fatalf("Dispatch = %v (%d attempts), %v", v.Verdict, calls, err)
	}
	if _, err := d.Dispatch(context.Background(), pilot.Task{Provider: "broken", Mode: pilot.ModeCode, Prompt: "p"}); err == nil {
		t.Fatal("no error from the broken dispatch")
	}
	type rec struct {
		Level, Msg, RunID string
		Attempt           float64
	}
	var got []rec
	for _, m := range jsonRecords(t, buf.String()) {
		r := rec{Level: m["level"].(string), Msg: m["msg"].(string)}
		r.RunID, _ = m["run_id"].(string)
		r.Attempt, _ = m["attempt"].(float64)
		got = append(got, r)
	}
	want := []rec{
		{"INFO", "worker_runner.started", "run1", 1},
		{"WARN", "worker_runner.verdict", "run1", 1},
		{"INFO", "worker_runner.retry", "run1", 1}, // retry.Info's attempt: the one that failed
		{"INFO", "worker_runner.started", "run2", 2},
		{"INFO", "worker_runner.verdict", "run2", 2},
		{"ERROR", "pilot.dispatch_error", "", 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s\n%s", diff, buf.String())
	}
	if !strings.Contains(buf.String(), `"error":"pilot: creating run directory: disk full"`) {
		t.Errorf("the dispatch error is not logged:\n%s", buf.String())
	}
}

// Under a layer that dispatches a task again (here a retry layer), the
// Dispatcher numbers each dispatch's events from its Task.Lineage.Attempt,
// not from 1 every time.
func TestDispatcherNumbersFromTheLineage(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	calls := 0
	fake := pilottest.DispatchFunc(func(ctx context.Context, tk pilot.Task) (pilot.Verdict, error) {
		calls++
		id := "run" + string(rune('0'+calls))
		tk.Observer(pilot.Event{Type: "worker_runner.started", RunID: id, Time: t0, Started: &pilot.Started{Provider: tk.Provider, Mode: tk.Mode, RunID: id}})
		v := pilot.Verdict{Provider: tk.Provider, Mode: tk.Mode, RunID: id, Verdict: pilot.Completed}
		if calls < 3 {
			v = *failed(pilot.FailProviderServerError)
			v.RunID = id
		}
		tk.Observer(pilot.Event{Type: "worker_runner.verdict", RunID: id, Time: t0, Verdict: &v})
		return v, nil
	})
	d := &retry.Dispatcher{Dispatcher: &pilotslog.Dispatcher{Logger: l, Dispatcher: fake}, Policy: retry.Policy{
		MaxFailures: 3,
		Sleep:       func(context.Context, time.Duration) error { return nil },
	}}
	if v, err := d.Dispatch(context.Background(), pilot.Task{Provider: "glm", Mode: pilot.ModeCode, Prompt: "p"}); err != nil || v.Verdict != pilot.Completed {
		t.Fatalf("Dispatch = %v, %v", v.Verdict, err)
	}
	var got []string
	for _, m := range jsonRecords(t, buf.String()) {
		got = append(got, fmt.Sprintf("%s %s attempt=%v", m["msg"], m["run_id"], m["attempt"]))
	}
	want := []string{
		"worker_runner.started run1 attempt=1", "worker_runner.verdict run1 attempt=1",
		"worker_runner.started run2 attempt=2", "worker_runner.verdict run2 attempt=2",
		"worker_runner.started run3 attempt=3", "worker_runner.verdict run3 attempt=3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s\n%s", diff, buf.String())
	}
}

// A Fanout finds the Check beneath the Dispatcher (Unwrap), so it still
// checks its jobs before anything runs.
func TestDispatcherChecks(t *testing.T) {
	reg, err := pilot.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	d := &pilot.Dispatcher{Providers: reg}
	ld := &pilotslog.Dispatcher{Dispatcher: d}
	f := &pilot.Fanout{Dispatcher: ld}
	_, err = f.Run(context.Background(), []pilot.Job{{Task: pilot.Task{Provider: "nobody", Mode: pilot.ModeCode, Prompt: "p"}}})
	if err == nil || !strings.Contains(err.Error(), "unknown provider") {
		t.Errorf("Fanout.Run over pilotslog.Dispatcher: err = %v, want the unknown provider", err)
	}
	if ld.Unwrap() != d {
		t.Error("Unwrap is not the wrapped Dispatcher")
	}
}

func TestScheduleObserver(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	obs := pilotslog.ScheduleObserver(l)
	obs(schedule.Event{Type: schedule.EventGated, Job: "api", Provider: "glm", Reason: "rate limited", Until: t0})
	obs(schedule.Event{Type: schedule.EventDispatch, Job: "api", Dispatch: &pilot.Event{Type: "worker_runner.verdict", Time: t0, Verdict: failed(pilot.FailProviderRateLimit)}})
	obs(schedule.Event{Type: schedule.EventDone, Job: "api", Reason: string(schedule.StatusFailed)})
	var got []string
	for _, m := range jsonRecords(t, buf.String()) {
		got = append(got, m["level"].(string)+" "+m["msg"].(string)+" "+m["schedule_job"].(string))
	}
	want := []string{"INFO schedule.gated api", "WARN worker_runner.verdict api", "WARN schedule.done api"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}
