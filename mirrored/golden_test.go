package mirrored

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata/")

// goldenPath holds the final parameter hashes and per-epoch figures of
// fixed-seed runs of every entry point. Any change to it is a change to
// what training computes: review it as a diff (go test ./mirrored -run
// TestGolden -rewrite).
const goldenPath = "testdata/golden.txt"

// TestGolden runs each strategy (dense and sparse, synchronous and gossip)
// on the in-memory network with fixed seeds and compares the final
// parameter hashes and per-epoch losses with the golden file, so a
// restructuring that changes the arithmetic, even by one bit, shows.
//
// Gossip with two or more replicas is timing-dependent (a peer's request
// may land before or during a local step, and a peer's final message
// carries its step count, which ends the others' budget), so the golden
// gossip runs are one replica each, with averages waited for: start-up,
// the step loop, the budget, the evaluations and the final swap run
// exactly. The averaging arithmetic is pinned by the gossip engine's
// own tests.
func TestGolden(t *testing.T) {
	var out bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	epochs := func(eps []Epoch) {
		for _, e := range eps {
			line("  epoch %d loss %.17g test_loss %.17g test_accuracy %.17g test_auc %.17g lr %.17g",
				e.Epoch, e.Loss, e.TestLoss, e.TestAccuracy, e.TestAUC, e.LR)
		}
	}
	summary := func(name string, sums []*Summary, errs []error) {
		t.Helper()
		line("%s", name)
		for r, s := range sums {
			if errs[r] != nil {
				t.Fatalf("%s: rank %d: %v", name, r, errs[r])
			}
			line(" rank %d steps %d params %s final_accuracy %.17g", r, s.Run.Steps, s.Run.ParamsSHA256, s.Run.FinalAccuracy)
			epochs(s.Run.EpochResults)
		}
	}

	// Dense, synchronous: LeNet-5 on 2 replicas, softmax on 3.
	mn := synthMNIST(240, 60, 11)
	for _, c := range []struct {
		model    string
		replicas int
		batch    int
	}{{nn.LeNet5, 2, 8}, {nn.Softmax, 3, 16}} {
		job := testJob(t, c.model, mn, c.batch, 2)
		job.Logger = nil
		sums, errs := runGroup(t, same(c.replicas, job))
		summary(fmt.Sprintf("dense sync %s replicas %d", c.model, c.replicas), sums, errs)
	}

	// Sparse, synchronous: each exchange mode.
	const dim = 400
	train, test := sparseSet(t, 1, 600, dim, 6), sparseSet(t, 2, 200, dim, 6)
	for _, c := range []struct {
		replicas int
		opt      string
		exch     sparse.Exchange
	}{{3, "adagrad", sparse.ExchangeSparse}, {2, "ftrl", sparse.ExchangeDense}, {3, "sgd", sparse.ExchangeAuto}} {
		job := sparseTestJob(train, test, dim, 10, 2, c.opt, c.exch)
		sums, _, errs := runSparse(t, sameSparse(c.replicas, job))
		summary(fmt.Sprintf("sparse sync %s %s replicas %d", c.opt, c.exch, c.replicas), sums, errs)
	}

	// Gossip, dense and sparse, one replica (see above).
	st := Gossip{Schedule: "rotate", WaitForAverage: true}
	gossip := func(name string, sums []*Summary, errs []error) {
		t.Helper()
		summary(name, sums, errs)
		for r, s := range sums {
			g := s.Gossip
			if g == nil {
				t.Fatalf("%s: rank %d: no gossip report", name, r)
			}
			line(" rank %d gossip survivors %v consensus %.17g average_accuracy %.17g average_loss %.17g stopped_by %s",
				r, g.Survivors, g.FinalConsensus, g.AverageAccuracy, g.AverageLoss, g.StoppedBy)
			for _, e := range g.Evals {
				line("  eval epoch %d cluster_epochs %.17g steps %d loss %.17g test_accuracy %.17g", e.Epoch, e.ClusterEpochs, e.Steps, e.Loss, e.TestAccuracy)
			}
		}
	}
	djob := testJob(t, nn.Softmax, mn, 16, 2)
	djob.Logger, djob.HashEvery, djob.MeasureWait = nil, 0, false
	djob.Strategy = st
	dsums, derrs := onMemCluster(t, 1, 2*time.Minute, nil, func(ctx context.Context, r int, c *collective.Comm) (*Summary, error) {
		return Run(ctx, djob, NewGroup(c))
	})
	gossip("dense gossip softmax replicas 1", dsums, derrs)
	sjob := sparseTestJob(train, test, dim, 10, 2, "adagrad", sparse.ExchangeSparse)
	sjob.HashEvery = 0
	sjob.Strategy = st
	ssums, serrs := onMemCluster(t, 1, 2*time.Minute, nil, func(ctx context.Context, r int, c *collective.Comm) (*Summary, error) {
		return Run(ctx, sjob, NewGroup(c))
	})
	gossip("sparse gossip adagrad replicas 1", ssums, serrs)

	if *rewrite {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (run go test ./mirrored -run TestGolden -rewrite to create it)", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from this run at line %d:\n got  %s\n want %s\nif the change is deliberate, review it and run with -rewrite", goldenPath, i+1, g, w)
			}
		}
	}
}
