package kerasio

import (
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/meshtrain/meshtrain/internal/nodetest"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// The TF.js comparisons: models TF.js builds and saves predict in
// meshtrain as model.predict does in TF.js (weights in), and models
// meshtrain writes load in tf.loadLayersModel and predict there as in
// meshtrain (weights out). Both to 1e-4.

const tolerance = 1e-4

// planar reorders n examples of shape s from Keras's H×W×C to nn's
// C×H×W (see nn.Shape); a vector or one channel is unchanged.
func planar(x []float32, s nn.Shape, n int) []float32 {
	if !isImage(s) || s.C == 1 {
		return x
	}
	out := make([]float32, len(x))
	hw := s.H * s.W
	for e := range n {
		src, dst := x[e*s.Size():], out[e*s.Size():]
		for p := range hw {
			for c := range s.C {
				dst[c*hw+p] = src[p*s.C+c]
			}
		}
	}
	return out
}

func predict(t testing.TB, m nn.Model, x []float32, n int) []float32 {
	t.Helper()
	p := m.(nn.Predictor)
	out := make([]float32, n*p.Outputs())
	if err := p.Predict(x, n, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func compare(t testing.TB, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i]-want[i]))/max(1, math.Abs(float64(want[i])))) // relative past 1: scores
	}
	if worst > tolerance || math.IsNaN(worst) {
		t.Errorf("%s: outputs differ by up to %.3g (tolerance %g)\n got %v\nwant %v", what, worst, tolerance, got, want)
	}
	t.Logf("%s: %d outputs (the first %v), largest difference (relative past 1) %.2g", what, len(got), got[:min(4, len(got))], worst)
}

// TestTFJSWeightsIn: TF.js builds a CNN (same padding at strides 1 and
// 2, batch normalization, pooling, a Flatten of several channels, a
// Dense reshaped to an image), a residual graph and a binary MLP, sets
// random weights and saves them; meshtrain reads model.json and its
// weights and predicts what model.predict does.
func TestTFJSWeightsIn(t *testing.T) {
	tfjs := nodetest.Modules(t, "@tensorflow/tfjs")
	dir := t.TempDir()
	nodetest.Run(t, []string{tfjs}, filepath.Join("testdata", "tfjs_build.js"), dir)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("tfjs_build.js wrote no models (%v)", err)
	}
	for _, e := range entries {
		name := e.Name()
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name, ModelJSON)
			km, err := keras.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := ReadTFJSWeights(path, km)
			if err != nil {
				t.Fatal(err)
			}
			m, err := km.Arch.Build(1, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := Import(km.Arch, m, w); err != nil {
				t.Fatal(err)
			}
			var meta struct{ Inputs, Outputs []int }
			b, err := os.ReadFile(filepath.Join(dir, name, "meta.json"))
			if err != nil || json.Unmarshal(b, &meta) != nil {
				t.Fatalf("meta.json: %v", err)
			}
			n := meta.Inputs[0]
			x := planar(nodetest.ReadFloats(t, filepath.Join(dir, name, "inputs.bin")), km.Arch.Input, n)
			compare(t, name, predict(t, m, x, n), nodetest.ReadFloats(t, filepath.Join(dir, name, "predictions.bin")))
		})
	}
}

// TestTFJSWeightsOut: models meshtrain writes (WriteTFJS) load in
// tf.loadLayersModel and predict as meshtrain does.
func TestTFJSWeightsOut(t *testing.T) {
	tfjs := nodetest.Modules(t, "@tensorflow/tfjs")
	// Every model is written first and predicted in one node process:
	// loading TF.js is most of the time a model takes.
	type job struct {
		name string
		mine []float32 // meshtrain's prediction
		y    string    // TF.js's, once node ran
	}
	var jobs []job
	var args []string
	for _, name := range slices.Sorted(maps.Keys(archs)) {
		if _, ok := tfjsLacks[name]; ok {
			continue
		}
		a := archs[name]
		m := randomModel(t, a, 7)
		dir := filepath.Join(t.TempDir(), name)
		if err := WriteTFJS(dir, a, m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 5
		rng := rand.New(rand.NewPCG(8, 9))
		x := testInputs(name, a, n, rng) // channels last, as TF.js takes them
		nodetest.WriteFloats(t, filepath.Join(dir, "x.bin"), x)
		shape, _ := json.Marshal(append([]int{n}, inputDims(a)...))
		jobs = append(jobs, job{name: name, mine: predict(t, m, planar(x, a.Input, n), n), y: filepath.Join(dir, "y.bin")})
		args = append(args, filepath.Join(dir, ModelJSON), filepath.Join(dir, "x.bin"), string(shape), filepath.Join(dir, "y.bin"))
	}
	nodetest.Run(t, []string{tfjs}, filepath.Join("testdata", "tfjs_predict.js"), args...)
	for name, why := range tfjsLacks {
		t.Run(name, func(t *testing.T) { t.Skip(why) })
	}
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			compare(t, j.name, j.mine, nodetest.ReadFloats(t, j.y))
		})
	}
}

// vocabulary is the token ids of the test models that take them (an
// Embedding first), by name.
var vocabulary = map[string]int{}

// testInputs are n examples for the test model name: token ids below its
// vocabulary, or floats in [0, 1), channels last.
func testInputs(name string, a nn.Architecture, n int, rng *rand.Rand) []float32 {
	x := make([]float32, n*a.Input.Size())
	for i := range x {
		if v := vocabulary[name]; v > 0 {
			x[i] = float32(rng.IntN(v))
		} else {
			x[i] = float32(rng.Float64())
		}
	}
	return x
}
