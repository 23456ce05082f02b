package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	pinned := filepath.Join(dir, "pinned.jsonl")
	latest := filepath.Join(dir, "latest.jsonl")
	write := func(path string, lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(pinned,
		`{"scenario":"ok-one-tool-call","cli":"codex","package":"@openai/codex","version":"0.171.0","verdict":"completed","phase":"finished","phase_ok":true,"phases":["awaiting-model","finished"]}`,
		`{"scenario":"connection-refused","cli":"codex","package":"@openai/codex","version":"0.171.0","verdict":"error","class":"provider-connection","evidence_source":"codex:stdout","phase":"errored","phase_ok":true,"phases":["errored"]}`,
		`{"scenario":"connection-refused","cli":"pi-1","package":"@earendil-works/pi-coding-agent","version":"1.6.0","verdict":"error","class":"provider-connection","evidence_source":"pi:stdout","phase":"errored","phase_ok":true,"phases":["errored"]}`,
		`{"scenario":"tool-stall-terminated","cli":"claude","package":"@anthropic-ai/claude-code","version":"2.1.332","verdict":"error","class":"session-stall","evidence_source":"pilot","phase":"tool-running","phase_ok":true,"phases":["tool-running"]}`,
	)
	write(latest,
		// pilot ended it both times: the phase the kill found is no drift.
		`{"scenario":"tool-stall-terminated","cli":"claude","package":"@anthropic-ai/claude-code","version":"2.1.332","verdict":"error","class":"session-stall","evidence_source":"pilot","phase":"awaiting-model","phase_ok":true,"phases":["tool-running"]}`,
		// Only the phases seen differ: not drift.
		`{"scenario":"ok-one-tool-call","cli":"codex","package":"@openai/codex","version":"0.172.0","verdict":"completed","phase":"finished","phase_ok":true,"phases":["awaiting-model","tool-running","finished"]}`,
		`{"scenario":"connection-refused","cli":"codex","package":"@openai/codex","version":"0.172.0","verdict":"error","class":"generic-error","evidence_source":"codex:stderr","phase":"errored","phase_ok":true,"phases":["errored"]}`,
		``,
		`{"scenario":"connection-refused","cli":"pi-1","package":"@earendil-works/pi-coding-agent","version":"1.6.0","verdict":"error","class":"provider-connection","evidence_source":"pi:stdout","phase":"errored","phase_ok":true,"phases":["errored"]}`,
		`{"scenario":"context-overflow","cli":"pi-1","package":"@earendil-works/pi-coding-agent","version":"1.6.0","verdict":"error","class":"context-limit","evidence_source":"pi:stdout","phase":"errored","phase_ok":true,"phases":["errored"]}`,
	)
	p, err := readReport(pinned)
	if err != nil {
		t.Fatal(err)
	}
	l, err := readReport(latest)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if n := compare(&out, p, l); n != 2 {
		t.Errorf("%d rows differ, want 2:\n%s", n, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"codex     @openai/codex 0.171.0 → @openai/codex 0.172.0  (changed)",
		"connection-refused × codex: 0.171.0 → 0.172.0",
		"class: provider-connection → generic-error",
		"evidence source: codex:stdout → codex:stderr",
		"context-overflow × pi-1: - → 1.6.0",
		"ran only on the latest release",
		"2 of 5 rows differ.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ok-one-tool-call") || strings.Contains(got, "tool-stall-terminated") {
		t.Errorf("a row that does not drift is printed:\n%s", got)
	}
}

func TestReadReportBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(path, []byte("{\"scenario\":\"x\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readReport(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("error %v, want one naming line 2", err)
	}
}

func TestPeaks(t *testing.T) {
	rows := map[key]row{
		{"a", "codex", false}:    {CLI: "codex", Package: "@openai/codex", Version: "0.171.0", PeakRSS: 180_000_000, PeakTop: "codex"},
		{"b", "codex", false}:    {CLI: "codex", Package: "@openai/codex", Version: "0.171.0", PeakRSS: 220_000_000, PeakTop: "codex"},
		{"c", "codex", false}:    {CLI: "codex", Package: "@openai/codex", Version: "0.171.0", PeakRSS: 200_400_000, PeakTop: "codex"},
		{"a", "opencode", false}: {CLI: "opencode", Package: "opencode-linux-x64", Version: "1.18.33", PeakRSS: 500_000_000, PeakTop: "opencode"},
		{"b", "opencode", false}: {CLI: "opencode", Package: "opencode-linux-x64", Version: "1.18.33", PeakRSS: 700_000_000, PeakTop: "bun"},
		// A row from before peaks were reported is left out.
		{"c", "opencode", false}: {CLI: "opencode", Package: "opencode-linux-x64", Version: "1.18.33"},
	}
	var out strings.Builder
	peaks(&out, rows)
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"codex @openai/codex 0.171.0 3 200 MB 180 MB 220 MB codex",
		"opencode opencode-linux-x64 1.18.33 2 600 MB 500 MB 700 MB bun",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
