package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective/p2p"
)

// TestSparseInProcess runs the benchmark end to end at a small D with
// in-process peers over libp2p: every row present, peers identical, the
// dense exchange sending about 4·D bytes per step and the sparse far less.
func TestSparseInProcess(t *testing.T) {
	const dim = 5000
	var out bytes.Buffer
	cfg := SparseConfig{
		Peers: []int{2, 3}, Features: dim, Batch: 20, Examples: 400, Steps: 30, DenseSteps: 3, LocalSteps: 30,
		Cluster: Cluster{Security: p2p.SecurityTLS, Timeout: 20 * time.Second, InProcess: true}, JSON: true, Seed: 1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Sparse(ctx, cfg, &out); err != nil {
		t.Fatal(err)
	}
	var res SparseResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if res.LocalExamplesPerSec <= 0 || res.LocalComputeExamplesPerSec < res.LocalExamplesPerSec || res.LocalCPUExamplesPerSec <= 0 || len(res.Rows) != 4 {
		t.Fatalf("result %+v", res)
	}
	for _, r := range res.Rows {
		if !r.Identical || r.StepsPerS <= 0 || r.CPUPerStep <= 0 {
			t.Errorf("row %+v", r)
		}
		// Whatever the all-reduce algorithm (ring or recursive doubling at
		// this size), each peer sends between (N-1)/N and 2 vectors.
		vec := 4.0 * dim
		switch r.Exchange {
		case "dense":
			if r.Steps != 3 || r.SentPerStep < vec*float64(r.Peers-1)/float64(r.Peers) || r.SentPerStep > 2*vec+20_000 {
				t.Errorf("dense row %+v: want %v-%v bytes per step", r, vec*float64(r.Peers-1)/float64(r.Peers), 2*vec)
			}
		case "sparse":
			// 27 features × batch 20 at most, each ≤ 9 bytes, to N-1 peers.
			if r.Steps != 30 || r.SentPerStep > float64(r.Peers-1)*(27*20*9+100)+2000 || r.Gather != "direct" {
				t.Errorf("sparse row %+v", r)
			}
		default:
			t.Errorf("row with exchange %q", r.Exchange)
		}
	}
	cfg.JSON = false
	out.Reset()
	cfg.Peers, cfg.LocalSteps = []int{2}, 0
	if err := Sparse(ctx, cfg, &out); err != nil || !strings.Contains(out.String(), "steps/s") {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
}

func TestSparseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  SparseConfig
		want string
	}{
		{SparseConfig{Peers: []int{1}}, "at least 2"},
		{SparseConfig{Features: -1}, "--features -1"},
		{SparseConfig{Batch: 100, Examples: 10}, "batch 100 with 10 examples"},
		{SparseConfig{Steps: -1}, "step counts"},
	} {
		if err := Sparse(context.Background(), tc.cfg, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", tc.cfg, err, tc.want)
		}
	}
}
