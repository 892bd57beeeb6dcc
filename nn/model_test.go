package nn

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func testBatch(seed uint64, n, dim, classes int) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	x := randSlice(rng, n*dim)
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(rng.IntN(classes))
	}
	return x, labels
}

func TestModelSizes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		params, dim int
	}{{LeNet5, 61706, 784}, {Softmax, 7850, 784}} {
		m, err := NewModel(tc.name, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Params()) != tc.params || len(m.Grads()) != tc.params || m.InputDim() != tc.dim || m.Classes() != 10 || m.Name() != tc.name {
			t.Errorf("%s: %d params, %d grads, dim %d, %d classes", tc.name, len(m.Params()), len(m.Grads()), m.InputDim(), m.Classes())
		}
	}
}

func TestNewModelErrors(t *testing.T) {
	if _, err := NewModel("resnet", 1); err == nil || !strings.Contains(err.Error(), "resnet") {
		t.Errorf("unknown model: err = %v", err)
	}
	if _, err := NewModelShards(LeNet5, 1, 0); err == nil {
		t.Error("0 shards: no error")
	}
	m, _ := NewModel(Softmax, 1)
	x, labels := testBatch(1, 4, 784, 10)
	for _, tc := range []struct {
		name   string
		x      []float32
		labels []int32
		n      int
		want   string
	}{
		{"zero batch", x, labels, 0, "at least 1"},
		{"short x", x[:784], labels, 4, "needs"},
		{"label 10", x, []int32{0, 1, 10, 2}, 4, "label 10 of example 2"},
		{"label -1", x, []int32{-1, 1, 1, 2}, 4, "label -1 of example 0"},
	} {
		if _, err := m.ForwardBackward(tc.x, tc.labels, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
		if tc.n == 0 {
			continue // an empty evaluation is fine
		}
		if _, _, err := m.Evaluate(tc.x, tc.labels, tc.n); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Evaluate: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

// TestModelGradients checks each whole model's gradient against finite
// differences of its mean loss, along the gradient's own direction and a
// mixed direction, and coordinate by coordinate on the largest gradients
// and a random sample, with steps of 1e-3 (measured: the float32 noise in
// the quotient is then below 1e-5, while steps of 1e-2 already show the
// curvature of ReLU networks). A step that crosses a ReLU or max-pool kink
// makes the quotient meaningless; such coordinates are recognised by
// quotients at steps 1e-3 and 5e-4 that disagree, and skipped (at most a
// quarter of them may be).
func TestModelGradients(t *testing.T) {
	for _, name := range ModelNames {
		t.Run(name, func(t *testing.T) {
			m, err := NewModelShards(name, 5, 2)
			if err != nil {
				t.Fatal(err)
			}
			const n = 5
			x, labels := testBatch(9, n, m.InputDim(), m.Classes())
			p := m.Params()
			if _, err := m.ForwardBackward(x, labels, n); err != nil {
				t.Fatal(err)
			}
			g := slices.Clone(m.Grads())
			mean := func() float64 {
				l, _, _ := m.Evaluate(x, labels, n)
				return l / n
			}
			quotient := func(v []float32, eps float32) float64 {
				orig := slices.Clone(p)
				defer copy(p, orig)
				for i := range p {
					p[i] = orig[i] + eps*v[i]
				}
				up := mean()
				for i := range p {
					p[i] = orig[i] - eps*v[i]
				}
				down := mean()
				return (up - down) / (2 * float64(eps))
			}
			unit := func(v []float32) []float32 {
				var norm float64
				for _, a := range v {
					norm += float64(a) * float64(a)
				}
				for i := range v {
					v[i] /= float32(math.Sqrt(norm))
				}
				return v
			}
			rng := rand.New(rand.NewPCG(11, 12))
			dirG := unit(slices.Clone(g))
			mixed := randSlice(rng, len(g))
			unit(mixed)
			for i := range mixed {
				mixed[i] += dirG[i]
			}
			for d, v := range [][]float32{dirG, unit(mixed)} {
				var gv float64
				for i := range v {
					gv += float64(v[i]) * float64(g[i])
				}
				if num := quotient(v, 1e-3); math.Abs(num-gv) > 0.01*math.Abs(num)+1e-4 {
					t.Errorf("direction %d: g·v = %.6g, finite difference %.6g", d, gv, num)
				}
			}
			idx := make([]int, len(g))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int { return -cmpAbs(g[a], g[b]) })
			coords := idx[:20]
			for range 20 {
				coords = append(coords, rng.IntN(len(g)))
			}
			skipped := 0
			e := make([]float32, len(g))
			for _, i := range coords {
				e[i] = 1
				q1, q2 := quotient(e, 1e-3), quotient(e, 5e-4)
				e[i] = 0
				if math.Abs(q1-q2) > 0.05*math.Abs(q1)+1e-4 {
					skipped++
					continue
				}
				if math.Abs(q2-float64(g[i])) > 0.02*math.Abs(q2)+1e-4 {
					t.Errorf("param %d: gradient %.6g, finite difference %.6g", i, g[i], q2)
				}
			}
			if skipped > len(coords)/4 {
				t.Errorf("%d of %d coordinates skipped as kinks", skipped, len(coords))
			}
		})
	}
}

func cmpAbs(a, b float32) int {
	x, y := math.Abs(float64(a)), math.Abs(float64(b))
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// TestModelDeterminism: the same seed gives the same initial parameters
// and the same gradients bit for bit, whether the shards run in parallel
// or in turn; a different seed gives different parameters; and splitting a
// batch into 1 or 3 shards agrees to rounding.
func TestModelDeterminism(t *testing.T) {
	for _, name := range ModelNames {
		t.Run(name, func(t *testing.T) {
			x, labels := testBatch(3, 37, 784, 10)
			run := func(procs, shards int, seed int64) ([]float32, []float32, float64) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				m, err := NewModelShards(name, seed, shards)
				if err != nil {
					t.Fatal(err)
				}
				p0 := slices.Clone(m.Params())
				loss, err := m.ForwardBackward(x, labels, 37)
				if err != nil {
					t.Fatal(err)
				}
				return p0, slices.Clone(m.Grads()), loss
			}
			p1, g1, l1 := run(1, 2, 42)
			p2, g2, l2 := run(2, 2, 42)
			if !slices.Equal(p1, p2) || !slices.Equal(g1, g2) || l1 != l2 {
				t.Fatal("same seed, GOMAXPROCS 1 and 2: results differ")
			}
			p3, _, _ := run(2, 2, 43)
			if slices.Equal(p1, p3) {
				t.Fatal("seeds 42 and 43 give the same parameters")
			}
			for _, shards := range []int{1, 3} {
				_, g, l := run(2, shards, 42)
				if math.Abs(l-l1) > 1e-5*l1 {
					t.Errorf("%d shards: loss %v, 2 shards %v", shards, l, l1)
				}
				for i := range g {
					if math.Abs(float64(g[i]-g1[i])) > 1e-5+1e-3*math.Abs(float64(g1[i])) {
						t.Fatalf("%d shards: grad %d = %v, 2 shards %v", shards, i, g[i], g1[i])
					}
				}
			}
		})
	}
}

// TestEvaluateMatchesTraining: Evaluate's loss over a batch equals the
// training loss, and its count matches a direct argmax.
func TestEvaluateMatchesTraining(t *testing.T) {
	m, _ := NewModel(LeNet5, 2)
	const n = 600 // more than one evaluation chunk
	x, labels := testBatch(4, n, 784, 10)
	before := slices.Clone(m.Grads())
	sum, correct, err := m.Evaluate(x, labels, n)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, m.Grads()) {
		t.Fatal("Evaluate changed the gradients")
	}
	loss, _ := m.ForwardBackward(x, labels, n)
	if math.Abs(sum/n-loss) > 1e-6*loss {
		t.Fatalf("Evaluate mean loss %v, ForwardBackward %v", sum/n, loss)
	}
	if correct < 0 || correct > n {
		t.Fatalf("correct = %d of %d", correct, n)
	}
}
