package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFaultsAt: the hook itself. The slow rank waits (factor−1)× the
// step's time so far at AfterGradient only; the kill fires at AfterUpdate
// of local step KillAfter only, calls Kill and wraps ErrInjectedKill;
// Faults.Hook runs at every point after them, and not when they end the
// step with an error.
func TestFaultsAt(t *testing.T) {
	ctx := context.Background()
	var asked []time.Duration
	var hooked []string
	killed := 0
	boom := errors.New("delay failed")
	failDelay := false
	f := Faults{
		SlowRank: 1, SlowFactor: 3, KillRank: 2, KillAfter: 4,
		Kill: func() { killed++ },
		Delay: func(_ context.Context, d time.Duration) error {
			asked = append(asked, d)
			if failDelay {
				return boom
			}
			return nil
		},
		Hook: func(_ context.Context, p Point, s StepInfo) error {
			hooked = append(hooked, fmt.Sprintf("%d/%v/%d", s.Rank, p, s.Step))
			return nil
		},
	}
	started := time.Now().Add(-10 * time.Millisecond)
	for _, rank := range []int{0, 1, 2} {
		for step := range 5 {
			for _, p := range []Point{AfterGradient, BeforeCombine, AfterUpdate} {
				err := f.At(ctx, p, StepInfo{Rank: rank, Step: step, Started: started})
				kill := rank == 2 && step == 3 && p == AfterUpdate
				switch {
				case kill && (!errors.Is(err, ErrInjectedKill) || !strings.Contains(err.Error(), "rank 2 after 4 local steps")):
					t.Errorf("rank 2, step %d, %v: %v, want the injected kill after 4 local steps", step, p, err)
				case !kill && err != nil:
					t.Errorf("rank %d, step %d, %v: %v", rank, step, p, err)
				}
			}
		}
	}
	if len(asked) != 5 {
		t.Errorf("%d delays asked, want 5 (rank 1's AfterGradient of each step)", len(asked))
	}
	for _, d := range asked {
		if d < 20*time.Millisecond {
			t.Errorf("delay %v asked for a step 10 ms old at factor 3: want ≥ 20 ms", d)
		}
	}
	if killed != 1 {
		t.Errorf("Kill called %d times, want once", killed)
	}
	if len(hooked) != 3*5*3-1 || slices.Contains(hooked, "2/after-update/3") {
		t.Errorf("hook called %d times (%v), want at every point but the kill's", len(hooked), hooked)
	}
	// A failed delay is the step's error, and the hook is not called.
	failDelay, hooked = true, nil
	if err := f.At(ctx, AfterGradient, StepInfo{Rank: 1, Started: started}); !errors.Is(err, boom) || len(hooked) != 0 {
		t.Errorf("failed delay: %v, hook calls %v", err, hooked)
	}
	// A factor ≤ 1 and KillAfter 0 inject nothing.
	asked, killed = nil, 0
	g := Faults{SlowRank: 1, SlowFactor: 1, KillRank: 1, KillAfter: 0, Delay: f.Delay, Kill: f.Kill}
	for step := range 3 {
		for _, p := range []Point{AfterGradient, BeforeCombine, AfterUpdate} {
			if err := g.At(ctx, p, StepInfo{Rank: 1, Step: step, Started: started}); err != nil {
				t.Errorf("no faults: %v", err)
			}
		}
	}
	if len(asked) != 0 || killed != 0 {
		t.Errorf("no faults: %d delays, %d kills", len(asked), killed)
	}
}
