package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pilotworkers/pilot/sandbox"
)

// FuzzParseJobSpec: any --job value parses or is refused with the message
// that names the grammar; a parsed spec has three non-empty parts that put
// back together, with its name and worktree flag, give the value (the task
// file keeps its colons).
func FuzzParseJobSpec(f *testing.F) {
	for _, s := range []string{"glm:review:task.md", "glm:code:/a:b.md", "glm::x", ":::", "a:b", "", "p:m:f:g",
		"\xff:\x00:\n", "n=glm:code:t.md:worktree", "=p:m:f", "a=b=p:m:f", "p:m:a=b", "p:m:worktree", "n\x00=p:m:f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := parseJobSpec(s)
		if err != nil {
			if !strings.Contains(err.Error(), "expected PROVIDER:MODE:TASK_FILE") {
				t.Errorf("error %q does not give the grammar", err)
			}
			return
		}
		if spec.Provider == "" || spec.Mode == "" || spec.TaskFile == "" {
			t.Errorf("%q parsed with an empty part: %+v", s, spec)
		}
		if strings.Contains(spec.Provider, ":") || strings.Contains(spec.Mode, ":") || strings.Contains(spec.Name, ":") {
			t.Errorf("%q: provider, mode or name holds a colon: %+v", s, spec)
		}
		got := spec.Provider + ":" + spec.Mode + ":" + spec.TaskFile
		if spec.Name != "" {
			if checkJobName(spec.Name) != nil {
				t.Errorf("%q: a name that checkJobName refuses: %+v", s, spec)
			}
			got = spec.Name + "=" + got
		}
		if spec.Worktree {
			got += ":worktree"
		}
		if got != s {
			t.Errorf("%q parsed as %+v, which reads back as %q", s, spec, got)
		}
	})
}

// FuzzLoadJobsFile: any jobs file loads or is refused with an error naming
// the file's problem; a loaded file is a JSON array with one spec per entry,
// each with the entry's three strings, its worktree flag, its name and its
// sandbox mode.
func FuzzLoadJobsFile(f *testing.F) {
	for _, s := range []string{
		`[{"provider":"glm","mode":"review","task_file":"t.md"}]`,
		`[{"provider":"glm","mode":"code","task_file":"t.md","worktree":true},{"provider":"kimi","mode":"test","task_file":"u.md"}]`,
		`[{"provider":null,"mode":"code","task_file":"t.md"}]`,
		`[{"provider":"glm","mode":"code"}]`,
		`[{"provider":"glm","mode":"code","task_file":"t.md","extra":1}]`,
		`{"provider":"glm"}`, `[]`, `[1]`, `not json`, "", `[{"worktree":"yes","provider":"a","mode":"b","task_file":"c"}]`,
		`[{"provider":"glm","mode":"code","task_file":"t.md","name":"fix"}]`, `[{"provider":"glm","mode":"code","task_file":"t.md","name":""}]`,
		`[{"provider":"glm","mode":"code","task_file":"t.md","sandbox":"strict"}]`, `[{"provider":"glm","mode":"code","task_file":"t.md","sandbox":"jail"}]`,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "jobs.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		specs, err := loadJobsFile(path)
		if err != nil {
			if !strings.Contains(err.Error(), "jobs file") {
				t.Errorf("error %q does not say it is about the jobs file", err)
			}
			return
		}
		var entries []map[string]any
		if err := json.Unmarshal(data, &entries); err != nil {
			t.Fatalf("loaded %d specs from a file that is not an array of objects: %v", len(specs), err)
		}
		if len(specs) != len(entries) {
			t.Fatalf("%d specs for %d entries", len(specs), len(entries))
		}
		for i, e := range entries {
			want := jobSpec{Provider: e["provider"].(string), Mode: e["mode"].(string), TaskFile: e["task_file"].(string)}
			if w, ok := e["worktree"]; ok {
				want.Worktree = w.(bool)
			}
			if n, ok := e["name"]; ok {
				want.Name = n.(string)
			}
			if m, ok := e["sandbox"]; ok {
				want.Sandbox = sandbox.Mode(m.(string))
			}
			if specs[i] != want {
				t.Errorf("entry %d: %+v, want %+v", i, specs[i], want)
			}
		}
	})
}
