package tests

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkersOnTwoHosts starts four workers on this machine, told with
// --host-id that they are two hosts of two: they learn each other's host
// at start-up, Auto takes the hierarchical all-reduce for LeNet-5's
// 246 KB gradient, the replicas end identical, and the summary and the
// verdict name the topology and the choice. Without --host-id the four
// are one host and keep the flat ring.
func TestWorkersOnTwoHosts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("an e2e test secret, 32 bytes...."))
	for _, tc := range []struct {
		hosts []string
		want  string
	}{
		{[]string{"h0", "h0", "h1", "h1"}, "topology: 2 hosts × 2 peers; all-reduce: hierarchical (reduce in host, ring over 2 leaders)"},
		{nil, "topology: 1 host × 4 peers; all-reduce: ring"},
	} {
		peers := freePorts(t, 4)
		summary := filepath.Join(t.TempDir(), "summary.json")
		results := make([]result, 4)
		var wg sync.WaitGroup
		for r := range 4 {
			args := []string{"worker", "--model", "lenet", "--epochs", "1", "--batch", "32", "--train-examples", "640", "--test-examples", "200",
				"--collective-timeout", "40s", "--summary", summary}
			if tc.hosts != nil {
				args = append(args, "--host-id", tc.hosts[r])
			}
			wg.Go(func() { results[r] = meshtrain(ctx, []string{secret, "TF_CONFIG=" + tfConfig(peers, r)}, args...) })
		}
		wg.Wait()
		for r, res := range results {
			if res.err != nil {
				t.Fatalf("hosts %q: rank %d failed:\n%s", tc.hosts, r, res)
			}
		}
		s := readSummary(t, summary)
		if s.Run == nil {
			t.Fatalf("hosts %q: the summary has no run:\n%s", tc.hosts, results[0])
		}
		if !s.ParamsIdentical || s.Run.Topology != tc.want {
			t.Fatalf("hosts %q: identical %v, topology %q; want identical, %q", tc.hosts, s.ParamsIdentical, s.Run.Topology, tc.want)
		}
		if s.Verdict == nil || s.Verdict.Topology != tc.want || !strings.Contains(results[0].stdout, tc.want) {
			t.Fatalf("hosts %q: the verdict %+v or the table does not name %q:\n%s", tc.hosts, s.Verdict, tc.want, results[0].stdout)
		}
	}
}
