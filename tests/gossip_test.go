package tests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
)

// Ring against gossip on N = 3 real peers: each replica has its own libp2p
// host (TLS) on 127.0.0.1; the replicas run in this test process so that
// faults can be injected exactly (a killed rank closes its host without a
// goodbye, as a crash does).

type peerOutcome struct {
	sum    *mirrored.Summary
	gossip *mirrored.GossipReport
	err    error
}

// runPeers runs job with strategy st and faults f on n libp2p peers on
// 127.0.0.1.
func runPeers(t *testing.T, ctx context.Context, n int, job mirrored.Job, st mirrored.Strategy, f mirrored.Faults) []peerOutcome {
	t.Helper()
	out := make([]peerOutcome, n)
	// Ring replicas leave together, as the worker does.
	errs := onPeers(t, ctx, n, st.Name(), st.Lockstep(), func(r int, log *zap.Logger, m *collective.Member, tr *p2p.Transport) error {
		j := job
		j.Strategy, j.Faults, j.Logger = st, f, log
		if f.KillAfter > 0 && r == f.KillRank {
			j.Faults.Kill = func() { _ = tr.Host().Close() } // a crash: no goodbye
		}
		var err error
		if out[r].sum, err = mirrored.Run(ctx, j, mirrored.NewGroup(m.Comm)); err == nil {
			out[r].gossip = out[r].sum.Gossip
		}
		return err
	})
	for r, err := range errs {
		out[r].err = err
	}
	return out
}

func gossipJob(t *testing.T, model string, train, test, epochs int) mirrored.Job {
	t.Helper()
	cfg := mirrored.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.MNIST = model, epochs, 32, loadMNIST(t)
	cfg.TrainExamples, cfg.TestExamples, cfg.Shards = train, test, 1
	return mirrored.Job{Config: cfg, HashEvery: 50, MeasureWait: true}
}

func TestRingAndGossipReachThreshold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job := gossipJob(t, "softmax", 12000, 2000, 3)
	const threshold = 0.85 // the ring reaches about 0.873 on this slice (the first 2000 test images are the harder half)
	ring := runPeers(t, ctx, 3, job, mirrored.Ring{}, mirrored.Faults{})
	for r, p := range ring {
		if p.err != nil {
			t.Fatalf("ring rank %d: %v", r, p.err)
		}
		if p.sum.Run.FinalAccuracy < threshold || p.sum.Peer.ParamsSHA256 != ring[0].sum.Peer.ParamsSHA256 {
			t.Errorf("ring rank %d: accuracy %.4f, params %.12s (rank 0: %.12s)", r, p.sum.Run.FinalAccuracy, p.sum.Peer.ParamsSHA256, ring[0].sum.Peer.ParamsSHA256)
		}
		t.Logf("ring rank %d: %d steps, accuracy %.4f", r, p.sum.Peer.Steps, p.sum.Run.FinalAccuracy)
	}
	gossip := runPeers(t, ctx, 3, job, mirrored.Gossip{Schedule: "random"}, mirrored.Faults{})
	for r, p := range gossip {
		if p.err != nil {
			t.Fatalf("gossip rank %d: %v", r, p.err)
		}
		g := p.gossip
		if p.sum.Run.FinalAccuracy < threshold || g.AverageAccuracy < threshold {
			t.Errorf("gossip rank %d: own accuracy %.4f, average model %.4f: want ≥ %.2f", r, p.sum.Run.FinalAccuracy, g.AverageAccuracy, threshold)
		}
		// Replicas end close together: their distance from the mean is
		// under 5% of the mean's norm.
		if g.RelConsensus > 0.05 || !slices.Equal(g.Survivors, []int{0, 1, 2}) {
			t.Errorf("gossip rank %d: relative consensus distance %.4f among %v", r, g.RelConsensus, g.Survivors)
		}
		if g.Averaged == 0 || p.sum.Peer.BytesSent == 0 {
			t.Errorf("gossip rank %d: %d averages, %d bytes sent", r, g.Averaged, p.sum.Peer.BytesSent)
		}
		t.Logf("gossip rank %d: %d steps, %.0f steps/s, accuracy %.4f (average model %.4f), consensus %.2g, staleness max %d mean %.2f, averaged %d declined %d served %d",
			r, p.sum.Peer.Steps, g.StepsPerSec, p.sum.Run.FinalAccuracy, g.AverageAccuracy, g.RelConsensus, g.StalenessMax, g.StalenessMean, g.Averaged, g.Declined, g.Served)
	}
}

func TestGossipStragglerLeavesFastPeersFaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job := gossipJob(t, "lenet", 3840, 500, 1)
	slow := mirrored.Faults{SlowRank: 1, SlowFactor: 3}
	rate := func(p peerOutcome) float64 {
		if p.gossip != nil {
			return p.gossip.StepsPerSec
		}
		return float64(p.sum.Peer.Steps) / p.sum.Run.TrainSeconds
	}
	ring := runPeers(t, ctx, 3, job, mirrored.Ring{}, slow)
	gossip := runPeers(t, ctx, 3, job, mirrored.Gossip{}, slow)
	for r := range 3 {
		if ring[r].err != nil || gossip[r].err != nil {
			t.Fatalf("rank %d: ring %v, gossip %v", r, ring[r].err, gossip[r].err)
		}
	}
	for k, p := range gossip {
		t.Logf("gossip rank %d: %d steps in %.2fs (compute %.2fs, communication %.2fs, %d rounds skipped while an average was in flight)",
			k, p.sum.Peer.Steps, p.sum.Run.TrainSeconds, p.sum.Peer.ComputeSeconds, p.sum.Peer.CommSeconds, p.gossip.Skipped)
	}
	for _, r := range []int{0, 2} {
		rr, gr := rate(ring[r]), rate(gossip[r])
		t.Logf("rank %d: ring %.1f steps/s, gossip %.1f steps/s (straggler: ring %.1f, gossip %.1f)", r, rr, gr, rate(ring[1]), rate(gossip[1]))
		if gr <= rr {
			t.Errorf("fast rank %d: %.1f steps/s under gossip, %.1f under ring: a 3× straggler should not hold gossip peers back", r, gr, rr)
		}
	}
}

func TestKilledPeerGossipFinishesRingNamesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// 12000 examples: with 6000 the survivors, who lose the dead rank's
	// shard, ended at 0.84-0.875 (often under the 0.85 bar under load);
	// with 12000 at 0.864-0.883.
	job := gossipJob(t, "softmax", 12000, 1000, 2)
	kill := mirrored.Faults{KillRank: 2, KillAfter: 20}

	gossip := runPeers(t, ctx, 3, job, mirrored.Gossip{}, kill)
	if !errors.Is(gossip[2].err, mirrored.ErrInjectedKill) {
		t.Fatalf("killed rank: %v", gossip[2].err)
	}
	for _, r := range []int{0, 1} {
		p := gossip[r]
		if p.err != nil {
			t.Fatalf("gossip rank %d: %v: the survivors must finish", r, p.err)
		}
		if !slices.Equal(p.gossip.Dead, []int{2}) || !slices.Equal(p.gossip.Survivors, []int{0, 1}) {
			t.Errorf("gossip rank %d: dead %v, survivors %v", r, p.gossip.Dead, p.gossip.Survivors)
		}
		if p.sum.Run.FinalAccuracy < 0.85 {
			t.Errorf("gossip rank %d: accuracy %.4f", r, p.sum.Run.FinalAccuracy)
		}
	}

	start := time.Now()
	ring := runPeers(t, ctx, 3, job, mirrored.Ring{}, kill)
	for _, r := range []int{0, 1} {
		if ring[r].err == nil || !strings.Contains(ring[r].err.Error(), "rank 2") {
			t.Errorf("ring rank %d: %v, want an error naming rank 2", r, ring[r].err)
		}
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("the ring took %v to report the dead rank: want the link failure, not the 20 s timeout", time.Since(start))
	}
}

func TestCompareCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := t.TempDir()
	r := meshtrain(ctx, nil, "--log-level", "warn", "compare", "-n", "3", "--model", "softmax", "--lr", "0.02", "--epochs", "1",
		"--train-examples", "6000", "--test-examples", "1000", "--target", "0.85", "--slow-peer", "1:3", "--out", out)
	if r.err != nil {
		t.Fatal(r)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| ring, baseline |", "| gossip, baseline |", "| ring, straggler |", "| gossip, straggler |", "Against what gossip is for"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "rank ") && strings.Contains(string(md), "| errors |") && !strings.Contains(string(md), "| none |") {
		t.Errorf("a run failed:\n%s", md)
	}
	for _, png := range []string{"accuracy_vs_time_baseline.png", "accuracy_vs_epochs_straggler.png", "consensus_baseline.png", "steps_per_sec.png", "mb_sent.png"} {
		if st, err := os.Stat(filepath.Join(out, png)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", png, err)
		}
	}
}

// The same faults through the real launcher: N worker processes, one of
// which dies (closing its host without a goodbye, as a crash does).
func TestLaunchKilledPeerGossipFinishesRingNamesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := func(strategy, summary string) []string {
		return []string{"launch", "-n", "3", "--strategy", strategy, "--model", "softmax", "--epochs", "2", "--batch", "32",
			"--train-examples", "9000", "--test-examples", "1000", "--kill-rank", "2", "--kill-after", "30", "--summary", summary}
	}
	gsum := filepath.Join(t.TempDir(), "gossip.json")
	r := meshtrain(ctx, nil, args("gossip", gsum)...)
	if r.err != nil {
		t.Fatalf("gossip launch with a killed peer: %v", r)
	}
	s := readSummary(t, gsum)
	if len(s.Peers) != 3 || s.Peers[2].Error == "" || !strings.Contains(s.Peers[2].Error, "killed by fault injection") {
		t.Fatalf("gossip summary peers %+v: want rank 2 killed", s.Peers)
	}
	for _, p := range s.Peers[:2] {
		if p.Error != "" || p.Steps == 0 || p.TestAccuracy < 0.8 {
			t.Errorf("gossip rank %d: error %q, %d steps, accuracy %.3f", p.Rank, p.Error, p.Steps, p.TestAccuracy)
		}
	}
	if !strings.Contains(r.stdout, "rank 2 failed (the others carried on without it)") {
		t.Errorf("launch output does not report the lost peer:\n%s", r.stdout)
	}

	r = meshtrain(ctx, nil, args("ring", filepath.Join(t.TempDir(), "ring.json"))...)
	// The launcher names rank 2 with its own error, not a survivor that
	// lost it (and may have exited first).
	last := r.stderr[strings.LastIndex(r.stderr, "meshtrain: launch:"):]
	if r.err == nil || !strings.HasPrefix(last, "meshtrain: launch: rank 2 failed: ") || !strings.Contains(last, "killed by fault injection") {
		t.Fatalf("ring launch with a killed peer: want a failure naming rank 2 killed by fault injection, got %v", r)
	}
}
