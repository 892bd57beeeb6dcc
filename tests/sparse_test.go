package tests

import (
	"bufio"
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/sparse"
)

// Sparse logistic regression on real libp2p peers (TLS, 127.0.0.1), each
// replica in this process with its own host, reading its FILE shard of
// test-written libsvm and TFRecord files.

const sparseDim = 2000

// writeSparseFiles writes files of n examples each over sparseDim features
// (the bias and 12 others, one-hot, Zipf-ish so that some features are
// frequent), labels from a fixed logistic model, in the given format
// ("libsvm" or "tfrecord"), and returns their paths and the share of
// positives.
func writeSparseFiles(t *testing.T, dir, prefix, format string, files, n int, seed uint64) ([]string, float64) {
	t.Helper()
	truth := mrand.New(mrand.NewPCG(11, 11))
	w := make([]float64, sparseDim)
	for i := range w {
		w[i] = 1.5 * truth.NormFloat64()
	}
	w[0] = -1
	var paths []string
	pos := 0
	for f := range files {
		rng := mrand.New(mrand.NewPCG(seed, uint64(f)))
		zipf := mrand.NewZipf(rng, 1.2, 1, sparseDim-2)
		path := filepath.Join(dir, fmt.Sprintf("%s-%02d.%s", prefix, f, format))
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		bw := bufio.NewWriter(fh)
		var write func(data.Example) error
		if format == "libsvm" {
			write = data.NewLibSVMWriter(bw, false).Write
		} else {
			write = data.NewTFExampleWriter(bw).Write
		}
		for range n {
			seen := map[int32]bool{0: true}
			for len(seen) < 13 {
				seen[int32(1+zipf.Uint64())] = true
			}
			ex := data.Example{}
			m := 0.0
			for i := range int32(sparseDim) {
				if seen[i] {
					ex.Indices = append(ex.Indices, i)
					ex.Values = append(ex.Values, 1)
					m += w[i]
				}
			}
			ex.Label = -1
			if rng.Float64() < 1/(1+math.Exp(-m)) {
				ex.Label = 1
				pos++
			}
			if err := write(ex); err != nil {
				t.Fatal(err)
			}
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths, float64(pos) / float64(files*n)
}

type sparseOutcome struct {
	sum *mirrored.Summary
	err error
}

// runSparsePeers runs job on n libp2p peers on 127.0.0.1.
func runSparsePeers(t *testing.T, ctx context.Context, n int, job mirrored.Job) []sparseOutcome {
	t.Helper()
	out := make([]sparseOutcome, n)
	errs := onPeers(t, ctx, n, "sparse", true, func(r int, log *zap.Logger, m *collective.Member, _ *p2p.Transport) error {
		j := job
		j.Logger = log
		sum, err := mirrored.Run(ctx, j, mirrored.NewGroup(m.Comm))
		out[r].sum = sum
		return err
	})
	for r, err := range errs {
		out[r].err = err
	}
	return out
}

// TestSparseLRPeers: 2 and 3 peers train on libsvm shards (FILE sharding:
// 3 files), evaluate on a TFRecord test file, and end with bitwise-identical
// weights and an accuracy clearly above the majority-class baseline.
func TestSparseLRPeers(t *testing.T) {
	dir := t.TempDir()
	train, _ := writeSparseFiles(t, dir, "train", "libsvm", 3, 2000, 1)
	test, testPos := writeSparseFiles(t, dir, "test", "tfrecord", 1, 2000, 2)
	majority := math.Max(testPos, 1-testPos)
	for _, tc := range []struct {
		n         int
		optimizer string
		exchange  sparse.Exchange
	}{
		{2, "adagrad", sparse.ExchangeSparse},
		{3, "ftrl", sparse.ExchangeAuto},
	} {
		t.Run(fmt.Sprintf("n=%d/%s/%s", tc.n, tc.optimizer, tc.exchange), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			job := mirrored.Job{
				Config: mirrored.Config{Model: mirrored.SparseModel, Epochs: 3, BatchSize: 50, LR: 0.1, Seed: 5}, HashEvery: 10, MeasureWait: true,
				Sparse: &mirrored.SparseConfig{Features: sparseDim, TrainFiles: train, TestFiles: test, Optimizer: tc.optimizer,
					Exchange: tc.exchange, L1: 0.01},
			}
			out := runSparsePeers(t, ctx, tc.n, job)
			for r, o := range out {
				if o.err != nil {
					t.Fatalf("rank %d: %v", r, o.err)
				}
			}
			run := out[0].sum.Run
			for r, o := range out {
				p := o.sum.Peer
				if p.ParamsSHA256 != run.ParamsSHA256 || o.sum.Run.FinalAccuracy != run.FinalAccuracy {
					t.Errorf("rank %d ends with weights %.12s… and accuracy %v, rank 0 with %.12s… and %v", r, p.ParamsSHA256, o.sum.Run.FinalAccuracy, run.ParamsSHA256, run.FinalAccuracy)
				}
				// Every step sends at least the example count and pair
				// count to every other peer; far less than the dense 4·D.
				if p.Steps != run.Steps || p.BytesSent < int64(p.Steps*(tc.n-1)*2) || p.BytesSent > int64(p.Steps)*4*sparseDim {
					t.Errorf("rank %d: %d steps (run %d), sent %d bytes", r, p.Steps, run.Steps, p.BytesSent)
				}
			}
			// FILE sharding over 3 files: each peer's shard is whole
			// files, so the steps per epoch follow the smallest shard.
			minShard := 2000 * (3 / tc.n)
			if run.StepsPerEpoch != minShard/50 || run.TrainExamples != 6000 || run.TestExamples != 2000 {
				t.Errorf("%d steps per epoch, %d train and %d test examples; want %d, 6000, 2000", run.StepsPerEpoch, run.TrainExamples, run.TestExamples, minShard/50)
			}
			t.Logf("%d steps, test accuracy %.4f (majority class %.4f), test log-loss %.4f", run.Steps, run.FinalAccuracy, majority, lastEpoch(run).TestLoss)
			if run.FinalAccuracy < majority+0.04 {
				t.Errorf("test accuracy %.4f, majority class %.4f: the peers did not learn", run.FinalAccuracy, majority)
			}
			ep := run.EpochResults
			if len(ep) != 3 || ep[2].TestLoss > ep[0].TestLoss+0.01 {
				t.Errorf("per-epoch results %+v: want 3 epochs, test log-loss not rising", ep)
			}
		})
	}
}

// TestSparseLRPeersBadFile: a corrupt record in one peer's shard stops
// every peer, and the error names the file and record.
func TestSparseLRPeersBadFile(t *testing.T) {
	dir := t.TempDir()
	train, _ := writeSparseFiles(t, dir, "train", "libsvm", 2, 500, 1)
	b, err := os.ReadFile(train[1])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines[7] = "+1 5:1 3:nan\n"
	if err := os.WriteFile(train[1], []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job := mirrored.Job{
		Config: mirrored.Config{Model: mirrored.SparseModel, Epochs: 1, BatchSize: 50, LR: 0.1, Seed: 5},
		Sparse: &mirrored.SparseConfig{Features: sparseDim, TrainFiles: train, Optimizer: "adagrad", Exchange: sparse.ExchangeSparse},
	}
	out := runSparsePeers(t, ctx, 2, job)
	if out[1].err == nil || !strings.Contains(out[1].err.Error(), filepath.Base(train[1])) {
		t.Fatalf("rank 1 (reading the corrupt file): error %v, want one naming %s", out[1].err, train[1])
	}
	if out[0].err == nil {
		t.Fatal("rank 0 finished although its peer failed")
	}
}

func lastEpoch(r *mirrored.Result) mirrored.Epoch {
	if len(r.EpochResults) == 0 {
		return mirrored.Epoch{}
	}
	return r.EpochResults[len(r.EpochResults)-1]
}

// TestLaunchSparseLR: the CLI path, `meshtrain launch --model sparse-lr`
// over generated files: two worker processes, identical weights, accuracy
// above the majority class, and far fewer bytes than dense exchange.
func TestLaunchSparseLR(t *testing.T) {
	dir := t.TempDir()
	train, _ := writeSparseFiles(t, dir, "train", "tfrecord", 2, 2000, 3)
	test, testPos := writeSparseFiles(t, dir, "test", "libsvm", 1, 1000, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sum := filepath.Join(dir, "summary.json")
	r := meshtrain(ctx, nil, "launch", "-n", "2", "--model", "sparse-lr", "--features", fmt.Sprint(sparseDim),
		"--train-files", strings.Join(train, ","), "--test-files", test[0], "--epochs", "2", "--batch", "40",
		"--lr", "0.1", "--sparse-optimizer", "adagrad", "--exchange", "auto", "--summary", sum)
	if r.err != nil {
		t.Fatalf("launch failed: %s", r)
	}
	s := readSummary(t, sum)
	if s.Workers != 2 || len(s.Peers) != 2 || s.Run == nil || !s.ParamsIdentical {
		t.Fatalf("summary: %d workers, %d peers, identical %v\n%s", s.Workers, len(s.Peers), s.ParamsIdentical, r)
	}
	majority := math.Max(testPos, 1-testPos)
	if s.Run.Model != mirrored.SparseModel || s.Run.Params != sparseDim || s.Run.FinalAccuracy < majority+0.04 || s.Run.Steps != 2*2000/40 {
		t.Errorf("run %s over %d features, %d steps, test accuracy %.4f (majority %.4f)", s.Run.Model, s.Run.Params, s.Run.Steps, s.Run.FinalAccuracy, majority)
	}
	for _, p := range s.Peers {
		if p.ParamsSHA256 != s.Run.ParamsSHA256 || p.BytesSent == 0 || p.BytesSent > int64(p.Steps)*4*sparseDim {
			t.Errorf("rank %d: params %.12s… (run %.12s…), sent %d bytes in %d steps", p.Rank, p.ParamsSHA256, s.Run.ParamsSHA256, p.BytesSent, p.Steps)
		}
	}
	if ep := s.Run.EpochResults; len(ep) != 2 || !(ep[1].TestLoss > 0 && ep[1].TestLoss < math.Ln2) || !(ep[1].TestAUC > 0.5 && ep[1].TestAUC <= 1) {
		t.Errorf("per-epoch results %+v: want 2 epochs ending with a test log-loss below ln 2 and an AUC above 0.5", ep)
	}
	if out := r.String(); !strings.Contains(out, "test accuracy") || !strings.Contains(out, "AUC 0.") || !strings.Contains(out, "final test AUC") {
		t.Errorf("launch output lacks the per-epoch and final test AUC:\n%s", out)
	}
}

// TestLaunchSparseLRResume: a sparse run cut short by --max-steps and
// resumed from its --checkpoint-dir ends with the weights of the
// uninterrupted run, through the CLI.
func TestLaunchSparseLRResume(t *testing.T) {
	dir := t.TempDir()
	train, _ := writeSparseFiles(t, dir, "train", "libsvm", 2, 1000, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(ckdir string, extra ...string) report.SummaryJSON {
		t.Helper()
		sum := filepath.Join(t.TempDir(), "summary.json")
		args := append([]string{"launch", "-n", "2", "--model", "sparse-lr", "--features", fmt.Sprint(sparseDim),
			"--train-files", strings.Join(train, ","), "--epochs", "2", "--batch", "25", "--lr", "0.1",
			"--sparse-optimizer", "ftrl", "--l2", "0.01", "--checkpoint-dir", ckdir, "--checkpoint-every", "15", "--summary", sum}, extra...)
		r := meshtrain(ctx, nil, args...)
		if r.err != nil {
			t.Fatalf("launch %v failed: %s", extra, r)
		}
		return readSummary(t, sum)
	}
	whole := run(t.TempDir())
	ckdir := t.TempDir()
	cut := run(ckdir, "--max-steps", "50")
	resumed := run(ckdir)
	if whole.Run.Steps != 80 || cut.Run.Steps != 50 || resumed.Run.Steps != 80 {
		t.Fatalf("steps: whole %d, cut %d, resumed %d; want 80, 50, 80", whole.Run.Steps, cut.Run.Steps, resumed.Run.Steps)
	}
	if resumed.Peers[0].ResumedStep != 45 || resumed.Run.ParamsSHA256 != whole.Run.ParamsSHA256 || !resumed.ParamsIdentical {
		t.Fatalf("resumed at step %d with weights %.12s… (identical %v); the uninterrupted run ended with %.12s…",
			resumed.Peers[0].ResumedStep, resumed.Run.ParamsSHA256, resumed.ParamsIdentical, whole.Run.ParamsSHA256)
	}
}
