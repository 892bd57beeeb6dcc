package tests

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
	"github.com/meshtrain/meshtrain/nn/kerasio"
)

// TestLaunchStartsFromWeights: launch -n 2 from a TF.js model.json with
// weights (a CNN whose Flatten takes 4 channels, written by kerasio) at a
// learning rate too small to move a float32 ends, on both peers, with
// the file's very parameters, and scores what eval --model-file scores;
// --ignore-weights starts elsewhere.
func TestLaunchStartsFromWeights(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := nn.Architecture{Name: "cnn", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 4, Kernel: 3, Strides: 2, Padding: nn.Same}, nn.Activation{Fn: "relu"}, nn.MaxPooling2D{Size: 2},
		nn.Flatten{}, nn.Dense{Units: 10}, nn.Activation{Fn: "softmax"}}}
	m, err := a.Build(7, 1)
	if err != nil {
		t.Fatal(err)
	}
	// No zero bias, which the smallest step would move.
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range m.Params() {
		m.Params()[i] += float32(0.05 + 0.05*rng.Float64())
	}
	dir := t.TempDir()
	if err := kerasio.WriteTFJS(dir, a, m); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, kerasio.ModelJSON)
	km, err := keras.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kerasio.ReadTFJSWeights(file, km)
	if err != nil {
		t.Fatal(err)
	}
	start, err := km.Arch.Build(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerasio.Import(km.Arch, start, w); err != nil {
		t.Fatal(err)
	}
	want := mirrored.ParamsHash(start.Params())

	r := meshtrain(ctx, nil, "eval", "--model-file", file, "--test-examples", "200", "--json")
	if r.err != nil {
		t.Fatal(r)
	}
	var ev evalJSON
	if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil {
		t.Fatalf("eval's JSON: %v\n%s", err, r)
	}
	for _, ignore := range []bool{false, true} {
		sum := filepath.Join(t.TempDir(), "summary.json")
		args := []string{"launch", "-n", "2", "--model-file", file, "--epochs", "1", "--batch", "32", "--lr", "1e-20",
			"--train-examples", "640", "--test-examples", "200", "--summary", sum}
		if ignore {
			args = append(args, "--ignore-weights")
		}
		r := meshtrain(ctx, nil, args...)
		if r.err != nil {
			t.Fatal(r)
		}
		if said := strings.Contains(r.stdout, "starting from the weights of "+file); said == ignore {
			t.Errorf("--ignore-weights %v: launch says it starts from the weights: %v\n%s", ignore, said, r)
		}
		s := readSummary(t, sum)
		if !s.ParamsIdentical || s.Run == nil {
			t.Fatalf("summary: parameters identical %v, run %v", s.ParamsIdentical, s.Run)
		}
		if started := s.Run.ParamsSHA256 == want; started == ignore {
			t.Errorf("--ignore-weights %v: parameters %s, the file's %s", ignore, s.Run.ParamsSHA256, want)
		}
		if !ignore && s.Run.FinalAccuracy != ev.Accuracy {
			t.Errorf("the run from the weights scores %v, eval --model-file %v", s.Run.FinalAccuracy, ev.Accuracy)
		}
	}
}
