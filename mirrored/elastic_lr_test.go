package mirrored

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/nn"
)

// TestElasticLRPolicy: peer 1 of 3 leaves at the commit of step 6 (a
// replayed schedule); under --elastic-lr scale every step after the
// change runs at 2/3 of the rate, under keep at the rate given, and the
// change's event states the global batch and the rate before and after,
// as the steps ran them.
func TestElasticLRPolicy(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	const base = 0.02
	for _, tc := range []struct {
		policy string
		after  float64
	}{{membership.LRScale, base * 2 / 3}, {membership.LRKeep, base}, {"", base * 2 / 3}} {
		t.Run(tc.policy, func(t *testing.T) {
			var mu sync.Mutex
			var before, after []float64
			var changes []Event
			jobs := make([]Job, 3)
			for i := range jobs {
				jobs[i] = testJob(t, "softmax", mn, 16, 2)
				jobs[i].Schedule, jobs[i].WarmupEpochs = nn.ScheduleConstant, 0
				if i != 0 {
					continue
				}
				changed := false
				jobs[i].Observers = []Observer{ObserverFunc(func(e Event) error {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case e.Kind == EventMembership:
						changed = true
						changes = append(changes, e)
					case e.Kind == EventStep && changed:
						after = append(after, e.Train.LR)
					case e.Kind == EventStep:
						before = append(before, e.Train.LR)
					}
					return nil
				})}
			}
			sched := []MembershipChange{{Step: 6, Members: []int{0, 2}}}
			sums, errs := runElasticGroup(t, jobs, Elastic{CommitEvery: 3, Schedule: sched, LR: tc.policy})
			for _, i := range []int{0, 2} {
				if errs[i] != nil {
					t.Fatalf("peer %d: %v", i, errs[i])
				}
			}
			if sums[0].Run.ParamsSHA256 != sums[2].Run.ParamsSHA256 {
				t.Errorf("the members differ: %s and %s", sums[0].Run.ParamsSHA256, sums[2].Run.ParamsSHA256)
			}
			if len(before) != 6 || len(after) == 0 || len(changes) != 1 {
				t.Fatalf("%d steps before the change, %d after, %d changes: want 6, some, 1", len(before), len(after), len(changes))
			}
			for _, lr := range before {
				if lr != base {
					t.Fatalf("a step before the change ran at %v, want %v", lr, base)
				}
			}
			for _, lr := range after {
				if math.Abs(lr-tc.after) > 1e-12 {
					t.Fatalf("a step after the change ran at %v, want %v", lr, tc.after)
				}
			}
			sh, info := changes[0].Shift, changes[0].Info
			if sh == nil || sh.BatchBefore != 48 || sh.Batch != 32 || math.Abs(sh.LRBefore-base) > 1e-12 || math.Abs(sh.LR-tc.after) > 1e-12 {
				t.Errorf("shift %+v: want global batch 48 → 32, rate %v → %v", sh, base, tc.after)
			}
			if !strings.Contains(info, "global batch 48 → 32") || !strings.Contains(info, "(--elastic-lr ") {
				t.Errorf("change line %q: want the batch and the rate stated", info)
			}
		})
	}
}
