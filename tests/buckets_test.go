package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGradientBucketsOverLibp2p trains the classic Keras CNN on 3 peers
// over TLS with its gradient exchanged in buckets during the backward pass
// (256K: the two dense layers, 1,181,066 floats, make one bucket that
// goes as soon as dense1's backward pass is done; the convolutions' 18,816
// follow after the pass) and after it (off):
// the runs end with the same parameters, bit for bit, and the bucketed
// run's timeline shows all-reduces during the backward pass.
func TestGradientBucketsOverLibp2p(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cnn := kerasFile(t, "mnist_cnn_tfkeras2.json")
	hashes := map[string]string{}
	for _, bucket := range []string{"256K", "off"} {
		dir := t.TempDir()
		sum, tl := filepath.Join(dir, "summary.json"), filepath.Join(dir, "timeline.json")
		r := meshtrain(ctx, nil, "launch", "-n", "3", "--model-file", cnn, "--epochs", "1", "--batch", "16",
			"--train-examples", "480", "--test-examples", "300", "--measure-wait=false",
			"--gradient-bucket", bucket, "--summary", sum, "--timeline", tl)
		if r.err != nil {
			t.Fatal(r)
		}
		if !strings.Contains(r.stdout, "parameters identical on every peer") {
			t.Fatalf("--gradient-bucket %s: peers differ\n%s", bucket, r)
		}
		hashes[bucket] = readSummary(t, sum).Run.ParamsSHA256
		b, err := os.ReadFile(tl)
		if err != nil {
			t.Fatal(err)
		}
		var trace struct {
			TraceEvents []struct {
				Name, Cat string
			} `json:"traceEvents"`
		}
		if err := json.Unmarshal(b, &trace); err != nil {
			t.Fatal(err)
		}
		early := 0
		for _, e := range trace.TraceEvents {
			if e.Cat == "buckets" && strings.Contains(e.Name, "during the backward pass") {
				early++
			}
		}
		// 10 steps × 3 peers × one bucket during the pass.
		if want := map[string]int{"256K": 30, "off": 0}[bucket]; early != want {
			t.Errorf("--gradient-bucket %s: %d all-reduces during the backward pass on the timeline, want %d", bucket, early, want)
		}
	}
	if hashes["256K"] == "" || hashes["256K"] != hashes["off"] {
		t.Fatalf("parameters with buckets %s, without %s", hashes["256K"], hashes["off"])
	}
}
