package schedule

import "testing"

func TestWritersKeepOverlappingWriteSetsApart(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	name := func(i int) string { return names[i] }
	var w Writers
	a := Writes{Files: []string{"/w/x", "/w/y"}}
	b := Writes{Files: []string{"/w/y"}}
	c := Writes{Files: []string{"/w/z"}}
	u := Writes{Unknown: true, Why: `"src/" is a directory`}
	for _, tc := range []struct {
		s    Writes
		want string
	}{{a, ""}, {b, ""}, {u, ""}, {Writes{}, ""}} {
		if k, why := w.Conflict(tc.s, name); k != -1 || why != tc.want {
			t.Errorf("nothing runs: Conflict(%+v) = %d %q; want none", tc.s, k, why)
		}
	}
	w.Start(2, c)
	w.Start(0, a)
	if k, why := w.Conflict(b, name); k != 0 || why != "its write set overlaps running job a on /w/y" {
		t.Errorf("b beside a: %d %q", k, why)
	}
	if k, why := w.Conflict(u, name); k != 0 || why != `its write set is unknown ("src/" is a directory) and a is writing` {
		t.Errorf("unknown beside writers: %d %q; want the first writer in graph order", k, why)
	}
	if k, _ := w.Conflict(Writes{}, name); k != -1 {
		t.Errorf("a job that writes nothing conflicts with %d", k)
	}
	w.Finish(0, a)
	if k, why := w.Conflict(b, name); k != -1 {
		t.Errorf("b once a finished: %d %q; want none", k, why)
	}
	w.Finish(2, c)
	w.Start(3, u)
	if k, why := w.Conflict(c, name); k != 3 || why != "running job d has an unknown write set" {
		t.Errorf("c beside an unknown write set: %d %q", k, why)
	}
	w.Finish(3, u)
	if w.Writing() {
		t.Error("Writing after every writer finished")
	}
	if k, _ := w.Conflict(u, name); k != -1 {
		t.Errorf("unknown with nothing running: %d", k)
	}
}
