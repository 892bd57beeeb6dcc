package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// TestLongEmulatedHierarchical: on 2 emulated hosts × 2 peers at 1 Gbit,
// the peers learn that they share hosts and -algo auto takes the
// hierarchical all-reduce, whose 64 MiB median busbw over 5 alternating
// pairs is ≥ 1.3× the flat ring's (issue 31's goal; 1.5× is the bytes'
// bound: M instead of 1.5M over each host's link). The links are
// plaintext: with TLS inside each host too, the four peers' ciphers need
// more than this machine's 2 cores (BENCHMARKS.md, "Hierarchical
// all-reduce"), which the same-host path without a cipher (issue 31 item
// 2) is for; the TLS pairs are measured and logged beside.
func TestLongEmulatedHierarchical(t *testing.T) {
	longtest.Require(t, "the hierarchical all-reduce against the flat ring on 2 emulated hosts × 2 peers")
	const size, pairs, reps, want = 64 << 20, 5, 3, 1.3
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, 2, netns.Gbit)
	bin := netbenchBinary(t, ctx)
	for _, sec := range []string{"plaintext", "tls"} {
		meetsTiming(t, func() string {
			res, err := netns.MeasureAlgoPairs(ctx, h, 2, bin, sec, size, pairs, reps)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range res {
				t.Logf("%s pair %d: ring %.1f MB/s (reps %.0f, %.2f CPU s), %s %.1f MB/s (reps %.0f, %.2f CPU s); load %s",
					sec, i+1, p.Ring.Median()/1e6, p.Ring.BusBW, p.Ring.CPUSeconds, p.Auto.Algo, p.Auto.Median()/1e6, p.Auto.BusBW, p.Auto.CPUSeconds, p.Load)
				if p.Auto.Algo != "hierarchical" || p.Ring.Algo != "ring" {
					t.Fatalf("pair %d ran %q and %q: want ring and, chosen by auto, hierarchical", i+1, p.Ring.Algo, p.Auto.Algo)
				}
			}
			ring, hier, ratio := netns.PairMedians(res)
			t.Logf("%s: median busbw ring %.1f MB/s, hierarchical %.1f MB/s: %.2f×", sec, ring/1e6, hier/1e6, ratio)
			if sec == "plaintext" && ratio < want {
				return fmt.Sprintf("plaintext: hierarchical busbw %.1f MB/s is %.2f× the ring's %.1f MB/s, want ≥ %.1f×", hier/1e6, ratio, ring/1e6, want)
			}
			return ""
		})
	}
}
