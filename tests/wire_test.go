package tests

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkersWithDifferentWire starts two workers by hand over libp2p,
// one sending its gradient in bf16: both must exit naming the setting
// and who holds which value, before any step.
func TestWorkersWithDifferentWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	peers := freePorts(t, 2)
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("an e2e test secret, 32 bytes...."))
	results := make([]result, 2)
	var wg sync.WaitGroup
	for r, wire := range []string{"fp32", "bf16"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r] = meshtrain(ctx, []string{secret, "TF_CONFIG=" + tfConfig(peers, r)},
				"worker", "--model", "softmax", "--epochs", "1", "--wire", wire, "--train-examples", "3000", "--test-examples", "500",
				"--collective-timeout", "20s")
		}()
	}
	wg.Wait()
	for r, res := range results {
		if res.err == nil {
			t.Errorf("rank %d succeeded:\n%s", r, res)
			continue
		}
		if !strings.Contains(res.stderr, "the peers were started with different settings: wire is fp32 on rank 0 but bf16 on rank 1") {
			t.Errorf("rank %d does not name the setting and the ranks:\n%s", r, res)
		}
	}
}

// TestLaunchWire16 trains LeNet on 2 local peers over libp2p with each
// 16-bit wire: the peers end identical, the summary records the format,
// and rank 0 sent about half the bytes of the float32 run. (LeNet's
// gradient is large enough for the float32 run to use the ring too;
// softmax's would go by a small-buffer algorithm with other bytes.)
func TestLaunchWire16(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sent := map[string]int64{}
	for _, wire := range []string{"fp32", "bf16", "fp16"} {
		sum := filepath.Join(t.TempDir(), "summary.json")
		r := meshtrain(ctx, nil, "launch", "-n", "2", "--model", "lenet", "--epochs", "1", "--batch", "32",
			"--train-examples", "1280", "--test-examples", "500", "--wire", wire, "--summary", sum)
		if r.err != nil {
			t.Fatal(r)
		}
		if !strings.Contains(r.stdout, "parameters identical on every peer") {
			t.Fatalf("--wire %s: peers differ\n%s", wire, r)
		}
		b, err := os.ReadFile(sum)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Wire  string `json:"wire"`
			Peers []struct {
				BytesSent int64 `json:"bytes_sent"`
			} `json:"peers"`
		}
		if err := json.Unmarshal(b, &s); err != nil || len(s.Peers) != 2 {
			t.Fatalf("--wire %s: summary %v: %s", wire, err, b)
		}
		want := wire
		if wire == "fp32" {
			want = "" // left out: summaries of float32 runs are as they were
		}
		if s.Wire != want {
			t.Errorf("--wire %s: the summary says wire %q, want %q", wire, s.Wire, want)
		}
		sent[wire] = s.Peers[0].BytesSent
	}
	for _, wire := range []string{"bf16", "fp16"} {
		ratio := float64(sent[wire]) / float64(sent["fp32"])
		t.Logf("--wire %s: rank 0 sent %d bytes, fp32 %d (ratio %.3f)", wire, sent[wire], sent["fp32"], ratio)
		if ratio < 0.45 || ratio > 0.6 {
			t.Errorf("--wire %s: rank 0 sent %d bytes, fp32 %d (ratio %.3f): want about half", wire, sent[wire], sent["fp32"], ratio)
		}
	}
}
