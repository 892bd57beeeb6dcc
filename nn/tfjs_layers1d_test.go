package nn

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tfjsSeqCase is one case of testdata/tfjs_layers1d.json (written by
// testdata/tfjs_layers1d.js with tfjs-layers 4.22): a layer's spec in nn's
// JSON, and TF.js's layer of the same options with its weights, an
// input and TF.js's output, in Keras's layouts (channels last).
type tfjsSeqCase struct {
	Name    string
	Spec    json.RawMessage
	Input   []int
	X       []float32
	Weights map[string]struct {
		Shape []int
		Data  []float32
	}
	Output []int
	Y      []float32
}

// kerasSeqShape is nn's shape of a Keras shape without its batch: [C] a
// vector, [L, C] a sequence, [H, W, C] an image.
func kerasSeqShape(d []int) Shape {
	switch len(d) {
	case 1:
		return Shape{C: d[0]}
	case 2:
		return Shape{H: 1, W: d[0], C: d[1]}
	}
	return Shape{H: d[0], W: d[1], C: d[2]}
}

// planar reorders n examples of shape s from Keras's channels-last
// layout to nn's planar one, or back with back set.
func planarSeq(v []float32, s Shape, n int, back bool) []float32 {
	if s.vector() {
		return v
	}
	out := make([]float32, len(v))
	p := s.H * s.W
	for e := 0; e < n; e++ {
		for i := 0; i < p; i++ {
			for c := 0; c < s.C; c++ {
				last, first := e*p*s.C+i*s.C+c, e*p*s.C+c*p+i
				if back {
					out[last] = v[first]
				} else {
					out[first] = v[last]
				}
			}
		}
	}
	return out
}

// TestTFJSSequenceLayers: each new layer kind and activation computes what
// TensorFlow.js computes with the same options and weights, to 1e-5,
// once its weights are in the layouts the kinds document (Conv1D's
// kernel [K C F] transposed to weight [F C K]; Embedding's, PReLU's and
// LayerNormalization's as they are) and its input and output planar:
// TF's same padding (the odd step after), causal padding, dilation,
// pooling that averages only the steps inside the input, normalisation
// over the channels at each position, a slope per channel, and TF.js's
// own elu, selu, gelu (erf), gelu_new, swish, softplus, softsign and
// hard sigmoid.
func TestTFJSSequenceLayers(t *testing.T) {
	b, err := os.ReadFile("testdata/tfjs_layers1d.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		GeneratedBy string
		Cases       []tfjsSeqCase
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 20 {
		t.Fatalf("%d cases in the fixture", len(f.Cases))
	}
	const n = 2
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			spec, err := parseLayer(c.Spec)
			if err != nil {
				t.Fatal(err)
			}
			in := kerasSeqShape(c.Input)
			l, out, err := spec.build(in)
			if err != nil {
				t.Fatal(err)
			}
			if out != kerasSeqShape(c.Output) {
				t.Fatalf("output %v, TF.js's %v", out, c.Output)
			}
			w := func(name string) []float32 { return c.Weights[name].Data }
			var params []float32
			switch spec.(type) {
			case Embedding:
				params = w("embeddings")
			case Conv1D:
				k := c.Weights["kernel"]
				kk, ci, fo := k.Shape[0], k.Shape[1], k.Shape[2]
				params = make([]float32, len(k.Data))
				for a := 0; a < kk; a++ {
					for b := 0; b < ci; b++ {
						for o := 0; o < fo; o++ {
							params[(o*ci+b)*kk+a] = k.Data[(a*ci+b)*fo+o]
						}
					}
				}
				params = append(params, w("bias")...)
			case LayerNormalization:
				params = append(append(params, w("gamma")...), w("beta")...)
			case PReLU:
				params = w("alpha")
			}
			if len(params) != l.NumParams() {
				t.Fatalf("%d parameters from TF.js's weights, the layer has %d", len(params), l.NumParams())
			}
			l.Bind(params, make([]float32, len(params)))
			y := make([]float32, n*l.OutSize())
			l.Forward(y, planarSeq(c.X, in, n, false), n)
			y = planarSeq(y, out, n, true)
			for i, want := range c.Y {
				if math.Abs(float64(y[i]-want)) > 1e-5*(1+math.Abs(float64(want))) {
					t.Errorf("output %d: %v, TF.js %v", i, y[i], want)
				}
			}
		})
	}
}

// TestTFJSSequenceFixtureReproduces: where node and @tensorflow/tfjs are
// installed (TFJS_NODE_MODULES, or /tmp/tfjs/node_modules), the
// generator writes the committed fixture again, byte for byte: the
// outputs above are TF.js's, not edited. Elsewhere it is skipped.
func TestTFJSSequenceFixtureReproduces(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	mods := os.Getenv("TFJS_NODE_MODULES")
	if mods == "" {
		mods = "/tmp/tfjs/node_modules"
	}
	if _, err := os.Stat(filepath.Join(mods, "@tensorflow", "tfjs")); err != nil {
		t.Skipf("no @tensorflow/tfjs in %s", mods)
	}
	cmd := exec.Command(node, "tfjs_layers1d.js")
	cmd.Dir = "testdata"
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node tfjs_layers1d.js: %v", err)
	}
	var got string
	for line := range strings.Lines(string(out)) { // TF.js prints a banner first
		if strings.HasPrefix(line, "{") {
			got = line
		}
	}
	want, err := os.ReadFile("testdata/tfjs_layers1d.json")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the generator's output (%d bytes) differs from testdata/tfjs_layers1d.json (%d bytes)", len(got), len(want))
	}
}
