package mirrored

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/sparse"
)

func runSparseGossip(t *testing.T, job Job, n int) []*Summary {
	t.Helper()
	job.Strategy = Gossip{Schedule: "random"}
	sums, errs := onMemCluster(t, n, time.Minute, nil, func(ctx context.Context, _ int, c *collective.Comm) (*Summary, error) {
		return Run(ctx, job, NewGroup(c))
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("gossip rank %d: %v", r, err)
		}
	}
	return sums
}

// TestSparseGossipLearns: sparse logistic regression under gossip learns
// as well as the synchronous job (within 3 points).
func TestSparseGossipLearns(t *testing.T) {
	const dim, n = 3000, 3
	train, test := sparseSet(t, 1, 9000, dim, 5), sparseSet(t, 2, 1000, dim, 5)
	job := sparseTestJob(train, test, dim, 20, 3, "adagrad", sparse.ExchangeSparse)
	job.NoShuffle, job.HashEvery = false, 0
	job.Sparse.L1, job.Sparse.L2 = 0, 0
	syncSums, _, errs := runSparse(t, sameSparse(n, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("synchronous rank %d: %v", r, err)
		}
	}
	want := syncSums[0].Run.FinalAccuracy
	for r, s := range runSparseGossip(t, job, n) {
		if s.Run.FinalAccuracy < want-0.03 || s.Gossip.Averaged == 0 {
			t.Errorf("gossip rank %d: accuracy %.3f (synchronous %.3f), %d averages", r, s.Run.FinalAccuracy, want, s.Gossip.Averaged)
		}
	}
}

// TestSparseGossipSendsChangedCoordinates: with D far above what a few
// steps touch, as at Criteo's scale, each message carries about the
// coordinates the cluster changed since the two peers last met, never
// anything near D.
func TestSparseGossipSendsChangedCoordinates(t *testing.T) {
	const dim, n, batch, k = 1_000_000, 3, 20, 5
	train := wideSparseSet(t, 3000, dim, k)
	job := sparseTestJob(train, nil, dim, batch, 1, "adagrad", sparse.ExchangeSparse)
	job.NoShuffle, job.HashEvery = false, 0
	job.Sparse.L1, job.Sparse.L2 = 0, 0
	perStep := n * batch * (k + 1) // coordinates the cluster touches per step, at most
	for r, s := range runSparseGossip(t, job, n) {
		g := s.Gossip
		msgs := g.Initiated + g.Served
		perMsg := float64(g.ElementsSent) / float64(msgs)
		if g.Averaged == 0 || perMsg > float64(15*perStep) {
			t.Errorf("rank %d: %.0f coordinates per message over %d messages (%d averages); the cluster touches at most %d per step", r, perMsg, msgs, g.Averaged, perStep)
		}
		if dense := int64(4*dim) * int64(msgs); s.Peer.BytesSent*100 > dense {
			t.Errorf("rank %d sent %d bytes, dense exchanges would send %d", r, s.Peer.BytesSent, dense)
		}
		t.Logf("rank %d: %d steps, %.0f coordinates per message (cluster touches ≤ %d per step), %d bytes sent for %d messages",
			r, s.Peer.Steps, perMsg, perStep, s.Peer.BytesSent, msgs)
	}
}

func TestSparseGossipRefusesStatefulOptimizers(t *testing.T) {
	train := sparseSet(t, 1, 200, 100, 3)
	c, err := collective.New(collective.NewMemNetwork(1).Transport(0), collective.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opt  string
		l2   float64
		want string
	}{{"ftrl", 0, "gossip with --optimizer ftrl"}, {"sgd", 0.01, "gossip with sgd and --l2 0.01"}} {
		job := sparseTestJob(train, nil, 100, 10, 1, tc.opt, sparse.ExchangeSparse)
		job.Sparse.L2 = tc.l2
		job.Strategy = Gossip{}
		if _, err := Run(context.Background(), job, NewGroup(c)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with L2 %v under gossip: %v, want it refused with %q", tc.opt, tc.l2, err, tc.want)
		}
		job.Strategy = Ring{} // the ring takes either
		if err := job.Validate(); err != nil {
			t.Errorf("%s with L2 %v under the ring: %v", tc.opt, tc.l2, err)
		}
	}
}

// wideSparseSet draws n examples of k random features among dim (plus the
// bias, feature 0) with random labels: traffic, not learning, is tested.
func wideSparseSet(t *testing.T, n, dim, k int) *data.SparseSet {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	rowPtr := []int{0}
	var idx []int32
	var val, labels []float32
	for range n {
		row := []int32{0}
		for len(row) < k+1 {
			if u := int32(1 + rng.IntN(dim-1)); !slices.Contains(row, u) {
				row = append(row, u)
			}
		}
		slices.Sort(row)
		idx = append(idx, row...)
		for range row {
			val = append(val, 1)
		}
		labels = append(labels, float32(2*rng.IntN(2)-1))
		rowPtr = append(rowPtr, len(idx))
	}
	s, err := data.NewSparseSet(rowPtr, idx, val, labels)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
