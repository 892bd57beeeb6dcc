package statsync

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// together runs f(i) for i in [0, n) on goroutines of their own and
// waits for all.
func together(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// meet runs part j's Meet of vs[j] for every part on its own goroutine
// and returns each part's result.
func meet(p *Point, vs [][]float64) ([][]float64, []error) {
	out, errs := make([][]float64, len(vs)), make([]error, len(vs))
	together(len(vs), func(j int) {
		s, err := p.Meet(j, vs[j], "layer 1")
		out[j], errs[j] = slices.Clone(s), err
	})
	return out, errs
}

// failing is a Reducer that fails its first call.
type failing struct{ calls int }

func (f *failing) SumStats([]float64) error {
	f.calls++
	if f.calls == 1 {
		return errors.New("rank 1 did not answer")
	}
	return nil
}

// TestPoint: every part gets the sum of the parts (and, with replicas,
// of theirs), the same bits on each; rounds follow one another; a failed
// reduction is every part's error and sticks until Reset, and the
// meetings after it do not call the reducer.
func TestPoint(t *testing.T) {
	for _, parts := range []int{1, 2, 5} {
		p := New(parts, nil)
		for round := range 3 {
			vs := make([][]float64, parts)
			want := []float64{0, 0}
			for j := range vs {
				vs[j] = []float64{float64(j + round), 0.1 * float64(j)}
				want[0] += vs[j][0]
				want[1] += vs[j][1]
			}
			out, errs := meet(p, vs)
			for j := range out {
				if errs[j] != nil || !slices.Equal(out[j], want) {
					t.Errorf("%d parts, round %d, part %d: %v %v, want %v", parts, round, j, out[j], errs[j], want)
				}
			}
		}
	}
	// Two replicas of two parts each.
	rs := InMemory(2, 5*time.Second)
	points := []*Point{New(2, rs[0]), New(2, rs[1])}
	var got [2][][]float64
	together(2, func(r int) {
		got[r], _ = meet(points[r], [][]float64{{1 + float64(r)}, {10 * (1 + float64(r))}})
	})
	for r := range 2 {
		for j := range 2 {
			if !slices.Equal(got[r][j], []float64{33}) {
				t.Errorf("replica %d part %d: %v, want 33", r, j, got[r][j])
			}
		}
	}

	f := &failing{}
	p := New(3, f)
	_, errs := meet(p, [][]float64{{1}, {2}, {3}})
	for j, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "layer 1") || !strings.Contains(err.Error(), "rank 1 did not answer") {
			t.Errorf("part %d: %v, want the reducer's failure naming the layer", j, err)
		}
	}
	meet(p, [][]float64{{1}, {2}, {3}})
	if f.calls != 1 || p.Err() == nil {
		t.Errorf("after a failure: %d reductions, Err %v; want 1 and the failure", f.calls, p.Err())
	}
	p.Reset()
	if _, errs := meet(p, [][]float64{{1}, {2}, {3}}); errors.Join(errs...) != nil || f.calls != 2 {
		t.Errorf("after Reset: %v, %d reductions", errors.Join(errs...), f.calls)
	}
	var none *Point
	none.Reset()
	if none.Err() != nil {
		t.Error("a nil Point has an error")
	}
}

// TestInMemoryFailures: a replica that does not come is named by the
// wait that gave up on it, and then every call fails; replicas with
// vectors of different lengths are told their models differ.
func TestInMemoryFailures(t *testing.T) {
	rs := InMemory(3, 20*time.Millisecond)
	errs := make([]error, 2)
	together(2, func(r int) { errs[r] = rs[r].SumStats([]float64{1}) })
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "replicas [2]") {
			t.Errorf("replica %d: %v, want the wait to name replica 2", r, err)
		}
	}
	if err := rs[2].SumStats([]float64{1}); err == nil {
		t.Error("a late replica after the group failed: no error")
	}

	rs = InMemory(2, 5*time.Second)
	together(2, func(r int) { errs[r] = rs[r].SumStats(make([]float64, 1+r)) })
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "models differ") {
			t.Errorf("replica %d: %v, want the lengths' mismatch", r, err)
		}
	}
}
