package membership

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLine: each kind of change in one line naming who left and why, or
// who joined (rejoined, when an earlier change dropped it), where the
// members go on from, and the batch and rate before and after.
func TestLine(t *testing.T) {
	loss := Change{Step: 40, Generation: 1, Members: []int{0, 1}, Left: []int{2}, Reason: "lost peer(s) [2]: its connection closed: it died, or its host went away", RolledBack: 3, PauseSeconds: 0.25}
	rejoin := Change{Step: 80, Generation: 2, Members: []int{0, 1, 2}, Joined: []int{2}, Reason: "admitting peer(s) [2]"}
	stop := Change{Step: 10, Generation: 1, Members: []int{0, 2}, Left: []int{1}, Reason: "peer(s) [1] asked to stop (SIGTERM) and left"}
	died := func(p int) (string, bool) { return "died: killed", p == 2 }
	for _, tc := range []struct {
		name    string
		c       Change
		earlier []Change
		shift   Shift
		said    func(int) (string, bool)
		want    []string
	}{
		{"a loss, the survivors' words", loss, nil, NewShift(loss, 65, 100, 16, 0.02, LRScale), nil,
			[]string{"rank 2 lost: its connection closed", "2 peer(s) [0 1] go on from epoch 1 (65% done)", "3 step(s) since the last commit redone",
				"global batch 48 → 32; learning rate 0.03 → 0.02 (--elastic-lr scale)", "paused 0.25s (generation 1)"}},
		{"a loss the launcher saw", loss, nil, NewShift(loss, 150, 100, 16, 0.02, LRKeep), died,
			[]string{"rank 2 died: killed: 2 peer(s)", "from epoch 2 (50% done)", "learning rate 0.02 → 0.02 (--elastic-lr keep)"}},
		{"a rejoin", rejoin, []Change{loss}, NewShift(rejoin, 0, 100, 16, 0.03, LRScale), nil,
			[]string{"rank 2 rejoined: 3 peer(s) [0 1 2]", "from epoch 1 (0% done)", "global batch 32 → 48; learning rate 0.02 → 0.03"}},
		{"a first join", rejoin, nil, NewShift(rejoin, 0, 100, 16, 0.03, LRScale), nil, []string{"rank 2 joined: 3 peer(s)"}},
		{"SIGTERM", stop, nil, NewShift(stop, 10, 20, 8, 0.1, LRScale), nil, []string{"rank 1 left: asked to stop (SIGTERM): 2 peer(s) [0 2]", "global batch 24 → 16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Line(tc.c, tc.earlier, tc.shift, tc.said)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q\nwant it to contain %q", got, w)
				}
			}
			if strings.Contains(got, "\n") {
				t.Errorf("%q: more than one line", got)
			}
		})
	}
}

// TestLossWords: the error that ended a generation, in a few words.
func TestLossWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("generation 0: %w", context.DeadlineExceeded), "no answer within the collective timeout (4s)"},
		{errors.New("collective: allreduce #5 on rank 0: rank 2 link down: stream reset (local)"), "its connection closed"},
		{errors.New("peer 1: EOF"), "its connection closed"},
		{errors.New("something else"), "its collective failed (the log has the error)"},
	} {
		if got := LossWords(tc.err, 4*time.Second); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %q, want it to start %q", tc.err, got, tc.want)
		}
	}
}

// TestLRPolicy: the factor each policy applies, and a bad one refused
// naming both choices.
func TestLRPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy        string
		members, size int
		want          float64
	}{{LRScale, 2, 3, 2.0 / 3}, {LRScale, 3, 3, 1}, {LRScale, 4, 2, 2}, {LRKeep, 2, 3, 1}} {
		if got := LRFactor(tc.policy, tc.members, tc.size); got != tc.want {
			t.Errorf("%s at %d of %d: %v, want %v", tc.policy, tc.members, tc.size, got, tc.want)
		}
	}
	for _, p := range LRPolicies {
		if err := CheckLRPolicy(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := CheckLRPolicy("linear"); err == nil || !strings.Contains(err.Error(), "want scale") || !strings.Contains(err.Error(), "or keep") {
		t.Errorf("linear: %v, want a refusal naming scale and keep", err)
	}
}
