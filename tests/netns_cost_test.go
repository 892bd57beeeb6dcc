package tests

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/internal/stats"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// TestLongEmulatedHostsCostModel runs the measurements the cost model is
// validated with on 3 hosts at 1 Gbit: a forced star, a sparse all-gather
// and a gossip round each complete with plausible figures, and a 16 MiB
// ring all-reduce (bandwidth-bound) takes what the model predicts within
// 25% (it measured within 5-20% under load 5-9; the goal of 15% is checked
// by `go run ./tests/tools/hosts validate`, not here, where other tests
// share the cores).
func TestLongEmulatedHostsCostModel(t *testing.T) {
	longtest.Require(t, "the cost model against timed all-reduces on emulated hosts")
	const n, size = 3, 16 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := emulatedHosts(t, ctx, n, netns.Gbit)
	bin := netbenchBinary(t, ctx)
	ring, err := netns.MeasureAllReduce(ctx, h, bin, "tls", []int64{size}, 3, "-algo", "ring")
	if err != nil {
		t.Fatal(err)
	}
	star, err := netns.MeasureAllReduce(ctx, h, bin, "tls", []int64{4096}, 3, "-algo", "star")
	if err != nil {
		t.Fatal(err)
	}
	gather, err := netns.MeasureGather(ctx, h, bin, []int{1000}, 5)
	if err != nil {
		t.Fatal(err)
	}
	gossip, err := netns.MeasureGossip(ctx, h, bin, []int64{1 << 20}, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := cost.Params{Beta: cost.LinkBeta(float64(h.Rate)), RankCores: 1}
	want := p.Estimate(cost.Ring(n, size)).Seconds
	got := float64(size) * 2 * (n - 1) / n / ring[0].Median()
	t.Logf("ring %d MiB: %.1f ms, model %.1f ms (β only); star 4 KiB %v; gather of 1000 features %d B in %.0f µs; gossip 1 MiB %.1f ms; load %s",
		size>>20, got*1e3, want*1e3, star[0].Algo, gather[0].Bytes, gather[0].Median()*1e6, gossip[0].Median()*1e3, netns.LoadAverage())
	if math.Abs(got-want) > 0.25*got {
		t.Errorf("ring all-reduce of %d MiB took %.1f ms, the model says %.1f ms: off by more than 25%%", size>>20, got*1e3, want*1e3)
	}
	if star[0].Algo != "star" {
		t.Errorf("-algo star ran %q", star[0].Algo)
	}
	// 1000 random features of 33.7M: gaps of ~34k take 3 varint bytes.
	if b := gather[0].Bytes; b < 5000 || b > 8000 || gather[0].Touched != 1000 {
		t.Errorf("gather of 1000 features: %d bytes, %d touched; want 5,000-8,000 bytes", b, gather[0].Touched)
	}
	// Every rank starts an exchange at once, and one busy with its own
	// declines the others': some, not all, average (half at N=2).
	if a := gossip[0].Averaged; !(a > 0 && a <= 1) {
		t.Errorf("gossip: %v of the exchanges averaged, want a share in (0, 1]", a)
	}
	for _, r := range append(gather, gossip...) {
		if len(r.Seconds) == 0 || r.Median() <= 0 || r.Median() > 10 || r.N != n {
			t.Errorf("%s: %+v", r.Op, r)
		}
	}
}

// TestLongEmulatedHostsBucket: each timed repetition starts with tbf's bucket
// full (netns.Rate.Refill), and only the bytes beyond it take the link's
// rate, as the model (cost.Params.Burst) says. At 100 Mbit, where the CPU
// and the latency are small beside the transfer: a 64 KiB tree all-reduce
// on 2 hosts fits in the 71.8 kB bucket and takes less than half of its
// 5.5 ms at the rate (without the pause before each repetition it took all
// of them); a 256 KiB one takes its bytes beyond the bucket at β (15.9 ms,
// not the 21.9 ms of all of them) within -10% to +15%: quiet, it takes
// 17.0 ms, its CPU and latency adding about 1 ms to the model's transfer.
func TestLongEmulatedHostsBucket(t *testing.T) {
	longtest.Require(t, "gradient buckets timed on emulated hosts")
	sizes := []int64{64 << 10, 256 << 10}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := emulatedHosts(t, ctx, 2, 100*netns.Mbit)
	bin := netbenchBinary(t, ctx)
	p := cost.Params{Beta: cost.LinkBeta(float64(h.Rate)), RankCores: 1, Burst: float64(h.Rate.Burst())}
	meetsTiming(t, func() string {
		res, err := netns.MeasureAllReduce(ctx, h, bin, "tls", sizes, 9, "-algo", "tree")
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			got, tr := stats.Median(r.Seconds()), cost.RecursiveDoubling(2, float64(sizes[i]))
			want, all := p.Estimate(tr).Transfer, tr.Link/p.Beta
			t.Logf("tree all-reduce of %d KiB: %.2f ms (spread %.0f%%); transfer %.2f ms beyond the %d-byte bucket, %.2f ms without it; load %s",
				sizes[i]>>10, got*1e3, 100*stats.Spread(r.Seconds()), want*1e3, h.Rate.Burst(), all*1e3, netns.LoadAverage())
			switch {
			case i == 0 && got > all/2:
				return fmt.Sprintf("%d KiB: %.2f ms, more than half its time at the rate: the repetitions do not start with a full bucket", sizes[i]>>10, got*1e3)
			case i == 1 && (got < 0.9*want || got > 1.15*want):
				return fmt.Sprintf("%d KiB: %.2f ms, want its bytes beyond the bucket at β, %.2f ms, -10%% to +15%% (the CPU and latency add about 1 ms)", sizes[i]>>10, got*1e3, want*1e3)
			}
		}
		return ""
	})
}
