package supervise

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// An orphan's empty environment (a process in execve, held there by a
// busy machine) is not believed at once: the job whose tree is listed
// waits for it to read again, and only an environment empty for
// unsettledLimit makes it an orphan of every job.
func TestPlaceWaitsForAnOrphansEnvironmentToSettle(t *testing.T) {
	a := &job{id: 1, cookie: []byte("PILOT_RUN_ID=a")}
	b := &job{id: 2, cookie: []byte("PILOT_RUN_ID=b")}
	s := &server{jobs: map[uint64]*job{1: a, 2: b}, orphan: map[int]map[uint64]bool{}, unsettled: map[int]time.Time{}}
	t0 := time.Unix(1_800_000_000, 0)
	env := func(kv ...string) []byte {
		var out []byte
		for _, e := range kv {
			out = append(append(out, e...), 0)
		}
		return out
	}

	// 100 is a's, mid-execve for 40 ms.
	if got := s.place(100, nil, a, t0); got != placeUnsettled {
		t.Fatalf("an empty environment at first: %v; want unsettled", got)
	}
	if got := s.place(100, nil, a, t0.Add(40*time.Millisecond)); got != placeUnsettled {
		t.Fatalf("still empty 40 ms on: %v; want unsettled", got)
	}
	if got := s.place(100, env("HOME=/h", "PILOT_RUN_ID=a"), a, t0.Add(41*time.Millisecond)); got != placeMine {
		t.Errorf("settled with a's cookie: %v; want a's", got)
	}
	if s.orphan[100] != nil {
		t.Errorf("a's process was held for every job: %v", s.orphan[100])
	}

	// 101 is b's: listing a's tree leaves it to b.
	if got := s.place(101, env("PILOT_RUN_ID=b"), a, t0); got != placeOther || s.orphan[101] != nil {
		t.Errorf("b's process in a's listing: %v, held for %v; want b's alone", got, s.orphan[101])
	}

	// 102 cleared its environment: believed after unsettledLimit.
	s.place(102, nil, a, t0)
	if got := s.place(102, nil, a, t0.Add(unsettledLimit)); got != placeOther {
		t.Fatalf("empty for unsettledLimit: %v; want held for every job", got)
	}
	if diff := cmp.Diff(map[uint64]bool{1: true, 2: true}, s.orphan[102]); diff != "" {
		t.Errorf("its owners (-want +got):\n%s", diff)
	}
	if len(s.unsettled) != 0 {
		t.Errorf("unsettled left: %v", s.unsettled)
	}
}
