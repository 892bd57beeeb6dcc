package nn

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// tfjsCase is one case of testdata/tfjs_layers.json (written by
// testdata/gen_tfjs_layers.js): a TensorFlow.js layer as nn specs, an
// input, the layer's weights in Keras's layouts and its output, channels
// last.
type tfjsCase struct {
	Name       string
	Specs      []json.RawMessage
	InputShape [3]int `json:"input_shape"`
	Input      []float32
	Weights    []struct {
		Shape  []int
		Values []float32
	}
	OutputShape []int `json:"output_shape"`
	Output      []float32
}

// planar turns an H×W×C example into nn's C×H×W, or back when back.
func planar(x []float32, h, w, c int, back bool) []float32 {
	out := make([]float32, len(x))
	for y := 0; y < h; y++ {
		for i := 0; i < w; i++ {
			for k := 0; k < c; k++ {
				hwc, chw := (y*w+i)*c+k, (k*h+y)*w+i
				if back {
					out[hwc] = x[chw]
				} else {
					out[chw] = x[hwc]
				}
			}
		}
	}
	return out
}

// kerasParams lays a layer's Keras weights out as nn's parameters: a
// kernel [KH KW C F] as [F C KH KW], a depthwise kernel [KH KW C M] as
// [C·M 1 KH KW], a bias as it is.
func kerasParams(t *testing.T, kind string, weights []struct {
	Shape  []int
	Values []float32
}) []float32 {
	var p []float32
	for _, w := range weights {
		if len(w.Shape) != 4 {
			p = append(p, w.Values...)
			continue
		}
		kh, kw, c, f := w.Shape[0], w.Shape[1], w.Shape[2], w.Shape[3]
		out := make([]float32, len(w.Values))
		for ky := 0; ky < kh; ky++ {
			for kx := 0; kx < kw; kx++ {
				for ci := 0; ci < c; ci++ {
					for o := 0; o < f; o++ {
						v := w.Values[((ky*kw+kx)*c+ci)*f+o]
						if kind == "depthwise_conv2d" {
							out[((ci*f+o)*kh+ky)*kw+kx] = v
						} else {
							out[((o*c+ci)*kh+ky)*kw+kx] = v
						}
					}
				}
			}
		}
		p = append(p, out...)
	}
	return p
}

// TestLayersMatchTFJS: the image layers compute what TensorFlow.js's
// compute (its padding, dilation, depthwise channel order, separable
// convolution, cropping, up-sampling, global pooling, rescaling) on the
// same input and weights, to float32 rounding. A SeparableConv2D is
// nn's depthwise convolution then a 1×1 convolution, its depthwise
// kernel the first's weights and its pointwise kernel and bias the
// second's.
func TestLayersMatchTFJS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "tfjs_layers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct{ Cases []tfjsCase }
	if err := json.Unmarshal(b, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.Cases) < 13 {
		t.Fatalf("%d cases in the fixture", len(fixture.Cases))
	}
	for _, tc := range fixture.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			in := Shape{H: tc.InputShape[0], W: tc.InputShape[1], C: tc.InputShape[2]}
			x := planar(tc.Input, in.H, in.W, in.C, false)
			weights := tc.Weights
			for i, raw := range tc.Specs {
				s, err := parseLayer(raw)
				if err != nil {
					t.Fatal(err)
				}
				l, out, err := s.build(in)
				if err != nil {
					t.Fatal(err)
				}
				var mine []struct {
					Shape  []int
					Values []float32
				}
				switch {
				case len(tc.Specs) == 2 && i == 0: // separable: the depthwise kernel
					mine, weights = weights[:1], weights[1:]
				case l.NumParams() > 0:
					mine = weights
				}
				params := kerasParams(t, s.kind(), mine)
				if len(params) != l.NumParams() {
					t.Fatalf("%s: %d parameters from TF.js, %d in nn", s.kind(), len(params), l.NumParams())
				}
				l.Bind(params, make([]float32, len(params)))
				y := make([]float32, l.OutSize())
				l.Forward(y, x, 1)
				x, in = y, out
			}
			want := tc.Output
			if !in.vector() {
				if in.H != tc.OutputShape[0] || in.W != tc.OutputShape[1] || in.C != tc.OutputShape[2] {
					t.Fatalf("output %v, TF.js's %v", in, tc.OutputShape)
				}
				want = planar(tc.Output, in.H, in.W, in.C, false)
			} else if len(tc.OutputShape) != 1 || in.C != tc.OutputShape[0] {
				t.Fatalf("output %v, TF.js's %v", in, tc.OutputShape)
			}
			for i := range want {
				if d := math.Abs(float64(x[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("output %d: %v, TF.js %v", i, x[i], want[i])
				}
			}
		})
	}
}
