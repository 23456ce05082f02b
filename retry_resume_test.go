package pilot_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/event"
	"github.com/pilotworkers/pilot/retry"
)

// Same-session resume and the fallback from a gone session, end to end with
// the Claude Code runner over recorded streams: the first attempt overflows
// its context, the retry resumes its session (--resume=ID, the resume
// prompt on stdin), claude answers that the conversation is gone, and the
// next attempt starts afresh with the task's own prompt and succeeds.
func TestRetryResumesTheSessionThenFallsBackWhenItIsGone(t *testing.T) {
	const session = "4e5f6071-8293-4a4b-b5c6-d7e8f90a1b2c" // prompt-too-long's session
	dir := t.TempDir()
	prefix := filepath.Join(dir, "now")
	play := func(stdout, stderr string) {
		t.Helper()
		if err := os.WriteFile(prefix+".stdout", []byte(stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prefix+".stderr", []byte(stderr), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fixture := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "claude", "stream", name+".stdout"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	play(fixture("prompt-too-long"), "")

	p := replayProvider(t, "claude", prefix)
	d := testDispatcher(t, p)
	var argvs [][]string
	var stdins []string
	observe := func(e pilot.Event) {
		switch e.Type {
		case event.Verdict:
			c, _ := readCall(t, p)
			argvs, stdins = append(argvs, c.Argv), append(stdins, c.Stdin)
		case retry.EventRetry:
			play("", "No conversation found with session ID: "+session+"\n")
		case retry.EventResumeFallback:
			play(fixture("success"), "")
		}
	}
	waits := 0
	// The task's observer sees the retry layer's events too.
	task := pilot.Task{Provider: "claude", Mode: pilot.ModeCode, Prompt: "fix the bug", Workdir: t.TempDir(), Observer: observe}
	v, err := retry.Dispatch(context.Background(), d, task, retry.Key{Task: "bugs/1"}, retry.Policy{
		Sleep: func(context.Context, time.Duration) error { waits++; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict.Verdict != pilot.Completed || v.Attempts != 3 || v.ResumedFrom != "" || waits != 1 {
		t.Fatalf("verdict %s (%s) after %d attempts, resumed from %q, %d waits; want completed after 3, afresh, 1 wait",
			v.Verdict.Verdict, v.FailureClass, v.Attempts, v.ResumedFrom, waits)
	}
	if len(argvs) != 3 {
		t.Fatalf("%d worker runs, want 3", len(argvs))
	}
	resumeFlag := "--resume=" + session
	if slices.Contains(argvs[0], resumeFlag) || !slices.Contains(argvs[1], resumeFlag) || slices.Contains(argvs[2], resumeFlag) {
		t.Errorf("argvs %q: want --resume only on the second run", argvs)
	}
	if !strings.Contains(stdins[0], "fix the bug") || !strings.Contains(stdins[1], retry.DefaultResumePrompt) || !strings.Contains(stdins[2], "fix the bug") {
		t.Errorf("prompts %q: want the task, the resume prompt, the task", stdins)
	}

	// The records: each names the one before; the second resumed the
	// first's session; the third says why it started afresh.
	third, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	second, err := pilot.ReadRecord(third.PreviousRecord)
	if err != nil {
		t.Fatal(err)
	}
	first, err := pilot.ReadRecord(second.PreviousRecord)
	if err != nil {
		t.Fatal(err)
	}
	if first.FailureClass != pilot.FailContextLimit || first.Attempt != 1 || first.Resume != session {
		t.Errorf("first record: %s, attempt %d, resume %q", first.FailureClass, first.Attempt, first.Resume)
	}
	if second.Attempt != 2 || second.ResumedFrom != second.PreviousRecord {
		t.Errorf("second record: attempt %d resumed from %q", second.Attempt, second.ResumedFrom)
	}
	if third.Attempt != 3 || third.ResumedFrom != "" || !strings.Contains(third.ResumeFallback, "No conversation found with session ID: "+session) {
		t.Errorf("third record: attempt %d resumed from %q fallback %q", third.Attempt, third.ResumedFrom, third.ResumeFallback)
	}
	events, err := os.ReadFile(second.EventsLog)
	if err != nil || !strings.Contains(string(events), retry.EventResumeFallback) {
		t.Errorf("the gone resume's events.log has no fallback event (%v):\n%s", err, events)
	}
}

// The seed's test_resume_heartbeat_preserves_prior_native_session_path: a
// restarted retry finds the record of a failed pi attempt, resumes that
// attempt's native session (pi gets it as --session), and the new record
// names the same session file and the record it resumed from.
func TestResumeHeartbeatPreservesPriorNativeSessionPath(t *testing.T) {
	dir := t.TempDir()
	earlier, err := os.ReadFile(filepath.Join("testdata", "pi", "stream", "resume-earlier-session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	native := filepath.Join(dir, "prior-session.jsonl")
	if err := os.WriteFile(native, earlier, 0o600); err != nil {
		t.Fatal(err)
	}
	prior := filepath.Join(dir, "prior-record.json")
	priorRec := pilot.Record{
		RunID: "prior", Provider: "pi", Runner: "pi", Status: string(pilot.Failed),
		Failure: pilot.Failure{FailureClass: pilot.FailSessionStall}, Resume: native,
		SessionRecord: &pilot.SessionRecord{NativeSessionPath: native},
	}
	data, err := json.Marshal(priorRec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prior, data, 0o600); err != nil {
		t.Fatal(err)
	}
	state, err := retry.OpenStore(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer state.Close()
	key := retry.Key{Task: "review/1", Stage: "review"}
	if err := state.UpdateTask(key.Task, func(s *retry.TaskState) {
		s.RecoveryFailures = map[string]int{key.Stage: 1}
		s.LastRecord, s.LastFailureClass, s.LastStage = prior, pilot.FailSessionStall, key.Stage
	}); err != nil {
		t.Fatal(err)
	}

	// The worker replays a resumed pi run.
	p := replayProvider(t, "pi", filepath.Join("testdata", "pi", "stream", "resume"))
	d := testDispatcher(t, p)
	v, err := retry.Dispatch(context.Background(), d, task("pi"), key, retry.Policy{State: state})
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict.Verdict != pilot.Completed || v.Attempts != 1 || v.ResumedFrom != prior {
		t.Fatalf("verdict %s (%s) after %d attempts, resumed from %q; want completed after 1, from %s",
			v.Verdict.Verdict, v.FailureClass, v.Attempts, v.ResumedFrom, prior)
	}
	call, _ := readCall(t, p)
	if i := slices.Index(call.Argv, "--session"); i < 0 || i+1 >= len(call.Argv) || call.Argv[i+1] != native {
		t.Errorf("argv %q; want --session %s", call.Argv, native)
	}
	if call.Stdin != retry.DefaultResumePrompt {
		t.Errorf("stdin %q; want the resume prompt", call.Stdin)
	}
	rec, err := pilot.ReadRecord(v.Record)
	if err != nil {
		t.Fatal(err)
	}
	if rec.SessionRecord == nil || rec.NativeSessionPath != native {
		t.Errorf("record session fields %+v; want native_session_path %s", rec.SessionRecord, native)
	}
	if rec.ResumedFrom != prior || rec.PreviousRecord != prior || rec.Resume != native {
		t.Errorf("record: resumed_from %q, previous_record %q, resume %q; want %s, %s, %s",
			rec.ResumedFrom, rec.PreviousRecord, rec.Resume, prior, prior, native)
	}
}
