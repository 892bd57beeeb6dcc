package nn

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// bnLayer builds BatchNormalization for in, in training mode or in
// evaluation mode with moving statistics drawn from seed.
func bnLayer(in Shape, b BatchNormalization, train bool, seed uint64) func() layer {
	return func() layer {
		l, _, err := b.build(in)
		if err != nil {
			panic(err)
		}
		bn := l.(*batchNorm)
		buf := make([]float32, bn.NumBuffers())
		bn.BindBuffers(buf)
		rng := rand.New(rand.NewPCG(seed, 3))
		for c := 0; c < bn.C; c++ {
			bn.mean[c] = float32(rng.NormFloat64())
			bn.vr[c] = float32(0.5 + rng.Float64())
		}
		bn.setTrain(train)
		return bn
	}
}

func init() {
	img := Shape{H: 3, W: 4, C: 2}
	moreLayerCases = append(moreLayerCases,
		layerCase{"batch_normalization_image_training", 100, bnLayer(img, BatchNormalization{}, true, 1), false, false},
		layerCase{"batch_normalization_vector_training", 101, bnLayer(Shape{C: 5}, BatchNormalization{Momentum: 0.9, Epsilon: 1e-2}, true, 2), false, false},
		layerCase{"batch_normalization_no_center_training", 102, bnLayer(img, BatchNormalization{NoCenter: true}, true, 3), false, false},
		layerCase{"batch_normalization_no_scale_training", 103, bnLayer(img, BatchNormalization{NoScale: true}, true, 4), false, false},
		layerCase{"batch_normalization_evaluation", 104, bnLayer(img, BatchNormalization{}, false, 5), false, false},
	)
}

// TestBatchNormEvaluation: an evaluation pass is γ·(x − moving mean)/
// √(moving variance + ε) + β, worked out here in float64; a training
// pass gives each channel the mean β and the variance γ²·σ²/(σ²+ε).
func TestBatchNormEvaluation(t *testing.T) {
	const n = 4
	in := Shape{H: 2, W: 3, C: 3}
	rng := rand.New(rand.NewPCG(9, 9))
	l := bnLayer(in, BatchNormalization{Epsilon: 0.01}, false, 6)().(*batchNorm)
	params := randSlice(rng, l.NumParams())
	l.Bind(params, make([]float32, len(params)))
	x := randSlice(rng, n*l.InSize())
	y := make([]float32, len(x))
	l.Forward(y, x, n)
	for e := 0; e < n; e++ {
		for c := 0; c < in.C; c++ {
			for p := 0; p < 6; p++ {
				i := (e*in.C+c)*6 + p
				want := float64(params[c])*(float64(x[i])-float64(l.mean[c]))/math.Sqrt(float64(l.vr[c])+0.01) + float64(params[in.C+c])
				if math.Abs(float64(y[i])-want) > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("evaluation output %d: %v, by hand %v", i, y[i], want)
				}
			}
		}
	}
	l.setTrain(true)
	l.Forward(y, x, n)
	for c := 0; c < in.C; c++ {
		var s, s2 []float64
		for e := 0; e < n; e++ {
			for p := 0; p < 6; p++ {
				s = append(s, float64(y[(e*in.C+c)*6+p]))
				s2 = append(s2, float64(x[(e*in.C+c)*6+p]))
			}
		}
		mean, vr := moments(s)
		_, xv := moments(s2)
		g, b := float64(params[c]), float64(params[in.C+c])
		if math.Abs(mean-b) > 1e-5 || math.Abs(vr-g*g*xv/(xv+0.01)) > 1e-4 {
			t.Errorf("channel %d in training: mean %v variance %v, want %v and %v", c, mean, vr, b, g*g*xv/(xv+0.01))
		}
	}
}

// moments is the mean and biased variance of v.
func moments(v []float64) (mean, vr float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		vr += (x - mean) * (x - mean)
	}
	return mean, vr / float64(len(v))
}

// bnModel is a small model whose first layer is BatchNormalization, so
// that the layer sees the batch itself.
func bnModel(t *testing.T, shards int) *Sequential {
	t.Helper()
	m, err := NewSequential("bn", Shape{H: 3, W: 3, C: 2}, 5, shards,
		BatchNormalization{Momentum: 0.9}, Flatten{}, Dense{Units: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBatchNormMovingStatistics: after a training step the buffers are
// momentum·old + (1−momentum)·the whole batch's per-channel mean and
// biased variance, worked out by hand, whatever the shards; the same bits
// whatever GOMAXPROCS; Evaluate leaves them alone; they are named as
// PyTorch's BatchNorm2d names them.
func TestBatchNormMovingStatistics(t *testing.T) {
	const n = 7 // an odd batch: the shards' parts differ in size
	x, labels := testBatch(4, n, 18, 3)
	// By hand: channel c of every example.
	want := make([]float64, 4)
	for c := 0; c < 2; c++ {
		var v []float64
		for e := 0; e < n; e++ {
			for p := 0; p < 9; p++ {
				v = append(v, float64(x[e*18+c*9+p]))
			}
		}
		mean, vr := moments(v)
		want[c] = 0.1 * mean
		want[2+c] = 0.9 + 0.1*vr
	}
	var bits [][]float32
	for _, tc := range []struct{ shards, procs int }{{1, 1}, {2, 1}, {2, 2}, {3, 2}, {8, 1}} {
		old := runtime.GOMAXPROCS(tc.procs)
		m := bnModel(t, tc.shards)
		if _, err := m.ForwardBackward(x, labels, n); err != nil {
			t.Fatal(err)
		}
		runtime.GOMAXPROCS(old)
		got := m.Buffers()
		for i, w := range want {
			if math.Abs(float64(got[i])-w) > 1e-6 {
				t.Errorf("%d shards: buffer %d %v, by hand %v", tc.shards, i, got[i], w)
			}
		}
		if tc.shards == 2 {
			bits = append(bits, slices.Clone(got))
		}
		before := slices.Clone(got)
		if _, _, err := m.Evaluate(x, labels, n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, m.Buffers()) {
			t.Errorf("%d shards: Evaluate changed the buffers", tc.shards)
		}
	}
	if !slices.Equal(bits[0], bits[1]) {
		t.Errorf("GOMAXPROCS 1 and 2 give buffers %v and %v", bits[0], bits[1])
	}
	m := bnModel(t, 0)
	names := []string{}
	for _, b := range m.BufferTensors() {
		names = append(names, b.Name)
	}
	if want := []string{"0.running_mean", "0.running_var"}; !slices.Equal(names, want) {
		t.Errorf("buffer tensors %v, want %v", names, want)
	}
	if p := m.Tensors(); p[0].Name != "0.weight" || p[1].Name != "0.bias" {
		t.Errorf("tensors %v, want 0.weight and 0.bias first", p)
	}
	if b := m.Buffers(); b[0] != 0 || b[1] != 0 || b[2] != 1 || b[3] != 1 {
		t.Errorf("initial buffers %v, want zeros then ones", b)
	}
}

// TestBatchNormJSON: the spec's JSON writes out Keras's defaults and
// reads back, and a spec with its defaults spelled out has the digest of
// one without.
func TestBatchNormJSON(t *testing.T) {
	arch := func(b BatchNormalization) Architecture {
		return Architecture{Name: "bn", Input: Shape{H: 4, W: 4, C: 2}, Layers: []LayerSpec{b, Flatten{}, Dense{Units: 2}}}
	}
	b, err := json.Marshal(arch(BatchNormalization{NoCenter: true, Name: "bn1"}))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"batch_normalization","momentum":0.99,"epsilon":0.001,"center":false,"scale":true,"name":"bn1"}`
	var j struct{ Layers []json.RawMessage }
	if err := json.Unmarshal(b, &j); err != nil || string(j.Layers[0]) != want {
		t.Fatalf("JSON %s (%v), want its first layer %s", b, err, want)
	}
	back, err := ParseArchitecture(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Layers[0]; got != (BatchNormalization{Momentum: 0.99, Epsilon: 0.001, NoCenter: true, Name: "bn1"}) {
		t.Errorf("read back %+v", got)
	}
	d0, _ := arch(BatchNormalization{}).Digest()
	d1, _ := arch(BatchNormalization{Momentum: 0.99, Epsilon: 1e-3}).Digest()
	d2, _ := arch(BatchNormalization{Momentum: 0.9}).Digest()
	if d0 != d1 || d0 == d2 {
		t.Errorf("digests %s, %s (defaults spelled out), %s (another momentum)", d0, d1, d2)
	}
	if _, err := (Architecture{Name: "bn", Input: Shape{C: 3}, Layers: []LayerSpec{BatchNormalization{Momentum: 1}, Dense{Units: 2}}}).New(1, 1); err == nil {
		t.Error("momentum 1 accepted")
	}
}
