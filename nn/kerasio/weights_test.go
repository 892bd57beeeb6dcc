package kerasio

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// randomModel builds a and gives its parameters and buffers random
// values (variances positive), so that no conversion passes by chance.
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

func state(m nn.Model) []float32 {
	out := slices.Clone(m.Params())
	if st, ok := m.(nn.Stateful); ok {
		out = append(out, st.Buffers()...)
	}
	return out
}

// archs are models of every kind with weights or a layout of its own:
// Flatten of a map of several channels before a Dense and a
// BatchNormalization of the vector, a Dense whose output a Reshape
// makes an image, same padding, pooling, and a residual graph.
var archs = map[string]nn.Architecture{
	"cnn": {Name: "cnn", Input: nn.Shape{H: 6, W: 6, C: 2}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 3, Kernel: 3, Strides: 2, Padding: nn.Same,
			KernelInit: &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"}},
		nn.BatchNormalization{}, nn.Activation{Fn: "relu"}, nn.MaxPooling2D{Size: 2, Padding: nn.Same},
		nn.Conv2D{Filters: 4, Kernel: 1, KernelInit: &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "untruncated_normal"},
			BiasInit: &nn.Initializer{Kind: nn.InitConstant, Value: 0.1}},
		nn.AveragePooling2D{Size: 2, Strides: 1},
		nn.Flatten{}, nn.BatchNormalization{NoScale: true}, nn.Dropout{Rate: 0.3},
		nn.Dense{Units: 12, KernelInit: &nn.Initializer{Kind: nn.InitRandomUniform, Min: -0.1, Max: 0.1}},
		nn.Activation{Fn: "tanh"}, nn.Reshape{To: nn.Shape{H: 2, W: 2, C: 3}}, nn.Conv2D{Filters: 2, Kernel: 2},
		nn.Flatten{}, nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}}},
	"mlp": {Name: "mlp", Input: nn.Shape{C: 5}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 4}, nn.Activation{Fn: "sigmoid"}, nn.Dense{Units: 1}, nn.Activation{Fn: "sigmoid"}}},
	"residual": {Name: "res", Input: nn.Shape{H: 4, W: 4, C: 2}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 2, Kernel: 3, Padding: nn.Same}, nn.BatchNormalization{Momentum: 0.9}, nn.Activation{Fn: "relu"},
		nn.Add{}, nn.Flatten{}, nn.Dense{Units: 3}, nn.Activation{Fn: "softmax"}},
		Inputs: [][]int{{-1}, {0}, {1}, {2, -1}, {3}, {4}, {5}}},
}

// TestRoundTrip: Import of Export is the identity, bit for bit, for
// every architecture.
func TestRoundTrip(t *testing.T) {
	for name, a := range archs {
		t.Run(name, func(t *testing.T) {
			m := randomModel(t, a, 3)
			w, err := Export(a, m)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := a.Build(9, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := Import(a, fresh, w); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(state(m), state(fresh)) {
				t.Error("Import(Export(m)) differs from m")
			}
		})
	}
}

// TestBuiltInModels: nn's own models, whose tensors are named (LeNet's
// conv1.weight …) or bare (softmax regression's weight and bias), go out
// and back in.
func TestBuiltInModels(t *testing.T) {
	for _, name := range nn.ModelNames {
		m, err := nn.NewModel(name, 1)
		if err != nil {
			t.Fatal(err)
		}
		a := m.(interface{ Architecture() nn.Architecture }).Architecture()
		w, err := Export(a, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fresh, err := nn.NewModel(name, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := Import(a, fresh, w); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(fresh.Params(), m.Params()) {
			t.Errorf("%s: Import(Export(m)) differs from m", name)
		}
	}
}

// TestFlattenOrderByHand: a 1×2×2 image flattened is (w0 c0, w0 c1, w1
// c0, w1 c1) in Keras and (c0 w0, c0 w1, c1 w0, c1 w1) in nn, so
// Keras's kernel rows k0 k1 k2 k3 are nn's weight k0 k2 k1 k3; and a
// Dense of 4 reshaped to that image has its bias likewise reordered.
func TestFlattenOrderByHand(t *testing.T) {
	a := nn.Architecture{Name: "f", Input: nn.Shape{H: 1, W: 2, C: 2}, Layers: []nn.LayerSpec{
		nn.Flatten{}, nn.Dense{Units: 4}, nn.Reshape{To: nn.Shape{H: 1, W: 2, C: 2}}, nn.Flatten{}, nn.Dense{Units: 2}}}
	m, err := a.Build(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	k1 := Weight{Name: "kernel", Shape: []int{4, 4}, Data: make([]float32, 16)}
	for i := range k1.Data {
		k1.Data[i] = float32(i) // Keras's kernel[r][c] = 4r + c
	}
	b1 := Weight{Name: "bias", Shape: []int{4}, Data: []float32{10, 11, 12, 13}}
	k2 := Weight{Name: "kernel", Shape: []int{4, 2}, Data: []float32{0, 1, 2, 3, 4, 5, 6, 7}}
	b2 := Weight{Name: "bias", Shape: []int{2}, Data: []float32{20, 21}}
	if err := Import(a, m, [][]Weight{nil, {k1, b1}, nil, nil, {k2, b2}}); err != nil {
		t.Fatal(err)
	}
	p := m.Params()
	// Dense 1: nn's weight[o][i] = Keras's kernel[ord(i)][ord(o)], ord = 0 2 1 3.
	ord := []int{0, 2, 1, 3}
	for o := range 4 {
		for i := range 4 {
			if got, want := p[o*4+i], float32(4*ord[i]+ord[o]); got != want {
				t.Errorf("dense 1 weight[%d][%d] = %v, want Keras's kernel[%d][%d] = %v", o, i, got, ord[i], ord[o], want)
			}
		}
	}
	if got := p[16:20]; !slices.Equal(got, []float32{10, 12, 11, 13}) {
		t.Errorf("dense 1 bias %v, want Keras's in nn's order, 10 12 11 13", got)
	}
	// Dense 2: its input is in the image's Keras order again.
	if got, want := p[20:28], []float32{0, 4, 2, 6, 1, 5, 3, 7}; !slices.Equal(got, want) {
		t.Errorf("dense 2 weight %v, want %v", got, want)
	}
}

// TestConvKernelByHand: Keras's kernel [kh kw in out] at (0, 1, 1, 0)
// is nn's weight [out in kh kw] at (0, 1, 0, 1).
func TestConvKernelByHand(t *testing.T) {
	a := nn.Architecture{Name: "c", Input: nn.Shape{H: 3, W: 3, C: 2}, Layers: []nn.LayerSpec{nn.Conv2D{Filters: 3, Kernel: 2}, nn.Flatten{}, nn.Dense{Units: 2}}}
	m := randomModel(t, a, 4)
	w, err := Export(a, m)
	if err != nil {
		t.Fatal(err)
	}
	k := w[0][0]
	if !slices.Equal(k.Shape, []int{2, 2, 2, 3}) {
		t.Fatalf("kernel shape %v, want [2 2 2 3]", k.Shape)
	}
	for _, c := range [][4]int{{0, 1, 1, 0}, {1, 0, 0, 2}, {1, 1, 1, 1}} {
		kh, kw, in, out := c[0], c[1], c[2], c[3]
		keras := k.Data[((kh*2+kw)*2+in)*3+out]
		nnv := m.Params()[((out*2+in)*2+kh)*2+kw]
		if keras != nnv {
			t.Errorf("kernel%v = %v, nn's weight[%d %d %d %d] = %v", c, keras, out, in, kh, kw, nnv)
		}
	}
}

// TestRefused: layouts no weights can reconcile, and wrong weights.
func TestRefused(t *testing.T) {
	img := nn.Shape{H: 2, W: 2, C: 2}
	for _, tc := range []struct {
		name string
		a    nn.Architecture
		want string
	}{
		{"reshape_image", nn.Architecture{Name: "r", Input: img, Layers: []nn.LayerSpec{nn.Reshape{To: nn.Shape{H: 1, W: 4, C: 2}}, nn.Flatten{}, nn.Dense{Units: 2}}},
			"layer 0 (reshape): an image of 2×2×2 reshaped to 1×4×2"},
		{"flatten_to_image", nn.Architecture{Name: "r", Input: img, Layers: []nn.LayerSpec{nn.Flatten{}, nn.Reshape{To: nn.Shape{H: 4, W: 2, C: 1}}, nn.Flatten{}, nn.Dense{Units: 2}}},
			"layer 1 (reshape): a vector made an image of 4×2×1"},
		{"flattened_output", nn.Architecture{Name: "r", Input: img, Layers: []nn.LayerSpec{nn.Conv2D{Filters: 2, Kernel: 1}, nn.Flatten{}, nn.Activation{Fn: "softmax"}}},
			"the model's outputs are a flattened image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.a.Build(1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Export(tc.a, m); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Export: %v, want an error with %q", err, tc.want)
			}
		})
	}
	a := archs["mlp"]
	m := randomModel(t, a, 5)
	good, err := Export(a, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(w [][]Weight) [][]Weight
		want   string
	}{
		{"missing", func(w [][]Weight) [][]Weight { w[2] = w[2][:1]; return w }, "layer 2 (dense): no weight bias given"},
		{"extra", func(w [][]Weight) [][]Weight { w[0] = append(w[0], Weight{Name: "gamma"}); return w }, "layer 0 (dense): weight gamma: the model's layer has no such weight"},
		{"shape", func(w [][]Weight) [][]Weight { w[0][0].Shape = []int{4, 5}; return w }, "layer 0 (dense): weight kernel has shape [4 5]"},
		{"layers", func(w [][]Weight) [][]Weight { return w[:3] }, "weights for 3 layers, the model has 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := make([][]Weight, len(good))
			for i := range good {
				w[i] = slices.Clone(good[i])
			}
			before := state(m)
			if err := Import(a, m, tc.change(w)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Import: %v, want an error with %q", err, tc.want)
			}
			if !slices.Equal(before, state(m)) {
				t.Error("a refused Import changed the model")
			}
		})
	}
}

// TestEveryKindHasARow: every layer kind nn registers has a row in
// rules (the registry's names, from ParseArchitecture's error listing
// them), so a kind merged into nn without one fails here, not in a
// user's export.
func TestEveryKindHasARow(t *testing.T) {
	_, err := nn.ParseArchitecture([]byte(`{"format": "meshtrain-sequential/1", "input": [1], "layers": [{"type": "no such kind"}]}`))
	if err == nil {
		t.Fatal("a layer of no kind: no error")
	}
	list := regexp.MustCompile(`want one of (.*)$`).FindStringSubmatch(err.Error())
	if list == nil {
		t.Fatalf("error %q does not list the kinds", err)
	}
	for _, k := range strings.Split(list[1], ", ") {
		if _, ok := rules[k]; !ok {
			t.Errorf("nn kind %q has no row in rules: add how it stands in Keras", k)
		}
	}
}

// TestInitializersWritten: a spec's initializers are written as Keras
// classes nn/keras reads back to the same distribution, and TF.js loads
// (an untruncated normal variance scaling, which TF.js lacks, as the
// RandomNormal it is for the layer's fans).
func TestInitializersWritten(t *testing.T) {
	he := &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"}
	un := &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "untruncated_normal"}
	one := &nn.Initializer{Kind: nn.InitConstant, Value: 1}
	for _, tc := range []struct {
		init *nn.Initializer
		want *nn.Initializer
	}{
		{he, he},
		{one, one},
		{un, &nn.Initializer{Kind: nn.InitRandomNormal, Stddev: math.Sqrt(2.0 / 18)}}, // fan in 2 channels × 3×3
		{&nn.Initializer{Kind: nn.InitRandomUniform, Min: -0.1, Max: 0.2}, &nn.Initializer{Kind: nn.InitRandomUniform, Min: -0.1, Max: 0.2}},
	} {
		a := nn.Architecture{Name: "i", Input: nn.Shape{H: 4, W: 4, C: 2}, Layers: []nn.LayerSpec{
			nn.Conv2D{Filters: 3, Kernel: 3, KernelInit: tc.init, BiasInit: one}, nn.Flatten{}, nn.Dense{Units: 2}}}
		m := randomModel(t, a, 1)
		dir := t.TempDir()
		if err := WriteTFJS(dir, a, m); err != nil {
			t.Fatal(err)
		}
		km, err := keras.ReadFile(filepath.Join(dir, ModelJSON))
		if err != nil {
			t.Fatal(err)
		}
		c := km.Arch.Layers[0].(nn.Conv2D)
		if c.KernelInit == nil || *c.KernelInit != *tc.want || c.BiasInit == nil || *c.BiasInit != *one {
			t.Errorf("%+v written, read back as kernel %+v, bias %+v; want %+v", *tc.init, c.KernelInit, c.BiasInit, *tc.want)
		}
	}
}
