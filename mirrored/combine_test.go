package mirrored

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// recordingCombiner is Mean that records the ranges it was handed.
type recordingCombiner struct {
	mu     sync.Mutex
	ranges [][2]int
}

func (c *recordingCombiner) Name() string { return "recording mean" }

func (c *recordingCombiner) CombineRange(ctx context.Context, g Group, grad []float32, lo, hi int) error {
	c.mu.Lock()
	c.ranges = append(c.ranges, [2]int{lo, hi})
	c.mu.Unlock()
	return Mean{}.CombineRange(ctx, g, grad, lo, hi)
}

// bf16Combiner is a 16-bit exchange in one type, the seam's proof: each
// replica's range is rounded to bfloat16 (round to nearest even), as it
// would travel, then summed in float32 and averaged.
type bf16Combiner struct{}

func (bf16Combiner) Name() string { return "bf16 mean" }

func (bf16Combiner) CombineRange(ctx context.Context, g Group, grad []float32, lo, hi int) error {
	for i := lo; i < hi; i++ {
		grad[i] = roundBF16(grad[i])
	}
	return Mean{}.CombineRange(ctx, g, grad, lo, hi)
}

func roundBF16(v float32) float32 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// TestCombinerCoversTheGradient: with buckets and without, a custom
// Combiner is handed every element of every step's gradient exactly once
// and, delegating to Mean, ends with Mean's bits.
func TestCombinerCoversTheGradient(t *testing.T) {
	mn := synthMNIST(240, 40, 3)
	base := testJob(t, "", mn, 8, 1)
	base.NewModel = smallCNN
	sums, errs := runGroup(t, same(2, base))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("plain run, rank %d: %v", r, err)
		}
	}
	want := sums[0].Run.ParamsSHA256
	for _, bucket := range []int{-1, 4 << 10} {
		recs := []*recordingCombiner{{}, {}}
		jobs := same(2, base)
		for r := range jobs {
			jobs[r].GradientBucket, jobs[r].Combiner = bucket, recs[r]
		}
		sums, errs := runGroup(t, jobs)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("bucket %d, rank %d: %v", bucket, r, err)
			}
		}
		if got := sums[1].Run.ParamsSHA256; got != want || sums[0].Run.ParamsSHA256 != want {
			t.Fatalf("bucket %d: ranks end with %s and %s, Mean alone with %s", bucket, sums[0].Run.ParamsSHA256, got, want)
		}
		for r, rec := range recs {
			steps, parts := coverSteps(t, rec.ranges, sums[r].Run.Params)
			if steps != sums[r].Run.Steps {
				t.Fatalf("bucket %d, rank %d: the combiner covered %d steps' gradients, the run took %d steps", bucket, r, steps, sums[r].Run.Steps)
			}
			if bucket > 0 && parts <= steps {
				t.Fatalf("bucket %d, rank %d: %d ranges over %d steps, want buckets", bucket, r, parts, steps)
			}
		}
	}
}

// coverSteps cuts ranges into steps, each a set of disjoint ranges whose
// union is [0, n) (a step's buckets go from the top down), and returns
// the steps and ranges counted; it fails the test on a gap or an overlap.
func coverSteps(t *testing.T, ranges [][2]int, n int) (steps, parts int) {
	t.Helper()
	covered := make([]bool, n)
	left := n
	for _, rg := range ranges {
		parts++
		for i := rg[0]; i < rg[1]; i++ {
			if covered[i] {
				t.Fatalf("step %d: element %d combined twice (range [%d,%d))", steps, i, rg[0], rg[1])
			}
			covered[i] = true
			left--
		}
		if left == 0 {
			steps++
			clear(covered)
			left = n
		}
	}
	if left != n {
		t.Fatalf("after %d steps, %d of %d elements were left uncombined", steps, left, n)
	}
	return steps, parts
}

// TestCombinerBF16: a 16-bit exchange written as one Combiner keeps the
// replicas identical, differs from float32's mean and still learns.
func TestCombinerBF16(t *testing.T) {
	mn := synthMNIST(400, 100, 8)
	job := testJob(t, nn.Softmax, mn, 16, 2)
	plain, errs := runGroup(t, same(2, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("plain, rank %d: %v", r, err)
		}
	}
	job.Combiner = bf16Combiner{}
	sums, errs := runGroup(t, same(2, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("bf16, rank %d: %v", r, err)
		}
	}
	if sums[0].Run.ParamsSHA256 != sums[1].Run.ParamsSHA256 {
		t.Fatalf("bf16 replicas differ: %s and %s", sums[0].Run.ParamsSHA256, sums[1].Run.ParamsSHA256)
	}
	if sums[0].Run.ParamsSHA256 == plain[0].Run.ParamsSHA256 {
		t.Fatal("bf16 ended with float32's bits: the Combiner was not used")
	}
	acc, plainAcc := sums[0].Run.FinalAccuracy, plain[0].Run.FinalAccuracy
	if acc < 0.5 || math.Abs(acc-plainAcc) > 0.05 {
		t.Fatalf("bf16 accuracy %.3f, float32 %.3f: want above chance and close", acc, plainAcc)
	}
}

// TestCombinerChecked: replicas that combine differently are named at
// start-up, and a Combiner where there is no dense gradient is refused.
func TestCombinerChecked(t *testing.T) {
	mn := synthMNIST(120, 30, 4)
	job := testJob(t, nn.Softmax, mn, 8, 1)
	jobs := same(2, job)
	jobs[1].Combiner = bf16Combiner{}
	_, errs := runGroup(t, jobs)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "combiner is (not set) on rank 0 but bf16 mean on rank 1") {
			t.Fatalf("rank %d: %v, want the combiner named", r, err)
		}
	}
	job.Combiner = bf16Combiner{}
	job.Strategy = Gossip{}
	if err := job.Validate(); err == nil || !strings.Contains(err.Error(), "combiner bf16 mean") {
		t.Fatalf("a combiner under gossip: %v, want it refused by name", err)
	}
}
