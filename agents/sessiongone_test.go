package agents_test

import (
	"context"
	"testing"

	"github.com/pilotworkers/pilot"
	"github.com/pilotworkers/pilot/agents"
)

// A watcher reports a gone session (Result.SessionGone) from its CLI's own
// words, on stderr or in a result event, and never from other output, where
// a tool may quote anything: the retry package then starts afresh.
func TestWatchersReportAGoneSession(t *testing.T) {
	const (
		claudeResult = `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: sess"]}`
		claudeTool   = `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"grep: No conversation found"}]}}`
	)
	for _, tt := range []struct {
		name   string
		runner pilot.Runner
		lines  []pilot.Line
		want   string
	}{
		{"claude result event", agents.ClaudeRunner{}, []pilot.Line{goneOut(claudeResult)}, "No conversation found with session ID: sess"},
		{"claude stderr", agents.ClaudeRunner{}, []pilot.Line{goneErr("No conversation found with session ID: sess")}, "No conversation found with session ID: sess"},
		{"claude tool output", agents.ClaudeRunner{}, []pilot.Line{goneOut(claudeTool)}, ""},
		{"pi stderr", agents.PiRunner{}, []pilot.Line{goneErr("No session found matching 'sess'")}, "No session found matching 'sess'"},
		{"pi stdout", agents.PiRunner{}, []pilot.Line{goneOut(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"No session found matching x"}],"stopReason":"stop"}}`)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			a := pilot.Attempt{
				Task:     pilot.Task{Provider: tt.runner.Name(), Mode: pilot.ModeCode, Prompt: "p"},
				Provider: pilot.Provider{Name: tt.runner.Name(), Runner: tt.runner.Name()},
				RunID:    "run-1", RunDir: dir, TaskFile: dir + "/task.md", Prompt: "p", Workdir: dir,
				SessionPath: dir + "/session.jsonl",
			}
			cmd, err := tt.runner.Command(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.lines {
				cmd.Watcher.Line(l)
			}
			res := cmd.Watcher.Finish(pilot.Exit{Runner: tt.runner.Name(), Started: true, Code: 1})
			if res.SessionGone != tt.want {
				t.Errorf("SessionGone = %q, want %q", res.SessionGone, tt.want)
			}
		})
	}
}

func goneOut(s string) pilot.Line {
	return pilot.Line{Stream: pilot.Stdout, Data: []byte(s), Size: int64(len(s))}
}

func goneErr(s string) pilot.Line {
	return pilot.Line{Stream: pilot.Stderr, Data: []byte(s), Size: int64(len(s))}
}
