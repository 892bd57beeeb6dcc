package mirrored

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/sparse"
)

// sparseSet draws n examples over dim features: the bias (feature 0) and k
// distinct others per example, value 1 or 0.5, labels -1/+1 from a logistic
// model with weights a function of the seed, so the set is learnable.
func sparseSet(t *testing.T, seed uint64, n, dim, k int) *data.SparseSet {
	t.Helper()
	truth := rand.New(rand.NewPCG(7, 7))
	w := make([]float64, dim)
	for i := range w {
		w[i] = 2 * truth.NormFloat64()
	}
	w[0] = -0.5
	rng := rand.New(rand.NewPCG(seed, 1))
	rowPtr := []int{0}
	var idx []int32
	var val, labels []float32
	for range n {
		row := map[int32]bool{0: true}
		for len(row) < k+1 {
			row[int32(1+rng.IntN(dim-1))] = true
		}
		start := len(idx)
		for i := range int32(dim) {
			if row[i] {
				idx = append(idx, i)
			}
		}
		m := 0.0
		for _, i := range idx[start:] {
			v := float32(1)
			if rng.IntN(4) == 0 {
				v = 0.5
			}
			val = append(val, v)
			m += w[i] * float64(v)
		}
		y := float32(-1)
		if rng.Float64() < 1/(1+math.Exp(-m)) {
			y = 1
		}
		labels = append(labels, y)
		rowPtr = append(rowPtr, len(idx))
	}
	s, err := data.NewSparseSet(rowPtr, idx, val, labels)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sparseTestJob(train, test data.Dataset, dim, batch, epochs int, optimizer string, exch sparse.Exchange) Job {
	return Job{
		Config: Config{Model: SparseModel, Epochs: epochs, BatchSize: batch, LR: 0.1, Seed: 3}, HashEvery: 7, NoShuffle: true,
		Sparse: &SparseConfig{Features: dim, Train: train, Test: test, Optimizer: optimizer, Exchange: exch, L1: 0.001, L2: 0.001},
	}
}

// cloneSparse returns j with its own copy of j.Sparse (a pointer), so that
// editing the copy's sparse settings leaves j's alone.
func cloneSparse(j Job) Job {
	if j.Sparse != nil {
		s := *j.Sparse
		j.Sparse = &s
	}
	return j
}

// runSparse runs one job per replica over an in-memory network and
// returns each replica's summary, final weights and error.
func runSparse(t *testing.T, jobs []Job) ([]*Summary, [][]float32, []error) {
	t.Helper()
	return runSparseOn(t, jobs, nil, nil)
}

// runSparseOn is runSparse with hooks: wire, if set, sees the network and
// the jobs (copies, each with its own SparseConfig) before the runs start,
// to wire fault hooks; wrap, if set, wraps each replica's Group.
func runSparseOn(t *testing.T, jobs []Job, wire func(net *collective.MemNetwork, jobs []Job), wrap func(r int, g Group) Group) ([]*Summary, [][]float32, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := len(jobs)
	net := collective.NewMemNetwork(n)
	sums, weights, errs := make([]*Summary, n), make([][]float32, n), make([]error, n)
	jobs = slices.Clone(jobs)
	for r := range jobs {
		jobs[r] = cloneSparse(jobs[r])
		jobs[r].Sparse.OnWeights = func(w []float32) { weights[r] = append([]float32(nil), w...) }
	}
	if wire != nil {
		wire(net, jobs)
	}
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(collective.CountTraffic(net.Transport(r)), collective.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var g Group = NewGroup(c)
		if wrap != nil {
			g = wrap(r, g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = Run(ctx, jobs[r], g)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("%d sparse replicas did not finish within a minute: %v", n, errors.Join(errs...))
	}
	return sums, weights, errs
}

func sameSparse(n int, j Job) []Job {
	out := make([]Job, n)
	for i := range out {
		out[i] = cloneSparse(j)
	}
	return out
}

// TestSparseReplicasMatchOneBigBatch: N replicas exchanging sparse (or
// dense) gradients agree bit for bit, and end with the weights of one
// replica trained on the union batch (to rounding: the per-replica sums are
// rounded to float32 before the merge, the single replica's are not).
func TestSparseReplicasMatchOneBigBatch(t *testing.T) {
	const dim, batch, n = 300, 8, 3
	train := sparseSet(t, 1, 600, dim, 6)
	for _, tc := range []struct {
		optimizer string
		exchange  sparse.Exchange
		gather    string
	}{
		{"adagrad", sparse.ExchangeSparse, GatherDirect},
		{"ftrl", sparse.ExchangeSparse, GatherRing},
		{"sgd", sparse.ExchangeDense, ""},
		{"adagrad", sparse.ExchangeAuto, ""},
	} {
		t.Run(tc.optimizer+"/"+tc.exchange.String()+"/"+tc.gather, func(t *testing.T) {
			one := sparseTestJob(train, nil, dim, n*batch, 2, tc.optimizer, sparse.ExchangeSparse)
			_, refs, errs := runSparse(t, []Job{one})
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			job := sparseTestJob(train, nil, dim, batch, 2, tc.optimizer, tc.exchange)
			job.Sparse.Gather = tc.gather
			sums, ws, errs := runSparse(t, sameSparse(n, job))
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r := 1; r < n; r++ {
				if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
					t.Fatalf("rank %d ends with weights %s, rank 0 with %s", r, sums[r].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
				}
			}
			if sums[0].Run.Steps != 2*600/(n*batch) {
				t.Fatalf("ran %d steps, want %d", sums[0].Run.Steps, 2*600/(n*batch))
			}
			ref := refs[0]
			var nonzero int
			for i := range ref {
				if ref[i] != 0 {
					nonzero++
				}
				if d := math.Abs(float64(ws[0][i] - ref[i])); d > 1e-4*(1+math.Abs(float64(ref[i]))) {
					t.Fatalf("weight %d: %d replicas %v, one replica on the union batch %v", i, n, ws[0][i], ref[i])
				}
			}
			if nonzero < dim/2 {
				t.Fatalf("only %d of %d weights moved: the comparison proves little", nonzero, dim)
			}
		})
	}
}

// TestSparseReplicasLearn: accuracy above the majority class, identical
// metrics on every replica.
func TestSparseReplicasLearn(t *testing.T) {
	const dim = 200
	train, test := sparseSet(t, 1, 4000, dim, 5), sparseSet(t, 2, 1000, dim, 5)
	job := sparseTestJob(train, test, dim, 20, 3, "adagrad", sparse.ExchangeAuto)
	job.NoShuffle = false
	sums, weights, errs := runSparse(t, sameSparse(2, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var pos int
	for i := range test.Len() {
		var b data.Batch
		test.Append(&b, i)
		if b.Labels[0] > 0 {
			pos++
		}
	}
	majority := math.Max(float64(pos), float64(test.Len()-pos)) / float64(test.Len())
	acc := sums[0].Run.FinalAccuracy
	if acc < majority+0.05 {
		t.Fatalf("test accuracy %.3f, majority class %.3f: not learning", acc, majority)
	}
	if sums[1].Run.FinalAccuracy != acc || sums[0].Run.TestExamples != test.Len() {
		t.Fatalf("replicas report accuracy %v and %v on %d examples, want equal on %d", acc, sums[1].Run.FinalAccuracy, sums[0].Run.TestExamples, test.Len())
	}
	ep := sums[0].Run.EpochResults
	if len(ep) != 3 || !(ep[2].TestLoss < ep[0].TestLoss+0.01) || ep[2].TestLoss > 0.69 {
		t.Fatalf("epochs %+v: want 3 with a falling test log-loss below ln 2", ep)
	}
	// The per-epoch AUC is the exact AUC of the final model's margins.
	var ev sparse.Evaluator
	w := weights[0]
	for i := range test.Len() {
		var b data.Batch
		test.Append(&b, i)
		row := sparse.Vector{Indices: b.Indices, Values: b.Values}
		if err := ev.Add(row.Dot(w), b.Labels[0]); err != nil {
			t.Fatal(err)
		}
	}
	if want := ev.Metrics().AUC; ep[2].TestAUC != want || !(want > 0.5) || sums[1].Run.EpochResults[2].TestAUC != want {
		t.Fatalf("epoch 3 test AUC %v on rank 0, %v on rank 1; want %v (> 0.5) on both", ep[2].TestAUC, sums[1].Run.EpochResults[2].TestAUC, want)
	}
}

func TestSparseJobBadInput(t *testing.T) {
	train := sparseSet(t, 1, 100, 50, 3)
	for _, tc := range []struct {
		name string
		edit func(*Job)
		want string
	}{
		{"features", func(j *Job) { j.Sparse.Features = 0 }, "--features 0"},
		{"no data", func(j *Job) { j.Sparse.Train = nil }, "--train-files"},
		{"optimizer", func(j *Job) { j.Sparse.Optimizer = "adam" }, `unknown optimizer "adam"`},
		{"lr", func(j *Job) { j.Config.LR = 0 }, "learning rate"},
		{"model", func(j *Job) { j.Config.Model = "lenet" }, `model "lenet"`},
		{"checkpoint", func(j *Job) { j.CheckpointEvery = -1 }, "checkpoint every -1"},
		{"gather", func(j *Job) { j.Sparse.Gather = "tree" }, `sparse gather "tree"`},
		{"format", func(j *Job) { j.Sparse.Format = "csv" }, `input format "csv"`},
		{"batch too big", func(j *Job) { j.Config.BatchSize = 101 }, "less than one batch"},
		{"index out of range", func(j *Job) { j.Sparse.Features = 10 }, "outside [0, 10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := sparseTestJob(train, nil, 50, 10, 1, "sgd", sparse.ExchangeSparse)
			tc.edit(&job)
			_, _, errs := runSparse(t, []Job{job})
			if errs[0] == nil || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", errs[0], tc.want)
			}
		})
	}
}

func TestSparseSettingsMismatch(t *testing.T) {
	train := sparseSet(t, 1, 100, 50, 3)
	a := sparseTestJob(train, nil, 50, 10, 1, "adagrad", sparse.ExchangeSparse)
	b := cloneSparse(a)
	b.Sparse.Exchange = sparse.ExchangeDense
	b.Config.LR = 0.2
	_, _, errs := runSparse(t, []Job{a, b})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "exchange is sparse on rank 0 but dense on rank 1") || !strings.Contains(err.Error(), "lr is 0.1 on rank 0 but 0.2 on rank 1") {
			t.Fatalf("rank %d: error %v, want both differences named", r, err)
		}
	}
}

// TestSparsePeerFailure: a replica that dies mid-run makes the others fail
// promptly, naming it, instead of waiting out the timeout.
func TestSparsePeerFailure(t *testing.T) {
	const n = 3
	train := sparseSet(t, 1, 3000, 100, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	net := collective.NewMemNetwork(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		job := sparseTestJob(train, nil, 100, 5, 5, "sgd", sparse.ExchangeSparse)
		job.HashEvery = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx := ctx
			if r == 2 {
				// Rank 2 crashes as soon as it is past the handshake.
				var stop context.CancelFunc
				rctx, stop = context.WithCancel(ctx)
				job.Observers = []Observer{ObserverFunc(func(e Event) error {
					if e.Kind == "start" {
						net.Kill(2)
						stop()
					}
					return nil
				})}
			}
			_, errs[r] = Run(rctx, job, NewGroup(c))
		}()
	}
	wg.Wait()
	if time.Since(start) > 15*time.Second {
		t.Fatalf("the survivors took %v to notice", time.Since(start))
	}
	for r := range 2 {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "rank 2") {
			t.Fatalf("rank %d: error %v, want one naming rank 2", r, errs[r])
		}
	}
}

// TestSparseAutoExchange: with few features the dense all-reduce is
// cheaper than the pairs, so auto switches to it after the first (sparse)
// step, logs the change, and the replicas still agree bit for bit.
func TestSparseAutoExchange(t *testing.T) {
	const dim = 40
	train := sparseSet(t, 1, 480, dim, 6)
	core, logs := observer.New(zap.InfoLevel)
	job := sparseTestJob(train, nil, dim, 8, 1, "adagrad", sparse.ExchangeAuto)
	job.Config.Logger = zap.New(core)
	sums, _, errs := runSparse(t, sameSparse(3, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if sums[1].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 || sums[2].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
		t.Fatal("replicas diverged")
	}
	changes := logs.FilterMessage("exchange mode changed").All()
	if len(changes) != 3 { // once per replica
		t.Fatalf("%d mode changes logged, want 3 (sparse -> dense on each replica)", len(changes))
	}
	if to := changes[0].ContextMap()["to"]; to != "dense" {
		t.Fatalf("changed to %v, want dense", to)
	}
}

// gatherStub is a Group whose AllGather returns fixed parts (rank 0's own
// frame is kept), to feed the exchange what a faulty peer might send.
type gatherStub struct {
	LocalGroup
	size  int
	other []byte
}

func (g gatherStub) Size() int { return g.size }
func (g gatherStub) AllGather(_ context.Context, local []byte) ([][]byte, error) {
	return [][]byte{local, g.other}, nil
}

func (g gatherStub) gatherRing(ctx context.Context, local []byte) ([][]byte, error) {
	return g.AllGather(ctx, local)
}

// TestSparseExchangeRejectsBadParts: a malformed gradient from a peer is
// an error naming that peer, never a silent merge.
func TestSparseExchangeRejectsBadParts(t *testing.T) {
	const dim = 100
	good := func(examples uint64, v sparse.Vector) []byte {
		return sparse.AppendVector(binary.AppendUvarint(nil, examples), v)
	}
	nan := good(3, sparse.Vector{Indices: []int32{4}, Values: []float32{1}})
	binary.LittleEndian.PutUint32(nan[len(nan)-4:], math.Float32bits(float32(math.NaN())))
	for _, tc := range []struct {
		name  string
		other []byte
		want  string
	}{
		{"empty frame", nil, "bad example count"},
		{"index out of range", good(2, sparse.Vector{Indices: []int32{3, 200}, Values: []float32{1, 2}}), "leaves [0, 100)"},
		{"NaN value", nan, "not finite"},
		{"trailing bytes", append(good(1, sparse.Vector{Indices: []int32{1}, Values: []float32{1}}), 0), "trailing bytes"},
		{"truncated", good(1, sparse.Vector{Indices: []int32{1}, Values: []float32{1}})[:4], "only 2 bytes follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := newExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			var merged sparse.Vector
			local := sparse.Vector{Indices: []int32{1, 2}, Values: []float32{0.5, -1}}
			_, _, err = x.exchange(context.Background(), gatherStub{size: 2, other: tc.other}, 1, local, 4, &merged)
			if err == nil || !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming rank 1 and %q", err, tc.want)
			}
		})
	}
	// And a good part merges: (0.5 + 0) / 7 at 1, (-1 + 3) / 7 at 2, 1/7 at 9.
	x, err := newExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	stub := gatherStub{size: 2, other: good(3, sparse.Vector{Indices: []int32{2, 9}, Values: []float32{3, 1}})}
	var merged sparse.Vector
	n, mode, err := x.exchange(context.Background(), stub, 1, sparse.Vector{Indices: []int32{1, 2}, Values: []float32{0.5, -1}}, 4, &merged)
	if err != nil || n != 7 || mode != sparse.ExchangeSparse {
		t.Fatalf("exchange: %d examples, mode %v, %v", n, mode, err)
	}
	want := sparse.Vector{Indices: []int32{1, 2, 9}, Values: []float32{float32(0.5 / 7.0), float32(2 / 7.0), float32(1 / 7.0)}}
	if !slices.Equal(merged.Indices, want.Indices) || !slices.Equal(merged.Values, want.Values) {
		t.Fatalf("merged %+v, want %+v", merged, want)
	}
}

// reduceStub is a two-replica Group whose all-reduce adds the other
// replica's dense gradient sum (other, example count 3) to the buffer; with
// fail set it fails half-way, as a broken link would, leaving garbage in
// the buffer.
type reduceStub struct {
	gatherStub
	other sparse.Vector
	fail  bool
}

func (g *reduceStub) AllReduceSum(_ context.Context, buf []float32) error {
	if g.fail {
		for i := range buf[:len(buf)/2] {
			buf[i] = 42
		}
		return errors.New("link cut")
	}
	dim := len(buf) - 2
	g.other.AddScaledTo(buf[:dim], 1)
	buf[dim] += 3
	buf[dim+1] += float32(g.other.Len())
	return nil
}

// TestDenseExchangeReusesBuffer: the dense exchange's buffer is never
// cleared whole after a good step (DrainDense zeroes what it found), so
// each step's merged gradient must hold only that step's features; after a
// step that failed half-way, the next one clears it whole and is exact.
func TestDenseExchangeReusesBuffer(t *testing.T) {
	const dim = 100
	g := &reduceStub{gatherStub: gatherStub{size: 2}}
	x, err := newExchanger(0, 2, sparse.ExchangeDense, "", dim, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(x.dense) != dim+2 {
		t.Fatalf("dense buffer of %d floats at start-up, want %d (its page faults belong there)", len(x.dense), dim+2)
	}
	steps := []struct {
		local, other sparse.Vector
		fail         bool
		want         sparse.Vector // the mean over 4 + 3 examples
	}{
		{sparse.Vector{Indices: []int32{1, 50}, Values: []float32{0.5, 7}}, sparse.Vector{Indices: []int32{50, 99}, Values: []float32{-7, 1}}, false,
			sparse.Vector{Indices: []int32{1, 99}, Values: []float32{float32(0.5 / 7.0), float32(1 / 7.0)}}},
		{sparse.Vector{Indices: []int32{2}, Values: []float32{1}}, sparse.Vector{Indices: []int32{3}, Values: []float32{2}}, false,
			sparse.Vector{Indices: []int32{2, 3}, Values: []float32{float32(1 / 7.0), float32(2 / 7.0)}}},
		{sparse.Vector{Indices: []int32{4}, Values: []float32{1}}, sparse.Vector{}, true, sparse.Vector{}},
		{sparse.Vector{Indices: []int32{60}, Values: []float32{-1}}, sparse.Vector{Indices: []int32{5}, Values: []float32{7}}, false,
			sparse.Vector{Indices: []int32{5, 60}, Values: []float32{1, float32(-1 / 7.0)}}},
	}
	for i, st := range steps {
		g.other, g.fail = st.other, st.fail
		var merged sparse.Vector
		n, _, err := x.exchange(context.Background(), g, i+1, st.local, 4, &merged)
		if st.fail {
			if err == nil || !strings.Contains(err.Error(), "dense all-reduce") {
				t.Fatalf("step %d: %v, want the all-reduce's error", i+1, err)
			}
			continue
		}
		if err != nil || n != 7 {
			t.Fatalf("step %d: %d examples, %v", i+1, n, err)
		}
		if !slices.Equal(merged.Indices, st.want.Indices) || !slices.Equal(merged.Values, st.want.Values) {
			t.Fatalf("step %d: merged %+v, want %+v", i+1, merged, st.want)
		}
	}
}

// TestSparseExchangeAlone: one replica's shortcut gives exactly what
// MergeGradients of its one part gives.
func TestSparseExchangeAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var local sparse.Vector
	for i := int32(0); i < 1000; i += 1 + int32(rng.IntN(5)) {
		local.Indices = append(local.Indices, i)
		local.Values = append(local.Values, float32(rng.NormFloat64()))
	}
	x, err := newExchanger(0, 1, sparse.ExchangeAuto, "", 1000, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var got, want sparse.Vector
	n, mode, err := x.exchange(context.Background(), LocalGroup{}, 1, local, 7, &got)
	if err != nil || n != 7 || mode != sparse.ExchangeSparse {
		t.Fatalf("%d examples, mode %v, %v", n, mode, err)
	}
	var c sparse.Coalescer
	if err := c.MergeGradients(&want, []sparse.Vector{local}, 1000, 7); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Indices, want.Indices) || !slices.Equal(got.Values, want.Values) {
		t.Fatal("one replica's merged gradient differs from MergeGradients'")
	}
}

// TestSparseExchangeChecksGroup: the exchanger is built for one rank of
// a world and combines over the Group each step is given; a Group of
// another size or rank is an error naming both, not a wrong merge.
func TestSparseExchangeChecksGroup(t *testing.T) {
	x, err := newExchanger(0, 2, sparse.ExchangeSparse, GatherDirect, 10, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var merged sparse.Vector
	local := sparse.Vector{Indices: []int32{1}, Values: []float32{1}}
	_, _, err = x.exchange(context.Background(), LocalGroup{}, 1, local, 1, &merged)
	if err == nil || !strings.Contains(err.Error(), "exchange over rank 0 of 1, but the replica was built as rank 0 of 2") {
		t.Fatalf("exchange over a one-replica group: %v", err)
	}
	// The right group still works afterwards.
	n, _, err := x.exchange(context.Background(), gatherStub{size: 2, other: sparse.AppendVector(binary.AppendUvarint(nil, 0), sparse.Vector{})}, 2, local, 1, &merged)
	if err != nil || n != 1 || !slices.Equal(merged.Indices, []int32{1}) {
		t.Fatalf("exchange over its group: %d examples, %+v, %v", n, merged, err)
	}
}

// TestSparseResume: a run stopped part-way and resumed from its last
// checkpoint ends with the same weights, bit for bit, as the uninterrupted
// run (SGD with lazy L2 exercises the regularisation settled at
// checkpoints; AdaGrad the optimizer state in the checkpoint).
func TestSparseResume(t *testing.T) {
	const dim = 300
	train := sparseSet(t, 1, 900, dim, 6)
	for _, optimizer := range []string{"sgd", "adagrad", "ftrl"} {
		t.Run(optimizer, func(t *testing.T) {
			job := sparseTestJob(train, nil, dim, 10, 3, optimizer, sparse.ExchangeSparse)
			job.NoShuffle = false
			job.CheckpointEvery = 7
			job.Sparse.L2 = 0.01
			whole := job
			whole.CheckpointDir = t.TempDir()
			ref, _, errs := runSparse(t, sameSparse(2, whole))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}

			dir := t.TempDir()
			cut := cloneSparse(job)
			cut.CheckpointDir = dir
			cut.Sparse.MaxSteps = 100 // epoch 3 of 45 steps each: last checkpoint at step 98
			first, _, errs := runSparse(t, sameSparse(2, cut))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if first[0].Run.Steps != 100 || first[0].Run.ParamsSHA256 == ref[0].Run.ParamsSHA256 {
				t.Fatalf("the cut run took %d steps and ended like the whole run: the test proves nothing", first[0].Run.Steps)
			}
			rest := job
			rest.CheckpointDir = dir
			sums, _, errs := runSparse(t, sameSparse(2, rest))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for r, s := range sums {
				if s.Peer.ResumedStep != 98 || s.Run.Steps != 135 || len(s.Run.EpochResults) != 3 {
					t.Errorf("rank %d resumed at step %d, ran to %d with %d epochs; want 98, 135, 3", r, s.Peer.ResumedStep, s.Run.Steps, len(s.Run.EpochResults))
				}
				if s.Run.ParamsSHA256 != ref[0].Run.ParamsSHA256 {
					t.Errorf("rank %d: resumed run ends with %.12s…, the uninterrupted one with %.12s…", r, s.Run.ParamsSHA256, ref[0].Run.ParamsSHA256)
				}
			}
			// Other settings cannot resume from these checkpoints.
			other := rest
			other.Config.LR = 0.3
			_, _, errs = runSparse(t, sameSparse(2, other))
			if errs[0] == nil || !strings.Contains(errs[0].Error(), "lr is") || errs[1] == nil || !strings.Contains(errs[1].Error(), "chief") {
				t.Fatalf("resuming with another learning rate: %v / %v", errs[0], errs[1])
			}
		})
	}
}

// FuzzSparseExchangeFrame: whatever bytes a peer sends as its gradient
// frame, the exchange either fails naming the peer or merges a valid
// gradient (indices in range, strictly increasing, finite values); it
// never panics.
func FuzzSparseExchangeFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(sparse.AppendVector(binary.AppendUvarint(nil, 3), sparse.Vector{Indices: []int32{2, 9}, Values: []float32{3, 1}}))
	f.Add(sparse.AppendVector(binary.AppendUvarint(nil, 0), sparse.Vector{}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		const dim = 64
		x, err := newExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		var merged sparse.Vector
		local := sparse.Vector{Indices: []int32{1, 63}, Values: []float32{0.5, -1}}
		n, _, err := x.exchange(context.Background(), gatherStub{size: 2, other: frame}, 1, local, 2, &merged)
		if err != nil {
			if !strings.Contains(err.Error(), "rank 1") {
				t.Fatalf("error %v does not name the peer", err)
			}
			return
		}
		if n < 2 {
			t.Fatalf("%d examples merged, at least our own 2 expected", n)
		}
		if err := merged.Validate(dim); err != nil {
			t.Fatalf("merged an invalid gradient: %v", err)
		}
	})
}

// TestSparseGzipInputRefused: a gzip-compressed training file is named as
// such, not read as records that fail a CRC.
func TestSparseGzipInputRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.libsvm.gz")
	if err := os.WriteFile(path, []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckInputFile(path); err == nil || !strings.Contains(err.Error(), "gzip-compressed") {
		t.Fatalf("a gzip file: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "a.libsvm")
	if err := os.WriteFile(plain, []byte("1 3:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckInputFile(plain); err != nil {
		t.Fatalf("a plain file: %v", err)
	}
}
