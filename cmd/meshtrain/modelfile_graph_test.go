package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelFileGraphsRefusedBeforeWork: a Functional model meshtrain
// does not read (a shared layer, a nested model, two inputs) or that
// does not fit the data (ResNet-20's 32×32×3 for MNIST) is a usage error
// (exit 2) naming the file, and the layer by index, name and class, from
// train, launch and eval before any work: the data directory named does
// not exist, which the work would hit first.
func TestModelFileGraphsRefusedBeforeWork(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		cmd, file, want string
	}{
		{"train", "shared_layer_keras3.json", `layer 2 "tied" (Dense): called 2 times (a shared layer`},
		{"launch", "nested_model_keras3.json", `layer 1 "features" (Sequential): a Sequential model nested in this one is not supported`},
		{"eval", "two_inputs_tfkeras2.json", "2 inputs (left, right) and 1 output (scores)"},
		// ResNet-20 reads, and is refused for MNIST's shape.
		{"train", "tfjs_resnet20.json", `the model takes inputs of 32×32×3 (layer 0 "image" (InputLayer))`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := kerasFixture(tc.file)
			args := []string{"meshtrain", "--log-level", "error", tc.cmd, "--model-file", path}
			if tc.cmd == "eval" {
				args = append(args, "--checkpoint", missing)
			} else {
				args = append(args, "--data-dir", missing)
			}
			err := newApp().RunContext(context.Background(), args)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--model-file") || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant a usage error (exit 2) naming %s and containing %q", err, path, tc.want)
			}
		})
	}
}
