package kerasio_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
	"github.com/meshtrain/meshtrain/nn/kerasio"
	"github.com/meshtrain/meshtrain/nn/onnx"
)

// fixtures is nn/keras's directory of Keras files in every form.
var fixtures = filepath.Join("..", "keras", "testdata")

// TestFixturesGoOutAndBackIn: every model nn/keras's fixtures define
// (ResNet-20 in three forms, the depthwise branches, the text
// classifiers …), with random weights, goes out as TF.js and back in
// through nn/keras and ReadTFJSWeights with the same floats, and has an
// ONNX form. A fixture nn/keras refuses is passed over; one with an
// activation no TF.js-form file names is refused naming it.
func TestFixturesGoOutAndBackIn(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in %s (%v)", fixtures, err)
	}
	read := 0
	for _, f := range files {
		km, err := keras.ReadFile(f)
		if err != nil {
			continue // a fixture of what is refused
		}
		read++
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			m, err := km.Arch.Build(1, 2)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, 3)
			if _, err := onnx.Encode(km.Arch, m); err != nil {
				t.Errorf("ONNX: %v", err)
			}
			dir := t.TempDir()
			if err := kerasio.WriteTFJS(dir, km.Arch, m); err != nil {
				if refused[filepath.Base(f)] != "" && strings.Contains(err.Error(), refused[filepath.Base(f)]) {
					return // an activation no TF.js-form file names, refused by name
				}
				t.Fatal(err)
			}
			path := filepath.Join(dir, kerasio.ModelJSON)
			back, err := keras.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := kerasio.ReadTFJSWeights(path, back)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := back.Arch.Build(2, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := kerasio.Import(back.Arch, fresh, w); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(state(fresh), state(m)) {
				t.Error("the weights read back differ from those written")
			}
		})
	}
	if read < 10 {
		t.Errorf("only %d fixtures read", read)
	}
}

// refused are the fixtures whose TF.js form is refused, and the
// activation the refusal names (see kerasActivations).
var refused = map[string]string{
	"text_classifier_keras3.json": "activation hard_sigmoid: Keras 3's relu6(x + 3)/6",
	"text_layers_tfjs_model.json": "activation gelu_tanh: gelu's tanh approximation",
}

// TestCommittedTFJSWeights reads the weights TF.js itself wrote for
// nn/keras's residual-block fixture (model.save through a file
// handler, "./"-prefixed paths): Export of the model they are imported
// into gives back the file's very floats, weight by weight.
func TestCommittedTFJSWeights(t *testing.T) {
	path := filepath.Join(fixtures, "tfjs_resblock_model.json")
	km, err := keras.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kerasio.ReadTFJSWeights(path, km)
	if err != nil {
		t.Fatal(err)
	}
	m, err := km.Arch.Build(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerasio.Import(km.Arch, m, w); err != nil {
		t.Fatal(err)
	}
	out, err := kerasio.Export(km.Arch, m)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(fixtures, "tfjs_resblock.weights.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var floats int
	for i := range out {
		for j, x := range out[i] {
			floats += len(x.Data)
			if !slices.Equal(x.Data, w[i][j].Data) && !sameSet(x, w[i]) {
				t.Errorf("layer %d weight %s: exported otherwise than read", i, x.Name)
			}
		}
	}
	if 4*floats != len(raw) {
		t.Errorf("%d floats exported, the file holds %d bytes", floats, len(raw))
	}
}

// sameSet reports whether ws holds a weight named as x with x's data.
func sameSet(x kerasio.Weight, ws []kerasio.Weight) bool {
	for _, w := range ws {
		if w.Name == x.Name {
			return slices.Equal(w.Data, x.Data)
		}
	}
	return false
}

func randomize(m nn.Model, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range m.Params() {
		m.Params()[i] = float32(rng.NormFloat64() * 0.3)
	}
	if st, ok := m.(nn.Stateful); ok {
		for _, bt := range st.BufferTensors() {
			for k := range bt.Size() {
				v := float32(rng.NormFloat64() * 0.3)
				if strings.HasSuffix(bt.Name, "running_var") {
					v = 0.5 + float32(rng.Float64())
				}
				st.Buffers()[bt.Offset+k] = v
			}
		}
	}
}

func state(m nn.Model) []float32 {
	out := slices.Clone(m.Params())
	if st, ok := m.(nn.Stateful); ok {
		out = append(out, st.Buffers()...)
	}
	return out
}
