package mirrored

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/mirrored/membership"
)

// TestElasticScheduleNotIgnored: a schedule whose change comes after the
// run's last step is refused by every peer, naming the steps (it was
// replayed as nothing, in silence, exit 0); a replay's verdict says
// whether each change happened at its recorded step and whether the
// parameters equal the record's.
func TestElasticScheduleNotIgnored(t *testing.T) {
	mn := synthMNIST(600, 100, 3)
	jobs := func() []Job { // 200 examples a peer, batch 16: 12 steps an epoch, 24 in all
		js := make([]Job, 3)
		for i := range js {
			js[i] = testJob(t, "softmax", mn, 16, 2)
		}
		return js
	}
	t.Run("past the end", func(t *testing.T) {
		_, errs := runElasticGroup(t, jobs(), Elastic{CommitEvery: 3, Schedule: []MembershipChange{{Step: 30, Members: []int{0, 2}}}})
		for i, err := range errs {
			if !errors.Is(err, membership.ErrPastEnd) || !strings.Contains(err.Error(), "at step 30, and this run ends at step 24") {
				t.Errorf("peer %d: %v, want the change past the end refused", i, err)
			}
		}
	})
	t.Run("verdict", func(t *testing.T) {
		rec := membership.Record{Changes: []MembershipChange{{Step: 5, Members: []int{0, 2}}}}
		sums, errs := runElasticGroup(t, jobs(), Elastic{CommitEvery: 3, Schedule: rec.Changes})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		rec.ParamsSHA256 = sums[0].Run.ParamsSHA256
		v := membership.CheckReplay(rec, sums[0].Run.Membership, sums[0].Run.ParamsSHA256)
		if v.OK() || !strings.Contains(v.String(), "change 1 happened at step 6, recorded at step 5") || !v.ParamsEqual {
			t.Errorf("%s: want the change between commits told apart, the parameters equal", v)
		}
		rec.Changes[0].Step = 6
		if v := membership.CheckReplay(rec, sums[0].Run.Membership, "other"); v.OK() || !strings.Contains(v.String(), "every one of the 1 recorded") || !strings.Contains(v.String(), "DIFFER") {
			t.Errorf("%s: want the changes matched, the parameters differing", v)
		}
	})
}
