package membership

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestDecide: the coordinator's decision, table-driven: a side with fewer
// than half of the last members stops, exactly half goes on only with the
// lowest index, fewer than MinWorkers stop, and the schedule's members
// are taken only if every one is there.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		members, alive, joiners []int
		min                     int
		want                    []int // the schedule's
		next                    []int
		stop                    string
	}{
		{members: []int{0, 1, 2}, alive: []int{0, 2}, min: 1, next: []int{0, 2}},
		{members: []int{0, 1, 2}, alive: []int{2}, min: 1, stop: "not a majority"},
		{members: []int{0, 1, 2, 3}, alive: []int{0, 3}, min: 1, next: []int{0, 3}},
		{members: []int{0, 1, 2, 3}, alive: []int{1, 2}, min: 1, stop: "not a majority"},
		{members: []int{0, 1}, alive: []int{0}, min: 1, next: []int{0}},
		{members: []int{0, 1}, alive: []int{1}, min: 1, stop: "not a majority"},
		{members: []int{0, 1, 2, 3}, alive: []int{0, 2}, min: 3, stop: "fewer than --min-workers 3: lost [1 3]"},
		{members: []int{0, 2}, alive: []int{0, 2}, joiners: []int{1}, min: 3, next: []int{0, 2, 1}},
		{members: []int{0, 1, 2}, alive: []int{0, 1}, joiners: []int{1}, min: 1, next: []int{0, 1}}, // a restarted member joins last
		{members: []int{0, 1, 2}, alive: []int{0}, min: 1, want: []int{0, 2}, stop: "wants peer 2"},
		{members: []int{0, 1, 2}, alive: []int{0, 1}, joiners: []int{2}, min: 1, want: []int{0, 2}, next: []int{0, 2}},
	} {
		next, stop := Decide(4, tc.members, tc.alive, tc.joiners, tc.min, Why{Want: tc.want, Reason: "test"})
		if !slices.Equal(next, tc.next) || (tc.stop == "") != (stop == "") || tc.stop != "" && !strings.Contains(stop, tc.stop) {
			t.Errorf("members %v, alive %v, joining %v, min %d, want %v: got %v, %q; want %v, %q", tc.members, tc.alive, tc.joiners, tc.min, tc.want, next, stop, tc.next, tc.stop)
		}
	}
}

// TestParseSchedule: a record as a list, in a report's "run" or a
// summary's "membership"; negative steps, empty and duplicated entries
// refused by name.
func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  string
	}{
		{`[{"step":10,"members":[0,2]},{"step":30,"members":[0,2,1]}]`, 2, ""},
		{`{"run":{"membership":[{"step":10,"members":[0,2]}]}}`, 1, ""},
		{`{"membership":[{"step":10,"members":[1]}]}`, 1, ""},
		{`[{"step":30,"members":[0]},{"step":10,"members":[0,1]}]`, 2, ""}, // a change that adds peers renumbers the steps
		{`[{"step":-3,"members":[0]}]`, 0, "want a step ≥ 0"},
		{`[{"step":3,"members":[]}]`, 0, "no members"},
		{`[{"step":3,"members":[1,1]}]`, 0, "twice"},
		{`[{"step":3,"members":[-1]}]`, 0, "negative"},
		{`not json`, 0, "want a JSON list"},
	} {
		got, err := ParseSchedule([]byte(tc.in))
		if len(got) != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %d changes, %v; want %d, %q", tc.in, len(got), err, tc.want, tc.err)
		}
	}
}

func FuzzParseSchedule(f *testing.F) {
	f.Add([]byte(`[{"step":10,"members":[0,2]}]`))
	f.Add([]byte(`{"run":{"membership":[{"step":1,"members":[3]}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := ParseSchedule(b)
		if err != nil {
			return
		}
		for _, c := range list {
			if c.Step < 0 || len(c.Members) == 0 || len(slices.Compact(slices.Sorted(slices.Values(c.Members)))) != len(c.Members) {
				t.Fatalf("accepted %+v", list)
			}
		}
	})
}

// TestCheckSchedule: a schedule is refused when it lists a newcomer before
// a peer that stays (a chief without the state), was recorded with
// another commit interval, or names a peer outside the cluster.
func TestCheckSchedule(t *testing.T) {
	for _, tc := range []struct {
		s   []Change
		err string
	}{
		{[]Change{{Step: 0, Members: []int{1, 2}}, {Step: 6, Members: []int{0, 1, 2}}}, "lists peer 1, which stays, after a peer that joins"},
		{[]Change{{Step: 6, Members: []int{0, 2}, CommitEvery: 5}}, "recorded with --commit-every 5"},
		{[]Change{{Step: 6, Members: []int{0, 3}}}, "outside the cluster's 3"},
		{[]Change{{Step: 6, Members: []int{0, 2}}, {Step: 9, Members: []int{0, 2, 1}}}, ""},
	} {
		if err := CheckSchedule(tc.s, 3, 3); (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.err)
		}
	}
}

// running returns peer self's machine of n running generation gen over
// members.
func running(t *testing.T, self, n int, gen uint64, members []int) *Machine {
	m := New(Config{Self: self, Size: n}, zaptest.NewLogger(t))
	m.Forming(gen, members)
	m.Formed(gen, members)
	return m
}

// TestRefusesBadProposals: a proposal that names strangers, a peer twice,
// a generation not after this peer's or implausibly far, or that leaves
// this peer out is refused with the reason; a go without its promise
// takes nothing; a second proposal of a promised generation with other
// members is refused.
func TestRefusesBadProposals(t *testing.T) {
	m := running(t, 1, 4, 5, []int{0, 1, 2, 3})
	m.Reform(Why{Reason: "test"}, 0, 0)
	m.round = nil // the probe's answers do not matter here
	ask := func(msg Msg) Msg {
		e := m.Receive(0, msg)
		if len(e.Sends) != 1 || e.Sends[0].To != 0 || e.Sends[0].Msg.Kind != Answer {
			t.Fatalf("%+v: effects %+v, want one answer to peer 0", msg, e)
		}
		return e.Sends[0].Msg
	}
	for _, tc := range []struct {
		msg  Msg
		want string
	}{
		{Msg{Kind: Propose, Gen: 6, Members: []int{0, 1, 7}}, "outside the cluster"},
		{Msg{Kind: Propose, Gen: 6, Members: []int{0, 1, 1}}, "twice"},
		{Msg{Kind: Propose, Gen: 5, Members: []int{0, 1}}, "not after"},
		{Msg{Kind: Propose, Gen: 1 << 40, Members: []int{0, 1}}, "implausibly far"},
		{Msg{Kind: Propose, Gen: 6, Members: []int{0, 2}}, "not among the members"},
		{Msg{Kind: Propose, Gen: 6, Members: []int{1, 2}}, "the proposer (peer 0) is not among"},
		{Msg{Kind: "nonsense"}, "unknown kind"},
	} {
		if out := ask(tc.msg); out.OK || !strings.Contains(out.Reason, tc.want) {
			t.Errorf("%+v: answered %+v, want refused for %q", tc.msg, out, tc.want)
		}
	}
	if out := ask(Msg{Kind: Go, Gen: 6}); out.OK || m.accepted != nil {
		t.Errorf("a go without a promise was taken: %+v", out)
	}
	if out := ask(Msg{Kind: Propose, Gen: 6, Members: []int{0, 1}}); !out.OK {
		t.Fatalf("a good proposal refused: %+v", out)
	}
	if out := ask(Msg{Kind: Propose, Gen: 6, Members: []int{0, 1, 3}}); out.OK {
		t.Errorf("a second proposal of the same generation with other members was promised too")
	}
	if out := ask(Msg{Kind: Go, Gen: 6}); !out.OK || m.accepted == nil || !slices.Equal(m.accepted.Members, []int{0, 1}) {
		t.Errorf("go: %+v, accepted %+v", out, m.accepted)
	}
	if e := m.Tick(false); e.Decision == nil || e.Decision.Kind != Form || e.Decision.Gen != 6 {
		t.Errorf("after the go, the tick gave %+v, want to form generation 6", e)
	}
}

// TestProbeSeesItWasDropped: a peer that hung and wakes while the others
// agree on a later generation without it sees it was dropped (and asks to
// rejoin) instead of leading them back to its old commit.
func TestProbeSeesItWasDropped(t *testing.T) {
	m := running(t, 0, 3, 3, []int{0, 1, 2})
	e := m.Reform(Why{Reason: "a peer was lost"}, 0, 0)
	if len(e.Sends) != 2 {
		t.Fatalf("the probe sent %+v, want a status to peers 1 and 2", e.Sends)
	}
	for _, p := range []int{1, 2} {
		e = m.Receive(p, Msg{Kind: Answer, State: Reforming, Gen: 5, Members: []int{1, 2}, OK: true})
	}
	if m.State() != Joining || len(e.Sends) != 2 || e.Sends[0].Msg.Kind != Join {
		t.Errorf("state %s, effects %+v: want it joining, asking to be admitted", m.State(), e)
	}
}

// TestStopWhileProbing: the coordinator's stop arrives while this peer's
// own probe is out, and the coordinator has exited by the time the probe
// asks it: this peer halts with the coordinator's reason instead of
// deciding alone that it lost the coordinator too.
func TestStopWhileProbing(t *testing.T) {
	m := running(t, 2, 4, 0, []int{0, 1, 2, 3})
	if e := m.Reform(Why{Reason: "a peer was lost"}, 0, 0); len(e.Sends) != 3 {
		t.Fatalf("the probe sent %+v, want a status to peers 0, 1 and 3", e.Sends)
	}
	const reason = "only [0 2] of generation 0's members are left, fewer than --min-workers 3"
	if e := m.Receive(0, Msg{Kind: Stop, Reason: reason}); len(e.Sends) != 1 || !e.Sends[0].Msg.OK {
		t.Fatalf("the stop was not taken: %+v", e)
	}
	var e Effects
	for _, p := range []int{1, 3, 0} {
		e = m.Unanswered(p, "connection refused")
	}
	if d := e.Decision; d == nil || d.Kind != Halt || d.Reason != reason || d.Coordinator {
		t.Errorf("after the probe: %+v, want a halt with the coordinator's reason", e)
	}
}

// TestStopWhileRunning: the coordinator's stop reaches a peer that has not
// yet seen its generation end; it takes it (for that generation only) and
// halts with the coordinator's reason as soon as it reforms.
func TestStopWhileRunning(t *testing.T) {
	const reason = "fewer than --min-workers 3"
	m := running(t, 2, 4, 5, []int{0, 1, 2, 3})
	if e := m.Receive(0, Msg{Kind: Stop, Gen: 4, Reason: reason}); e.Sends[0].Msg.OK {
		t.Errorf("a stop for generation 4 taken while running generation 5: %+v", e)
	}
	if e := m.Receive(0, Msg{Kind: Stop, Gen: 5, Reason: reason}); !e.Sends[0].Msg.OK {
		t.Fatalf("a stop for the running generation refused: %+v", e)
	}
	e := m.Reform(Why{Reason: "a peer was lost"}, 0, 0)
	if d := e.Decision; d == nil || d.Kind != Halt || d.Reason != reason {
		t.Errorf("reforming after the stop: %+v, want a halt with the coordinator's reason", e)
	}
}

// TestFormFailedBounded: a generation that fails to form is agreed again,
// at most maxFailedForms times in a row; one that forms resets the count.
func TestFormFailedBounded(t *testing.T) {
	m := New(Config{Self: 0, Size: 2}, zaptest.NewLogger(t))
	for i := range maxFailedForms {
		if !m.FormFailed() {
			t.Fatalf("failure %d: gave up", i+1)
		}
	}
	if m.FormFailed() {
		t.Errorf("failure %d: still retrying", maxFailedForms+1)
	}
	m.Formed(0, []int{0, 1})
	if !m.FormFailed() {
		t.Errorf("after a generation formed, the first failure gave up")
	}
}

// FuzzParseRecord: a record is refused or holds changes; replayed as
// itself, it is a replay that kept every promise; its first change is
// checked against any end without a panic.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"run":{"membership":[{"step":10,"members":[0,2]}],"params_sha256":"ab"}}`))
	f.Add([]byte(`{"membership":[{"step":3,"members":[1]}],"params_sha256":"cd"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"run": {}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := ParseRecord(b)
		if err != nil {
			return
		}
		if len(rec.Changes) == 0 {
			t.Fatalf("accepted a record with no change: %s", b)
		}
		if v := CheckReplay(rec, rec.Changes, rec.ParamsSHA256); !v.OK() {
			t.Fatalf("a record replayed as itself: %s", v)
		}
		_ = Reachable(rec.Changes, 0, len(b))
	})
}
