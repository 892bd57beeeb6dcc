package sparse

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestFTRLHandComputed(t *testing.T) {
	// α=0.5, β=1, λ1=0.1, λ2=0.2, one feature, gradients 0.6, -0.8, -0.5:
	//  g=0.6:  σ=(√0.36-0)/0.5=1.2, z=0.6, n=0.36, w=-(0.6-0.1)/((1+0.6)/0.5+0.2)=-0.5/3.4
	//  g=-0.8: n=1, σ=(1-0.6)/0.5=0.8, z=0.6-0.8-0.8·(-0.5/3.4)=-0.0823529, |z|<=λ1 so w=0
	//  g=-0.5: n=1.25, σ=(√1.25-1)/0.5, z=-0.0823529-0.5-σ·0=-0.5823529,
	//          w=-(z+0.1)/((1+√1.25)/0.5+0.2)=0.4823529/4.4360680=0.1087343
	o, err := NewFTRL(1, 0.5, 1, 0.1, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	w := []float32{0}
	for step, tc := range []struct{ g, z, n, w float64 }{
		{0.6, 0.6, 0.36, -0.5 / 3.4},
		{-0.8, -0.08235294117647067, 1, 0},
		{-0.5, -0.5823529411764706, 1.25, 0.10873434393318954},
	} {
		o.Step(w, Vector{Indices: []int32{0}, Values: []float32{float32(tc.g)}})
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"z", float64(o.ZN[0]), tc.z}, {"n", float64(o.ZN[1]), tc.n}, {"w", float64(w[0]), tc.w}} {
			if math.Abs(c.got-c.want) > 1e-6 {
				t.Fatalf("step %d: %s = %v, want %v", step+1, c.name, c.got, c.want)
			}
		}
	}
	// Rebuild recovers w from the state alone.
	w2 := []float32{42}
	o.Rebuild(w2)
	if w2[0] != w[0] {
		t.Fatalf("Rebuild gave %v, Step left %v", w2[0], w[0])
	}
}

func TestAdaGradHandComputed(t *testing.T) {
	o, err := NewAdaGrad(2, 0.1, 0) // initial accumulator 0.1
	if err != nil {
		t.Fatal(err)
	}
	w := []float32{0, 0}
	o.Step(w, Vector{Indices: []int32{1}, Values: []float32{0.3}})
	// a = 0.1 + 0.09 = 0.19, w = -0.1·0.3/√0.19
	if want := -0.06882472016116853; math.Abs(float64(w[1])-want) > 1e-7 || w[0] != 0 {
		t.Fatalf("w = %v, want [0 %v]", w, want)
	}
	if math.Abs(float64(o.Accum[1])-0.19) > 1e-7 || o.Accum[0] != 0.1 {
		t.Fatalf("accumulators %v, want [0.1 0.19]", o.Accum)
	}
}

func TestSGDLazyL2MatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const dim, lr, l2 = 50, 0.1, 0.3
	o, err := NewSGD(dim, lr, l2)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, dim)
	dense := make([]float64, dim)
	for i := range w {
		w[i] = float32(r.NormFloat64())
		dense[i] = float64(w[i])
	}
	g := make([]float64, dim)
	for step := 0; step < 300; step++ {
		// Sparse gradients, some features untouched for > len(table) steps.
		v := randomVector(r, dim, 0.05*r.Float64())
		o.Step(w, v)
		clear(g)
		for k, i := range v.Indices {
			g[i] = float64(v.Values[k])
		}
		for i := range dense {
			dense[i] = (1-lr*l2)*dense[i] - lr*g[i]
		}
	}
	o.Flush(w)
	for i := range w {
		if math.Abs(float64(w[i])-dense[i]) > 1e-5*(1+math.Abs(dense[i])) {
			t.Fatalf("w[%d] = %v after lazy L2, dense L2 gives %v", i, w[i], dense[i])
		}
	}
	// A second Flush is a no-op.
	before := append([]float32(nil), w...)
	o.Flush(w)
	for i := range w {
		if w[i] != before[i] {
			t.Fatal("second Flush changed the weights")
		}
	}
}

func TestOptimizersTouchOnlyGradientIndices(t *testing.T) {
	const dim = 1000
	r := rand.New(rand.NewPCG(15, 16))
	for _, name := range []string{"sgd", "adagrad", "ftrl"} {
		t.Run(name, func(t *testing.T) {
			o, err := NewOptimizer(name, dim, OptimizerConfig{LR: 0.1, L2: 0.01, L1: 0.001})
			if err != nil {
				t.Fatal(err)
			}
			w := make([]float32, dim)
			for step := 0; step < 20; step++ {
				before := append([]float32(nil), w...)
				var stateBefore [][]float32
				for _, s := range o.State() {
					stateBefore = append(stateBefore, append([]float32(nil), s...))
				}
				v := randomVector(r, dim, 0.02)
				o.Step(w, v)
				touched := map[int]bool{}
				for _, i := range v.Indices {
					touched[int(i)] = true
				}
				for i := range w {
					if touched[i] {
						continue
					}
					if w[i] != before[i] {
						t.Fatalf("step %d: untouched weight %d changed", step, i)
					}
					// A state array holds len/dim consecutive entries per feature.
					for s, st := range o.State() {
						k := len(st) / dim
						for j := k * i; j < k*(i+1); j++ {
							if st[j] != stateBefore[s][j] {
								t.Fatalf("step %d: state %d of untouched feature %d changed", step, s, i)
							}
						}
					}
				}
			}
		})
	}
}

func TestNewOptimizerRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OptimizerConfig
		want string
	}{
		{"nope", OptimizerConfig{LR: 1}, "unknown optimizer"},
		{"sgd", OptimizerConfig{LR: 0}, "learning rate"},
		{"sgd", OptimizerConfig{LR: 1, L2: 2}, "L2"},
		{"adagrad", OptimizerConfig{LR: -1}, "learning rate"},
		{"adagrad", OptimizerConfig{LR: 1, InitialAccumulator: -1}, "initial accumulator"},
		{"ftrl", OptimizerConfig{LR: math.NaN()}, "alpha"},
		{"ftrl", OptimizerConfig{LR: 1, L1: -1}, "L1"},
	} {
		if _, err := NewOptimizer(tc.name, 10, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewOptimizer(%q, %+v): %v, want error containing %q", tc.name, tc.cfg, err, tc.want)
		}
	}
}

// TestOptimizersLearn checks every optimizer fits a separable problem.
func TestOptimizersLearn(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const dim = 200
	truth := make([]float32, dim)
	for i := range truth {
		truth[i] = float32(r.NormFloat64() * 2)
	}
	batch := func() (CSR, []float32) {
		var x CSR
		x.Reset()
		labels := make([]float32, 64)
		for row := range labels {
			v := randomVector(r, dim, 0.05)
			x.AppendRow(v.Indices, v.Values)
			if v.Dot(truth) > 0 {
				labels[row] = 1
			}
		}
		return x, labels
	}
	for _, tc := range []struct {
		name string
		cfg  OptimizerConfig
	}{
		{"sgd", OptimizerConfig{LR: 2, L2: 1e-4}},
		{"adagrad", OptimizerConfig{LR: 0.5}},
		{"ftrl", OptimizerConfig{LR: 0.5, L1: 1e-4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := NewLogReg(dim)
			o, err := NewOptimizer(tc.name, dim, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var g Vector
			for step := 0; step < 400; step++ {
				x, y := batch()
				if _, err := m.Gradient(x, y, &g); err != nil {
					t.Fatal(err)
				}
				o.Step(m.W, g)
			}
			o.Flush(m.W)
			var e Evaluator
			x, y := batch()
			if err := m.Evaluate(x, y, &e); err != nil {
				t.Fatal(err)
			}
			if got := e.Metrics(); got.Accuracy < 0.85 || got.AUC < 0.9 {
				t.Fatalf("after 400 steps: %v; want accuracy >= 0.85, AUC >= 0.9", got)
			}
		})
	}
}
