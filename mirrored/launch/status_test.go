package launch

import (
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// TestStatusCallbackLine: a callback's line is printed once, the chief's
// (every replica of the ring decided the same at the same epoch).
func TestStatusCallbackLine(t *testing.T) {
	s := newStatus(2, false)
	const line = "epoch 4: test loss did not improve for 1 epoch (best 3.885 at epoch 3): stopping"
	for rank, want := range []string{"[launch] " + line, ""} {
		if got := s.update(Message{Event: mirrored.Event{Kind: mirrored.EventCallback, Rank: rank, Info: line}}); got != want {
			t.Errorf("rank %d: %q, want %q", rank, got, want)
		}
	}
}

// TestStatusElastic: under elastic, the first start's header only, no
// resume line for a later generation (its change says where), one line
// per change naming in the launcher's words a worker it saw die (before
// or after the change: told once), epochs counted without the steps a
// change renumbers, and a death no change told is told at the end.
func TestStatusElastic(t *testing.T) {
	s := newStatus(3, true)
	chief := func(e mirrored.Event) string { e.Rank = 0; return s.update(Message{Event: e}) }
	loss := membership.Change{Step: 40, Generation: 1, Members: []int{0, 1}, Left: []int{2}, Reason: "lost peer(s) [2]: its connection closed"}
	rejoin := membership.Change{Step: 60, Generation: 2, Members: []int{0, 1, 2}, Joined: []int{2}, Reason: "admitting peer(s) [2]"}
	sh := membership.NewShift(loss, 60, 93, 16, 0.02, membership.LRScale)
	if got := chief(mirrored.Event{Kind: "start", Info: "lenet: 3 replicas", StepsPerEpoch: 62, Steps: 124}); got != "[launch] lenet: 3 replicas" {
		t.Errorf("first start: %q", got)
	}
	s.diedWorker(2, "died: killed (signal: killed)")
	for _, e := range []mirrored.Event{{Kind: "resumed", Path: "the in-memory commit of step 40", Step: 60}, {Kind: "start", Info: "lenet: 2 replicas", StepsPerEpoch: 93, Steps: 186}} {
		if got := chief(e); got != "" {
			t.Errorf("a later generation's %s: %q, want nothing", e.Kind, got)
		}
	}
	got := chief(mirrored.Event{Kind: mirrored.EventMembership, Change: &loss, Shift: &sh})
	if !strings.HasPrefix(got, "[launch] rank 2 died: killed (signal: killed): 2 peer(s) [0 1] go on from epoch 1 (65% done)") || !strings.Contains(got, "global batch 48 → 32") {
		t.Errorf("the loss: %q", got)
	}
	// A hang: the change comes first, in the survivors' words; the exit
	// after it is not told again.
	hang := membership.Change{Step: 70, Generation: 3, Members: []int{0}, Left: []int{1}, Reason: "lost peer(s) [1]: no answer within the collective timeout (4s)"}
	sh3 := membership.NewShift(hang, 70, 186, 16, 0.01, membership.LRScale)
	if got := chief(mirrored.Event{Kind: mirrored.EventMembership, Change: &hang, Shift: &sh3}); !strings.HasPrefix(got, "[launch] rank 1 lost: no answer within") {
		t.Errorf("the hang: %q", got)
	}
	s.diedWorker(1, "died: killed (signal: killed)")
	sh2 := membership.NewShift(rejoin, 80, 62, 16, 0.03, membership.LRScale)
	if got := chief(mirrored.Event{Kind: mirrored.EventMembership, Change: &rejoin, Shift: &sh2}); !strings.HasPrefix(got, "[launch] rank 2 rejoined: 3 peer(s) [0 1 2] go on from epoch 2 (29% done)") {
		t.Errorf("the rejoin: %q", got)
	}
	ep := chief(mirrored.Event{Kind: "epoch", Step: 124, Steps: 124, Epoch: &mirrored.Epoch{Epoch: 2, LR: 0.03}})
	if !strings.HasPrefix(ep, "[launch] epoch 2 of 2  loss") || strings.Contains(ep, "step") || !strings.Contains(ep, "lr 0.03") {
		t.Errorf("epoch line %q: want the epoch of 2 and the rate, no steps", ep)
	}
	if u := s.untold(); len(u) != 0 {
		t.Errorf("untold %q: every death was told", u)
	}
	s.diedWorker(0, "exited: out of memory")
	if u := s.untold(); len(u) != 1 || u[0] != "[launch] rank 0 exited: out of memory" {
		t.Errorf("untold %q", u)
	}
}

// TestStatusHoldsAChange: a change that lost a worker whose process still
// runs waits for its exit, to say how it died; the lines after it wait
// with it; without the exit, release tells it in the survivors' words.
func TestStatusHoldsAChange(t *testing.T) {
	loss := membership.Change{Step: 40, Generation: 1, Members: []int{0, 1}, Left: []int{2}, Reason: "lost peer(s) [2]: its connection closed"}
	sh := membership.NewShift(loss, 60, 93, 16, 0.02, membership.LRScale)
	for _, exits := range []bool{true, false} {
		s := newStatus(3, true)
		alive := true
		s.running = func(int) bool { return alive }
		chief := func(e mirrored.Event) string { return s.update(Message{Event: e}) }
		chief(mirrored.Event{Kind: "start", Info: "lenet", StepsPerEpoch: 62, Steps: 124})
		if got := chief(mirrored.Event{Kind: mirrored.EventMembership, Change: &loss, Shift: &sh}); got != "" {
			t.Fatalf("the change was told at once: %q", got)
		}
		if got := chief(mirrored.Event{Kind: "checkpoint", Step: 61, Path: "ck"}); got != "" {
			t.Fatalf("a line after the held change was told first: %q", got)
		}
		var got string
		if exits {
			alive = false
			got = s.diedWorker(2, "died: killed")
		} else {
			got = s.release()
		}
		want := "[launch] rank 2 died: killed: 2 peer(s)"
		if !exits {
			want = "[launch] rank 2 lost: its connection closed: 2 peer(s)"
		}
		lines := strings.Split(got, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], want) || lines[1] != "[launch] checkpoint at step 61: ck" {
			t.Errorf("exits %v: %q, want %q then the checkpoint's line", exits, got, want)
		}
		if s.release() != "" || len(s.untold()) != 0 {
			t.Errorf("exits %v: something told twice", exits)
		}
	}
}
