package nn

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/nn/statsync"
)

// bothReplicas runs f(1) on a goroutine and f(0) on the caller's and
// waits for both: the replicas of a synchronized pass meet inside it.
func bothReplicas(f func(r int)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(1)
	}()
	f(0)
	<-done
}

// TestSyncBatchNormGradient: a BatchNormalization synchronized over two
// replicas (in-memory reducer), each with its part of a batch, one part
// possibly empty, computes the outputs of the layer on the whole batch,
// and its gradients (the input's, and γ's and β's summed over the
// replicas as the gradient exchange sums them) are the finite
// differences of the whole batch's loss Σ w·y; the moving statistics
// after the pass are the whole batch's, the same bits on both replicas.
func TestSyncBatchNormGradient(t *testing.T) {
	const (
		eps = 1e-2
		tol = 2e-3
	)
	img := Shape{H: 3, W: 4, C: 2}
	for _, tc := range []struct {
		name  string
		in    Shape
		b     BatchNormalization
		parts [2]int
	}{
		{"image", img, BatchNormalization{Momentum: 0.9}, [2]int{2, 3}},
		{"vector", Shape{C: 5}, BatchNormalization{Epsilon: 1e-2}, [2]int{4, 2}},
		{"no_center", img, BatchNormalization{NoCenter: true}, [2]int{3, 1}},
		{"no_scale", img, BatchNormalization{NoScale: true}, [2]int{1, 3}},
		{"one_replica_empty", img, BatchNormalization{}, [2]int{4, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			n := tc.parts[0] + tc.parts[1]
			ref := bnLayer(tc.in, tc.b, true, 1)().(*batchNorm)
			params := make([]float32, ref.NumParams())
			ref.Bind(params, make([]float32, len(params)))
			ref.Init(rng)
			for i := range params {
				params[i] += 0.1 * float32(rng.NormFloat64())
			}
			in, out := ref.InSize(), ref.OutSize()
			x, w := randSlice(rng, n*in), randSlice(rng, n*out)
			y := make([]float32, n*out)
			loss := func() float64 {
				ref.Forward(y, x, n)
				return project(w, y)
			}

			// The replicas: the same parameters and moving statistics,
			// gradients of their own.
			reducers := statsync.InMemory(2, 10*time.Second)
			var reps [2]*batchNorm
			grads := [2][]float32{make([]float32, len(params)), make([]float32, len(params))}
			for r := range reps {
				l := bnLayer(tc.in, tc.b, true, 1)().(*batchNorm)
				l.Bind(params, grads[r])
				l.sy = &bnSync{point: statsync.New(1, reducers[r]), what: "bn", buf: make([]float64, 1+2*l.C)}
				reps[r] = l
			}
			off := [2]int{0, tc.parts[0]}
			ys, dxs := make([]float32, n*out), make([]float32, n*in)
			bothReplicas(func(r int) {
				lo, m := off[r], tc.parts[r]
				reps[r].Forward(ys[lo*out:(lo+m)*out], x[lo*in:(lo+m)*in], m)
				reps[r].Backward(dxs[lo*in:(lo+m)*in], w[lo*out:(lo+m)*out], x[lo*in:(lo+m)*in], nil, m)
			})
			for _, l := range reps {
				if err := l.sy.point.Err(); err != nil {
					t.Fatal(err)
				}
			}
			loss()
			for i := range y {
				if math.Abs(float64(ys[i]-y[i])) > 1e-5*(1+math.Abs(float64(y[i]))) {
					t.Fatalf("output %d: synchronized %v, whole batch %v", i, ys[i], y[i])
				}
			}
			check := func(what string, i int, v *float32, analytic float64) {
				t.Helper()
				old := *v
				*v = old + eps
				up := loss()
				*v = old - eps
				down := loss()
				*v = old
				if num := (up - down) / (2 * eps); math.Abs(num-analytic) > tol*(1+math.Abs(num)) {
					t.Errorf("%s[%d]: synchronized backward %.6g, finite difference of the whole batch's loss %.6g", what, i, analytic, num)
				}
			}
			for i := range params {
				check("param grad", i, &params[i], float64(grads[0][i])+float64(grads[1][i]))
			}
			for i := range x {
				check("input grad", i, &x[i], float64(dxs[i]))
			}

			// The moving statistics: the whole batch's, on both replicas.
			loss()
			ref.commit([]buffered{ref})
			for _, l := range reps {
				l.commit([]buffered{l})
			}
			for i, v := range ref.mean {
				if d := math.Abs(float64(reps[0].mean[i] - v)); d > 1e-6 {
					t.Errorf("moving mean %d: synchronized %v, whole batch %v", i, reps[0].mean[i], v)
				}
				if d := math.Abs(float64(reps[0].vr[i] - ref.vr[i])); d > 1e-5 {
					t.Errorf("moving variance %d: synchronized %v, whole batch %v", i, reps[0].vr[i], ref.vr[i])
				}
			}
			if !slices.Equal(reps[0].mean, reps[1].mean) || !slices.Equal(reps[0].vr, reps[1].vr) {
				t.Errorf("the replicas' moving statistics differ: %v %v and %v %v", reps[0].mean, reps[0].vr, reps[1].mean, reps[1].vr)
			}
		})
	}
}

// syncModels are TestSyncBatchNormReplicasEqualWhole's models: a chain
// (Sequential) and a residual block (Graph), batch normalization inside.
var syncModels = []struct {
	name  string
	build func(t *testing.T, shards int) Model
}{
	{"sequential", func(t *testing.T, shards int) Model {
		m, err := NewSequential("chain", Shape{H: 6, W: 6, C: 2}, 3, shards,
			Conv2D{Filters: 4, Kernel: 3}, BatchNormalization{Momentum: 0.9}, Activation{Fn: "relu"}, Flatten{}, Dense{Units: 3})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}},
	{"graph", func(t *testing.T, shards int) Model {
		g, err := NewGraph("residual", Shape{H: 6, W: 6, C: 3}, 3, shards,
			Node{Conv2D{Filters: 3, Kernel: 3, Padding: Same}, []int{-1}},
			Node{BatchNormalization{Momentum: 0.8}, []int{0}},
			Node{Add{}, []int{1, -1}},
			Node{BatchNormalization{NoScale: true}, []int{2}},
			Node{Activation{Fn: "relu"}, []int{3}},
			Node{GlobalAveragePooling2D{}, []int{4}},
			Node{Dense{Units: 3}, []int{5}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}},
}

// TestSyncBatchNormReplicasEqualWhole is the equivalence that defines
// synchronized batch normalization: two replicas of two shards, each
// replica with half the batch, synchronized, end a step (the mean of
// their gradients, SGD) with the loss, parameters and moving statistics
// of one replica of one shard on the whole batch, to float rounding;
// unsynchronized (each shard normalises its own part) they do not. With
// GOMAXPROCS 1, so that shards on goroutines are what lets them meet.
func TestSyncBatchNormReplicasEqualWhole(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const (
		n  = 10 // each replica's 5 split 3 and 2 over its shards
		lr = 0.5
	)
	for _, tc := range syncModels {
		t.Run(tc.name, func(t *testing.T) {
			whole := tc.build(t, 1)
			dim := whole.InputDim()
			x, labels := testBatch(8, n, dim, 3)
			wantLoss, err := whole.ForwardBackward(x, labels, n)
			if err != nil {
				t.Fatal(err)
			}
			sgdStep(whole.Params(), whole.Grads(), lr)
			wantBufs := whole.(Stateful).Buffers()

			step := func(sync bool) (loss float64, params, bufs []float32) {
				reducers := statsync.InMemory(2, 10*time.Second)
				var reps [2]Model
				var losses [2]float64
				parts := [2][2]int{{0, 5}, {5, n}}
				for r := range reps {
					reps[r] = tc.build(t, 2)
					if sync {
						if err := reps[r].(BatchNormSyncer).SyncBatchNorm(reducers[r]); err != nil {
							t.Fatal(err)
						}
					}
				}
				errs := make([]error, 2)
				bothReplicas(func(r int) {
					lo, hi := parts[r][0], parts[r][1]
					losses[r], errs[r] = reps[r].ForwardBackward(x[lo*dim:hi*dim], labels[lo:hi], hi-lo)
				})
				for _, err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
				g := make([]float32, len(reps[0].Grads()))
				for i := range g { // the Mean combiner's
					g[i] = (reps[0].Grads()[i] + reps[1].Grads()[i]) * 0.5
				}
				for _, m := range reps {
					sgdStep(m.Params(), g, lr)
				}
				b0, b1 := reps[0].(Stateful).Buffers(), reps[1].(Stateful).Buffers()
				if sync && (!slices.Equal(reps[0].Params(), reps[1].Params()) || !slices.Equal(b0, b1)) {
					t.Errorf("synchronized: the replicas' parameters or buffers differ")
				}
				return (losses[0] + losses[1]) / 2, reps[0].Params(), b0
			}
			far := func(a, b []float32, tol float64) float64 {
				worst := 0.0
				for i := range a {
					worst = max(worst, math.Abs(float64(a[i]-b[i]))/(tol*(1+math.Abs(float64(b[i])))))
				}
				return worst
			}
			loss, params, bufs := step(true)
			if math.Abs(loss-wantLoss) > 1e-5 {
				t.Errorf("synchronized: loss %.8f, the whole batch's %.8f", loss, wantLoss)
			}
			if f := far(params, whole.Params(), 1e-5); f > 1 {
				t.Errorf("synchronized: parameters %v apart from the whole batch's %v (%.1f× the tolerance)", params, whole.Params(), f)
			}
			if f := far(bufs, wantBufs, 1e-5); f > 1 {
				t.Errorf("synchronized: moving statistics %v, the whole batch's %v", bufs, wantBufs)
			}
			loss, params, bufs = step(false)
			if math.Abs(loss-wantLoss) < 1e-4 || far(params, whole.Params(), 1e-4) < 1 {
				t.Errorf("unsynchronized: loss %.8f and parameters as the whole batch's (%.8f): the test cannot tell", loss, wantLoss)
			}
			_ = bufs
		})
	}
}

// sgdStep is a plain SGD step.
func sgdStep(params, grads []float32, lr float32) {
	for i, g := range grads {
		params[i] -= lr * g
	}
}

// TestSyncBatchNormRefused: a model with no batch normalization, or no
// reducer, is refused saying why; a failed reduction is ForwardBackward's
// error, naming the layer and the replicas waited for.
func TestSyncBatchNormRefused(t *testing.T) {
	m, err := NewSequential("plain", Shape{C: 4}, 1, 2, Dense{Units: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncBatchNorm(statsync.InMemory(1, time.Second)[0]); err == nil || !strings.Contains(err.Error(), "no BatchNormalization") {
		t.Errorf("a model without batch normalization: %v", err)
	}
	g := syncModels[1].build(t, 2)
	if err := g.(BatchNormSyncer).SyncBatchNorm(nil); err == nil {
		t.Error("no reducer: accepted")
	}
	// Replica 1 never comes.
	if err := g.(BatchNormSyncer).SyncBatchNorm(statsync.InMemory(2, 50*time.Millisecond)[0]); err != nil {
		t.Fatal(err)
	}
	x, labels := testBatch(3, 4, g.InputDim(), 3)
	before := slices.Clone(g.(Stateful).Buffers())
	_, err = g.ForwardBackward(x, labels, 4)
	if err == nil || !strings.Contains(err.Error(), "batch normalization 1") || !strings.Contains(err.Error(), "replicas [1]") {
		t.Errorf("a replica that never comes: %v", err)
	}
	if !slices.Equal(before, g.(Stateful).Buffers()) {
		t.Error("a failed pass moved the moving statistics")
	}
}

// TestSyncBatchNormIdle: a replica with no examples (ForwardBackward of
// 0) and shards with none (3 examples over 4 shards) still meet the
// others at every batch normalization, forward and backward, with a
// gradient notifier armed as the bucketed exchange arms it: the replica
// with the batch gets the gradient of one replica on it alone, the idle
// one a zero gradient, and both the moving statistics of the batch.
func TestSyncBatchNormIdle(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, tc := range syncModels {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3
			whole := tc.build(t, 1)
			x, labels := testBatch(9, n, whole.InputDim(), 3)
			wantLoss, err := whole.ForwardBackward(x, labels, n)
			if err != nil {
				t.Fatal(err)
			}
			reducers := statsync.InMemory(2, 10*time.Second)
			reps := [2]Model{tc.build(t, 2), tc.build(t, 4)}
			for r, m := range reps {
				if gn, ok := m.(GradNotifier); ok {
					gn.NotifyGrads(func(int) {})
				}
				if err := m.(BatchNormSyncer).SyncBatchNorm(reducers[r]); err != nil {
					t.Fatal(err)
				}
			}
			var losses [2]float64
			errs := make([]error, 2)
			bothReplicas(func(r int) {
				if r == 0 {
					losses[r], errs[r] = reps[r].ForwardBackward(nil, nil, 0)
					return
				}
				losses[r], errs[r] = reps[r].ForwardBackward(x, labels, n)
			})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if losses[0] != 0 || math.Abs(losses[1]-wantLoss) > 1e-6 {
				t.Errorf("losses %v, want 0 and the batch's %v", losses, wantLoss)
			}
			for i, g := range whole.Grads() {
				if reps[0].Grads()[i] != 0 || math.Abs(float64(reps[1].Grads()[i]-g)) > 1e-5*(1+math.Abs(float64(g))) {
					t.Fatalf("gradient %d: idle replica %v, the other %v; want 0 and %v", i, reps[0].Grads()[i], reps[1].Grads()[i], g)
				}
			}
			b0, b1, want := reps[0].(Stateful).Buffers(), reps[1].(Stateful).Buffers(), whole.(Stateful).Buffers()
			if !slices.Equal(b0, b1) {
				t.Errorf("moving statistics: idle replica %v, the other %v", b0, b1)
			}
			for i, v := range want {
				if math.Abs(float64(b1[i]-v)) > 1e-5 {
					t.Errorf("moving statistic %d: %v, the batch's %v", i, b1[i], v)
				}
			}
		})
	}
}
