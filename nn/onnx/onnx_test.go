package onnx

import (
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/meshtrain/meshtrain/internal/nodetest"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/kerasio"
)

// archs are models of every kind nn has: same padding at strides 1 and
// 2 (the odd cell after), pooling of both kinds with padding, batch
// normalization of an image and of a vector (without scale), a Flatten
// of several channels, a Dense reshaped to an image, a residual Add, a
// binary model, a model ending in scores.
var archs = map[string]nn.Architecture{
	"cnn": {Name: "cnn", Input: nn.Shape{H: 7, W: 6, C: 2}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 3, Kernel: 3, Strides: 2, Padding: nn.Same}, nn.BatchNormalization{}, nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2, Padding: nn.Same}, nn.Conv2D{Filters: 4, Kernel: 1}, nn.AveragePooling2D{Size: 2, Strides: 1, Padding: nn.Same},
		nn.Flatten{}, nn.BatchNormalization{NoScale: true}, nn.Dropout{Rate: 0.3},
		nn.Dense{Units: 12}, nn.Activation{Fn: "tanh"}, nn.Reshape{To: nn.Shape{H: 2, W: 2, C: 3}}, nn.Conv2D{Filters: 2, Kernel: 2},
		nn.Flatten{}, nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}}},
	"mlp": {Name: "mlp", Input: nn.Shape{C: 5}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 4}, nn.Activation{Fn: "sigmoid"}, nn.Dense{Units: 1}, nn.Activation{Fn: "sigmoid"}}},
	"scores": {Name: "scores", Input: nn.Shape{H: 4, W: 4, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 2, Kernel: 3}, nn.Activation{Fn: "relu"}, nn.Flatten{}, nn.Dense{Units: 3}}},
	"residual": {Name: "res", Input: nn.Shape{H: 4, W: 4, C: 2}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 2, Kernel: 3, Padding: nn.Same}, nn.BatchNormalization{Momentum: 0.9, Epsilon: 1e-5}, nn.Activation{Fn: "relu"},
		nn.Add{}, nn.Flatten{}, nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}},
		Inputs: [][]int{{-1}, {0}, {1}, {2, -1}, {3}, {4}, {5}}},
}

func randomModel(t testing.TB, a nn.Architecture, seed uint64) nn.Model {
	t.Helper()
	m, err := a.Build(int64(seed), 2)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	// The initial values (Keras's initializers, which keep a deep
	// network's outputs from saturating) and noise, so that no bias or γ
	// is its constant.
	for i := range m.Params() {
		m.Params()[i] += float32(rng.NormFloat64() * 0.1)
	}
	if st, ok := m.(nn.Stateful); ok {
		for _, bt := range st.BufferTensors() {
			for k := range bt.Size() {
				v := float32(rng.NormFloat64() * 0.1)
				if strings.HasSuffix(bt.Name, "running_var") {
					v = 1 + float32(rng.Float64())
				}
				st.Buffers()[bt.Offset+k] = v
			}
		}
	}
	return m
}

// TestEncodeStructure reads the model back with protowire: one graph of
// the expected operators in order, every parameter an initializer.
func TestEncodeStructure(t *testing.T) {
	a := archs["scores"]
	m := randomModel(t, a, 1)
	b, err := Encode(a, m)
	if err != nil {
		t.Fatal(err)
	}
	graph := field(t, b, modelGraph)
	if len(graph) != 1 {
		t.Fatalf("%d graphs, want 1", len(graph))
	}
	var ops []string
	for _, n := range field(t, graph[0], graphNode) {
		ops = append(ops, string(field(t, n, nodeOpType)[0]))
	}
	if want := []string{"Transpose", "Conv", "Relu", "Flatten", "Gemm", "Identity"}; !slices.Equal(ops, want) {
		t.Errorf("operators %v, want %v", ops, want)
	}
	floats := 0
	for _, init := range field(t, graph[0], graphInitializer) {
		floats += len(field(t, init, tensorRawData)[0]) / 4
	}
	if floats != len(m.Params()) {
		t.Errorf("initializers hold %d floats, the model has %d parameters", floats, len(m.Params()))
	}
}

// field returns the values of a length-delimited field of a message.
func field(t *testing.T, b []byte, num protowire.Number) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(l))
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			t.Fatalf("field %d: %v", n, protowire.ParseError(l))
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			out = append(out, v)
		}
		b = b[l:]
	}
	return out
}

// TestOnnxruntime: onnxruntime-web runs the models meshtrain writes and
// predicts what nn.Predictor does, to 1e-4.
func TestOnnxruntime(t *testing.T) {
	ort := nodetest.Modules(t, "onnxruntime-web")
	// Every model is written first and run in one node process: starting
	// onnxruntime is most of the time a model takes.
	type job struct {
		name string
		want []float32
		y    string
	}
	var jobs []job
	var args []string
	dir := t.TempDir()
	for _, name := range slices.Sorted(maps.Keys(archs)) {
		a := archs[name]
		m := randomModel(t, a, 3)
		b, err := Encode(a, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		path := filepath.Join(dir, name+".onnx")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		n := 6
		rng := rand.New(rand.NewPCG(4, 5))
		x := testInputs(name, a, n, rng) // channels last, the model's input
		xPath, yPath := filepath.Join(dir, name+".x.bin"), filepath.Join(dir, name+".y.bin")
		nodetest.WriteFloats(t, xPath, x)
		dims := []int{n, a.Input.C}
		switch {
		case kerasio.SequenceInput(a):
			dims = []int{n, a.Input.W, a.Input.C}
		case image(a.Input):
			dims = []int{n, a.Input.H, a.Input.W, a.Input.C}
		}
		shape, _ := json.Marshal(dims)
		p := m.(nn.Predictor)
		want := make([]float32, n*p.Outputs())
		if err := p.Predict(planar(x, a.Input, n), n, want); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jobs = append(jobs, job{name: name, want: want, y: yPath})
		args = append(args, path, xPath, string(shape), yPath)
	}
	nodetest.Run(t, []string{ort}, filepath.Join("testdata", "ort_predict.js"), args...)
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			got, want := nodetest.ReadFloats(t, j.y), j.want
			if len(got) != len(want) {
				t.Fatalf("onnxruntime gave %d outputs, meshtrain %d", len(got), len(want))
			}
			worst := 0.0
			for i := range got {
				worst = max(worst, math.Abs(float64(got[i]-want[i]))/max(1, math.Abs(float64(want[i])))) // relative past 1: scores
			}
			if !(worst <= 1e-4) {
				t.Errorf("outputs differ by up to %.3g\nonnxruntime %v\n   meshtrain %v", worst, got, want)
			}
			t.Logf("%s: %d outputs (the first %v), largest difference (relative past 1) %.2g", j.name, len(got), got[:min(4, len(got))], worst)
		})
	}
}

func planar(x []float32, s nn.Shape, n int) []float32 {
	if !image(s) || s.C == 1 {
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

// TestEveryKindHasAnOp: every layer kind nn registers (listed by
// ParseArchitecture's error) has a row in ops.
func TestEveryKindHasAnOp(t *testing.T) {
	_, err := nn.ParseArchitecture([]byte(`{"format": "meshtrain-sequential/1", "input": [1], "layers": [{"type": "no such kind"}]}`))
	_, list, ok := strings.Cut(err.Error(), "want one of ")
	if !ok {
		t.Fatalf("error %q does not list the kinds", err)
	}
	for _, k := range strings.Split(list, ", ") {
		if _, ok := ops[k]; !ok {
			t.Errorf("nn kind %q has no row in ops: add the ONNX nodes it becomes", k)
		}
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
