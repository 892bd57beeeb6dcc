package tests

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// TestLongEmulatedHierarchical: on 2 emulated hosts × 2 peers at 1 Gbit,
// the peers learn that they share hosts and -algo auto takes the
// hierarchical all-reduce, whose 64 MiB median busbw over 5 alternating
// pairs is ≥ 1.3× the flat ring's (issue 31's goal; 1.5× is the bytes'
// bound: M instead of 1.5M over each host's link). Asserted over
// plaintext links, and over TLS between hosts with the peers of each host
// on the same-host link (--intra-host auto: shared memory, no cipher);
// with TLS inside each host too (--intra-host tls) the four peers' ciphers
// can need more than this machine's 2 cores under load (BENCHMARKS.md,
// "Hierarchical all-reduce"), so those pairs are measured and logged only.
func TestLongEmulatedHierarchical(t *testing.T) {
	longtest.Require(t, "the hierarchical all-reduce against the flat ring on 2 emulated hosts × 2 peers")
	const size, pairs, reps, want = 64 << 20, 5, 3, 1.3
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, 2, netns.Gbit)
	bin := netbenchBinary(t, ctx)
	for _, c := range []struct {
		sec, intra string
		assert     bool
		links      int // same-host links over all four ranks
	}{
		{"plaintext", "tls", true, 0},
		{"tls", "auto", true, 4},
		{"tls", "tls", false, 0},
	} {
		name := c.sec + ", --intra-host " + c.intra
		meetsTiming(t, func() string {
			res, err := netns.MeasureAlgoPairs(ctx, h, 2, bin, c.sec, size, pairs, reps, "-intra-host", c.intra)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range res {
				t.Logf("%s pair %d: ring %.1f MB/s (reps %.0f, %.2f CPU s), %s %.1f MB/s (reps %.0f, %.2f CPU s); load %s",
					name, i+1, p.Ring.Median()/1e6, p.Ring.BusBW, p.Ring.CPUSeconds, p.Auto.Algo, p.Auto.Median()/1e6, p.Auto.BusBW, p.Auto.CPUSeconds, p.Load)
				if p.Auto.Algo != "hierarchical" || p.Ring.Algo != "ring" {
					t.Fatalf("%s pair %d ran %q and %q: want ring and, chosen by auto, hierarchical", name, i+1, p.Ring.Algo, p.Auto.Algo)
				}
				if p.Ring.SameHostLinks != c.links || p.Auto.SameHostLinks != c.links {
					t.Fatalf("%s pair %d: %d and %d links went through shared memory, want %d", name, i+1, p.Ring.SameHostLinks, p.Auto.SameHostLinks, c.links)
				}
			}
			ring, hier, ratio := netns.PairMedians(res)
			t.Logf("%s: median busbw ring %.1f MB/s, hierarchical %.1f MB/s: %.2f×", name, ring/1e6, hier/1e6, ratio)
			if c.assert && ratio < want {
				return fmt.Sprintf("%s: hierarchical busbw %.1f MB/s is %.2f× the ring's %.1f MB/s, want ≥ %.1f×", name, hier/1e6, ratio, ring/1e6, want)
			}
			return ""
		})
	}
}

// TestEmulatedHostsHierarchicalTrain trains LeNet-5 with 2 workers on each
// of 2 emulated hosts: the workers find from their network namespaces
// (hostid) which of them share a host, take the hierarchical all-reduce
// for the gradient, end with identical parameters, and the chief's
// summary says so.
func TestEmulatedHostsHierarchicalTrain(t *testing.T) {
	const perHost = 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, 2, netns.Gbit)
	dir := t.TempDir()
	peers := make([]string, h.N*perHost)
	for r := range peers {
		peers[r] = net.JoinHostPort(h.IP(r/perHost), strconv.Itoa(7000+r%perHost))
	}
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("emulated hosts' secret, 32 bytes"))
	summary := filepath.Join(dir, "summary.json")
	res, err := h.RunPerHost(ctx, perHost, func(r int) netns.Proc {
		spec := filepath.Join(dir, fmt.Sprintf("tf_config%d.json", r))
		if err := os.WriteFile(spec, []byte(tfConfig(peers, r)), 0o644); err != nil {
			t.Error(err)
		}
		return netns.Proc{Env: []string{secret, "TF_CONFIG="}, Args: []string{binary, "worker", "--tf-config", spec, "--summary", summary,
			"--model", "lenet", "--epochs", "1", "--batch", "32", "--train-examples", "640", "--test-examples", "200", "--collective-timeout", "40s"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	s := readSummary(t, summary)
	const want = "topology: 2 hosts × 2 peers; all-reduce: hierarchical (reduce in host, ring over 2 leaders)"
	if s.Run == nil {
		t.Fatalf("the summary has no run:\n%s", res[0])
	}
	if !s.ParamsIdentical || s.Run.Topology != want {
		t.Fatalf("identical %v, topology %q; want identical, %q\n%s", s.ParamsIdentical, s.Run.Topology, want, res[0])
	}
}
