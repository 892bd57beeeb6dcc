package tests

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// Each verdict on a run built to have that bottleneck.

// runInMemory runs jobs[r] as rank r of an in-memory group.
func runInMemory(t *testing.T, jobs []mirrored.Job) []*mirrored.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	net := collective.NewMemNetwork(len(jobs))
	sums, errs := make([]*mirrored.Summary, len(jobs)), make([]error, len(jobs))
	var wg sync.WaitGroup
	for r := range jobs {
		c, err := collective.New(collective.CountTraffic(net.Transport(r)), collective.Options{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = mirrored.Run(ctx, jobs[r], mirrored.NewGroup(c))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return sums
}

func verdictOf(t *testing.T, sums []*mirrored.Summary, perHost int) report.Verdict {
	t.Helper()
	run := report.Figures{Cores: runtime.NumCPU(), PeersPerHost: perHost}
	for _, s := range sums {
		run.Peers = append(run.Peers, &s.Peer)
	}
	v, ok := report.VerdictOf(run)
	if !ok {
		t.Fatal("no verdict")
	}
	t.Log(v)
	return v
}

// TestVerdictOneWorkerComputes: LeNet-5 alone on its cores is compute.
func TestVerdictOneWorkerComputes(t *testing.T) {
	cfg := quickMNIST(t, nn.LeNet5)
	cfg.TrainExamples, cfg.TestExamples = 1600, 200
	sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	// Beside other tests' processes the machine's load is named instead,
	// when the peer's own figures show it (go test runs packages at once).
	want := report.Compute
	if share, _ := (report.Figures{Peers: []*mirrored.PeerStats{&sum.Peer}, Cores: runtime.NumCPU()}).OthersLoad(); share >= report.Rules.OthersShare {
		want = report.Others
	}
	if v := verdictOf(t, []*mirrored.Summary{sum}, 1); v.Resource != want {
		t.Fatalf("one LeNet worker: %s, want %s", v, want)
	}
}

// TestVerdictSlowPeerNamed: with rank 2 of 3 taking 4× as long to
// compute, the verdict is a straggler and names rank 2.
func TestVerdictSlowPeerNamed(t *testing.T) {
	cfg := quickMNIST(t, nn.Softmax)
	cfg.TrainExamples, cfg.TestExamples, cfg.Logger = 1920, 200, nil
	job := mirrored.Job{Config: cfg, MeasureWait: true, Faults: mirrored.Faults{SlowRank: 2, SlowFactor: 4}}
	v := verdictOf(t, runInMemory(t, []mirrored.Job{job, job, job}), 1)
	if v.Resource != report.Straggler || v.Rank != 2 || !strings.Contains(v.String(), "rank 2") {
		t.Fatalf("rank 2 slowed 4×: %s, want a straggler naming rank 2", v)
	}
}

// slowSource is a sparse data set whose every example takes a while to
// read, like a slow disk or a pipe from a slow producer.
type slowSource struct {
	data.Dataset
	delay time.Duration
}

func (s slowSource) Append(b *data.Batch, i int) {
	time.Sleep(s.delay)
	s.Dataset.Append(b, i)
}

// TestVerdictSlowInput: sparse logistic regression fed by a slow reader
// waits for its batches.
func TestVerdictSlowInput(t *testing.T) {
	const dim, n = 1000, 800
	rng := rand.New(rand.NewPCG(5, 6))
	rowPtr := []int{0}
	var idx []int32
	var val, labels []float32
	for range n {
		for k := range 10 {
			idx = append(idx, int32(k*100+rng.IntN(100)))
			val = append(val, 1)
		}
		rowPtr = append(rowPtr, len(idx))
		labels = append(labels, float32(rng.IntN(2)))
	}
	ds, err := data.NewSparseSet(rowPtr, idx, val, labels)
	if err != nil {
		t.Fatal(err)
	}
	job := mirrored.Job{
		Config: mirrored.Config{Model: mirrored.SparseModel, Epochs: 1, BatchSize: 20, LR: 0.1, Seed: 1},
		Sparse: &mirrored.SparseConfig{Features: dim, Train: slowSource{ds, 200 * time.Microsecond}, Optimizer: "adagrad", Exchange: sparse.ExchangeSparse},
	}
	v := verdictOf(t, runInMemory(t, []mirrored.Job{job, job}), 1)
	if v.Resource != report.Input {
		t.Fatalf("a slow reader: %s, want %s", v, report.Input)
	}
}
