package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKerasGraphFile trains a Functional model from its tf.keras 2 file
// on 2 peers through launch: branches joined by Concatenate,
// BatchNormalization, an Add back to the stem. The peers end with the
// same parameters (and, compared with them, the same moving
// statistics), and a file with a shared layer exits 2 naming it before
// any work.
func TestKerasGraphFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum := filepath.Join(t.TempDir(), "summary.json")
	r := meshtrain(ctx, nil, "launch", "-n", "2", "--model-file", kerasFile(t, "concat_add_tfkeras2.json"), "--epochs", "1", "--batch", "32",
		"--train-examples", "1280", "--test-examples", "500", "--summary", sum)
	if r.err != nil {
		t.Fatal(r)
	}
	for _, want := range []string{"[launch] keras: 4354 parameters, 2 replica(s) × batch 32 (global batch 64), 20 steps per epoch",
		"parameters identical on every peer"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("launch's output lacks %q\n%s", want, r)
		}
	}
	s := readSummary(t, sum)
	checkPeers(t, s, 2, 0.2) // 20 steps of a 4,354-parameter model: above chance (0.1), 0.29 measured
	if s.Run.BuffersSHA256 == "" {
		t.Error("the summary has no buffers hash: the moving statistics were not compared")
	}

	r = meshtrain(ctx, nil, "launch", "-n", "2", "--model-file", kerasFile(t, "shared_layer_keras3.json"), "--epochs", "1")
	want := `layer 2 "tied" (Dense): called 2 times (a shared layer`
	if exitCode(r.err) != 2 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "[launch] rank") {
		t.Errorf("a shared layer: exit %d, want 2 naming the layer before any work\n%s", exitCode(r.err), r)
	}
}
