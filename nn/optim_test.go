package nn

import (
	"math"
	"strings"
	"testing"
)

// TestOptimizersByHand runs two steps of each optimizer on a 2-vector and
// compares with values worked out by hand (shown in the comments).
func TestOptimizersByHand(t *testing.T) {
	p0 := []float32{1, -2}
	g1 := []float32{0.5, 1}
	g2 := []float32{-1, 0.25}
	cases := []struct {
		name        string
		cfg         OptimizerConfig
		after1      []float64
		after2      []float64
		stateLen    int
		stateAfter2 []float64
	}{
		// p1 = p0 − 0.1·g1 = (0.95, −2.1); p2 = p1 − 0.1·g2 = (1.05, −2.125)
		{"sgd", OptimizerConfig{LR: 0.1}, []float64{0.95, -2.1}, []float64{1.05, -2.125}, 0, nil},
		// g' = g + 0.5·p: step 1 g' = (1, 0) → p1 = (0.9, −2); step 2 g' = (−0.55, −0.75) → p2 = (0.955, −1.925)
		{"sgd", OptimizerConfig{LR: 0.1, WeightDecay: 0.5}, []float64{0.9, -2}, []float64{0.955, -1.925}, 0, nil},
		// v1 = g1 = (0.5, 1), p1 = (0.95, −2.1); v2 = 0.9·v1 + g2 = (−0.55, 1.15), p2 = (1.005, −2.215)
		{"momentum", OptimizerConfig{LR: 0.1, Momentum: 0.9}, []float64{0.95, -2.1}, []float64{1.005, -2.215}, 2, []float64{-0.55, 1.15}},
		// sgd with momentum is the same heavy ball
		{"sgd", OptimizerConfig{LR: 0.1, Momentum: 0.9}, []float64{0.95, -2.1}, []float64{1.005, -2.215}, 2, []float64{-0.55, 1.15}},
		// v1 = (0.5, 1); p1 = p0 − 0.1·(g1 + 0.9·v1) = (1 − 0.095, −2 − 0.19) = (0.905, −2.19)
		// v2 = (−0.55, 1.15); p2 = p1 − 0.1·(g2 + 0.9·v2) = (0.905 + 0.1495, −2.19 − 0.1285) = (1.0545, −2.3185)
		{"nesterov", OptimizerConfig{LR: 0.1, Momentum: 0.9}, []float64{0.905, -2.19}, []float64{1.0545, -2.3185}, 2, []float64{-0.55, 1.15}},
		// Adam, step 1: m̂ = g, v̂ = g², so p1 = p0 − 0.1·g/(|g| + ε) ≈ p0 − 0.1·sign(g) = (0.9, −2.1).
		// Step 2 by the textbook formula in float64 (adam2 below).
		{"adam", OptimizerConfig{LR: 0.1}, []float64{0.9, -2.1}, nil, 5, nil},
	}
	// Adam's second step, by the textbook formula in float64.
	adam2 := func(g1, g2, p1 float64) (float64, float64, float64) {
		m := 0.9*(0.1*g1) + 0.1*g2
		v := 0.999*(0.001*g1*g1) + 0.001*g2*g2
		mh, vh := m/(1-0.81), v/(1-0.999*0.999)
		return p1 - 0.1*mh/(math.Sqrt(vh)+1e-8), m, v
	}
	p1a := 1 - 0.1*0.5/(0.5+1e-8)
	p1b := -2 - 0.1*1/(1+1e-8)
	pa, ma, va := adam2(0.5, -1, p1a)
	pb, mb, vb := adam2(1, 0.25, p1b)
	cases[len(cases)-1].after2 = []float64{pa, pb}
	cases[len(cases)-1].stateAfter2 = []float64{ma, mb, va, vb, 2}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Params = 2
			o, err := NewOptimizer(tc.name, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.State()) != tc.stateLen {
				t.Fatalf("state length %d, want %d", len(o.State()), tc.stateLen)
			}
			p := append([]float32(nil), p0...)
			g := append([]float32(nil), g1...)
			o.Step(p, g)
			near(t, "after step 1", p, tc.after1)
			if g[0] != g1[0] || g[1] != g1[1] {
				t.Fatal("Step modified the gradient")
			}
			o.Step(p, g2)
			near(t, "after step 2", p, tc.after2)
			if tc.stateAfter2 != nil {
				near(t, "state after step 2", o.State(), tc.stateAfter2)
			}
			o.SetLR(0.25)
			if o.LR() != 0.25 {
				t.Fatalf("LR() = %v after SetLR(0.25)", o.LR())
			}
		})
	}
}

func near(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6*(1+math.Abs(want[i])) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

func TestOptimizerErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  OptimizerConfig
		want string
	}{
		{"rmsprop", OptimizerConfig{Params: 1, LR: 1}, "unknown optimizer"},
		{"sgd", OptimizerConfig{Params: 1, LR: 0}, "learning rate"},
		{"sgd", OptimizerConfig{Params: 1, LR: -1}, "learning rate"},
		{"sgd", OptimizerConfig{Params: 1, LR: math.NaN()}, "learning rate"},
		{"sgd", OptimizerConfig{Params: 0, LR: 1}, "parameters"},
		{"sgd", OptimizerConfig{Params: 1, LR: 1, Momentum: 1}, "momentum"},
		{"nesterov", OptimizerConfig{Params: 1, LR: 1}, "momentum"},
		{"sgd", OptimizerConfig{Params: 1, LR: 1, WeightDecay: -1}, "weight decay"},
		{"adam", OptimizerConfig{Params: 1, LR: 1, Beta1: 1}, "betas"},
	} {
		if _, err := NewOptimizer(tc.name, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: err = %v, want it to mention %q", tc.name, tc.cfg, err, tc.want)
		}
	}
}

func TestSchedules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ScheduleConfig
		steps []int
		want  []float64
	}{
		{"constant", ScheduleConfig{Kind: "constant", Base: 0.1}, []int{0, 5, 1000}, []float64{0.1, 0.1, 0.1}},
		// ×0.5 every 10 steps
		{"step", ScheduleConfig{Kind: "step", Base: 0.08, Gamma: 0.5, DecayEvery: 10}, []int{0, 9, 10, 25}, []float64{0.08, 0.08, 0.04, 0.02}},
		// half-way through a cosine is the mid-point; the end is MinLR
		{"cosine", ScheduleConfig{Kind: "cosine", Base: 1, MinLR: 0.2, TotalSteps: 100}, []int{0, 50, 100, 150}, []float64{1, 0.6, 0.2, 0.2}},
		// warm-up 4: 0.25, 0.5, 0.75, 1 × base, then the schedule
		{"warmup+constant", ScheduleConfig{Kind: "constant", Base: 0.4, WarmupSteps: 4}, []int{0, 1, 3, 4}, []float64{0.1, 0.2, 0.4, 0.4}},
		// warm-up 10 then cosine over steps 10..110: step 60 is half-way
		{"warmup+cosine", ScheduleConfig{Kind: "cosine", Base: 1, TotalSteps: 110, WarmupSteps: 10}, []int{4, 10, 60, 110}, []float64{0.5, 1, 0.5, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSchedule(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range tc.steps {
				if got := s.At(step); math.Abs(got-tc.want[i]) > 1e-12 {
					t.Errorf("At(%d) = %v, want %v", step, got, tc.want[i])
				}
			}
		})
	}
	for _, bad := range []ScheduleConfig{
		{Kind: "exp", Base: 1},
		{Kind: "constant", Base: 0},
		{Kind: "step", Base: 1, Gamma: 0, DecayEvery: 1},
		{Kind: "step", Base: 1, Gamma: 0.5, DecayEvery: 0},
		{Kind: "cosine", Base: 1, TotalSteps: 5, WarmupSteps: 5},
		{Kind: "constant", Base: 1, WarmupSteps: -1},
	} {
		if _, err := NewSchedule(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
