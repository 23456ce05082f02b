package worklog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pilotworkers/pilot/examples/taskloop/worklog"
)

// FuzzWorkLog feeds arbitrary work-log text (a worker writes the file) to
// the contract's check and to the timeline: neither may panic, the
// timeline keeps what was there, and its rows stay countable.
func FuzzWorkLog(f *testing.F) {
	f.Add("# Work Log\n")
	f.Add("## 실행 `t__p0__worker__a00`\n\n### 체크포인트\n\n- 없음\n\n### 최종 리포트\n\n- 상태: 완료\n")
	f.Add("## Dispatcher Timeline\n\n| 1 | x | START |\n|\n## Dispatcher Timeline\n")
	f.Add("\x00## \n### \n- : \n")
	c := worklog.DefaultContract()
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(t.TempDir(), worklog.FileName)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.AttemptResult(path, "t__p0__worker__a00"); err != nil {
			t.Fatal(err)
		}
		e := worklog.Entry{Time: time.Unix(0, 0), Event: worklog.Start, Task: "t", Stage: "worker", Status: "running", ExecutionID: "t__p0__worker__a01"}
		if err := worklog.Append(path, e); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := string(data)
		for _, l := range strings.Split(text, "\n") {
			if !strings.Contains(out, l) {
				t.Fatalf("line %q of the work log was lost", l)
			}
		}
		if ok, _ := worklog.Has(path, "t__p0__worker__a01"); !ok {
			t.Fatal("the row appended is not found")
		}
	})
}
