package tests

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/mirrored/cost"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// TestEmulatedHostsCostModel runs the measurements the cost model is
// validated with on 3 hosts at 1 Gbit: a forced star, a sparse all-gather
// and a gossip round each complete with plausible figures, and a 16 MiB
// ring all-reduce (bandwidth-bound) takes what the model predicts within
// 25% (it measured within 5-20% under load 5-9; the goal of 15% is checked
// by `go run ./tests/netns/hosts validate`, not here, where other tests
// share the cores).
func TestEmulatedHostsCostModel(t *testing.T) {
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
	gossip, err := netns.MeasureGossip(ctx, h, bin, []int{1 << 20}, 3)
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
	for _, r := range append(gather, gossip...) {
		if len(r.Seconds) == 0 || r.Median() <= 0 || r.Median() > 10 || r.N != n {
			t.Errorf("%s: %+v", r.Op, r)
		}
	}
}
