package mirrored

import (
	"context"
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

// TestSparseGzipInputRefused: a gzip-compressed training file is named as
// such, not read as records that fail a CRC.
func TestSparseGzipInputRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.libsvm.gz")
	if err := os.WriteFile(path, []byte{0x1f, 0x8b, 8, 0, 0, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := data.CheckSparseFile(path); err == nil || !strings.Contains(err.Error(), "gzip-compressed") {
		t.Fatalf("a gzip file: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "a.libsvm")
	if err := os.WriteFile(plain, []byte("1 3:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := data.CheckSparseFile(plain); err != nil {
		t.Fatalf("a plain file: %v", err)
	}
}
