package nn

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testArchitectures are models of every layer kind and option, with and
// without initializers.
func testArchitectures() []Architecture {
	he := &Initializer{Kind: InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"}
	return append([]Architecture{
		{Name: "lenet", Input: Shape{H: 28, W: 28, C: 1}, Layers: lenetLayers(10)},
		{Name: "softmax", Input: Shape{H: 28, W: 28, C: 1}, Layers: softmaxLayers(10)},
		{Name: "cnn", Input: Shape{H: 28, W: 28, C: 1}, Layers: []LayerSpec{
			Conv2D{Filters: 4, Kernel: 3, Padding: Same, KernelInit: he, BiasInit: &Initializer{Kind: InitConstant, Value: 0.1}},
			Activation{"relu"},
			MaxPooling2D{Size: 2},
			Conv2D{Filters: 6, Kernel: 3, Strides: 2, Init: Glorot, Name: "down"},
			Activation{"tanh"},
			AveragePooling2D{Size: 2, Strides: 1, Padding: Same},
			Flatten{},
			Dropout{Rate: 0.25},
			Dense{Units: 16, KernelInit: &Initializer{Kind: InitRandomUniform, Min: -0.1, Max: 0.2}},
			Activation{"linear"},
			Dense{Units: 10, Init: Torch, KernelInit: &Initializer{Kind: InitTruncatedNormal, Stddev: 0.05}, BiasInit: &Initializer{}},
			Activation{"softmax"},
		}},
		{Name: "mobile", Input: Shape{H: 12, W: 10, C: 3}, Layers: []LayerSpec{
			Rescaling{Scale: 1.0 / 255},
			Normalization{Mean: []float64{0.5, 0.4, 0.3}, Variance: []float64{0.25, 0.2, 0.1}},
			ZeroPadding2D{Top: 1, Bottom: 2, Left: 0, Right: 1},
			Conv2D{Filters: 4, Kernel: 3, KernelW: 2, Strides: 2, StridesW: 1, NoBias: true, Padding: Same},
			DepthwiseConv2D{Kernel: 3, Multiplier: 2, Padding: Same, Dilation: 2, KernelInit: he},
			Conv2D{Filters: 6, Kernel: 1, Name: "pointwise"},
			Cropping2D{Top: 1, Left: 1},
			UpSampling2D{SizeH: 2, SizeW: 3},
			DepthwiseConv2D{Kernel: 2, KernelW: 3, Strides: 2, StridesW: 3, DilationW: 1, NoBias: true, Init: Glorot},
			Conv2D{Filters: 4, Kernel: 3, Dilation: 1, DilationW: 2},
			GlobalAveragePooling2D{},
			Dense{Units: 5},
		}},
		{Name: "keepdims", Input: Shape{H: 6, W: 6, C: 2}, Layers: []LayerSpec{
			Normalization{Mean: []float64{1}, Variance: []float64{2}, Invert: true},
			Conv2D{Filters: 3, Kernel: 3},
			GlobalMaxPooling2D{KeepDims: true},
			Flatten{},
			Dense{Units: 4},
			Activation{"softmax"},
		}},
		{Name: "binary", Input: Shape{C: 48}, Layers: []LayerSpec{
			Reshape{To: Shape{H: 4, W: 4, C: -1}},
			Conv2D{Filters: 2, Kernel: 4, KernelInit: &Initializer{Kind: InitRandomNormal, Mean: 0.01, Stddev: 0.1}},
			Flatten{},
			Reshape{To: Shape{C: -1}},
			Dense{Units: 1},
			Activation{"sigmoid"},
		}},
	}, moreArchitectures...)
}

// TestArchitectureRoundTrip: an Architecture's JSON reads back as the same
// layers (strides of 0 spelled out), which build the same model bit for
// bit; the digest ignores the name and follows every option.
func TestArchitectureRoundTrip(t *testing.T) {
	for _, a := range testArchitectures() {
		t.Run(a.Name, func(t *testing.T) {
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseArchitecture(b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			b2, _ := json.Marshal(back)
			if string(b) != string(b2) {
				t.Errorf("JSON changed on a round trip:\n%s\n%s", b, b2)
			}
			if back.Name != a.Name || back.Input != a.Input || len(back.Layers) != len(a.Layers) {
				t.Fatalf("read back %+v", back)
			}
			orig, err := a.New(3, 1)
			if err != nil {
				t.Fatal(err)
			}
			rebuilt, err := back.New(3, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(orig.Params(), rebuilt.Params()) || orig.Summary() != rebuilt.Summary() && a.Name != "softmax" {
				t.Errorf("rebuilt model differs:\n%s\n%s", orig.Summary(), rebuilt.Summary())
			}
			classes, params, err := back.Check()
			if err != nil || classes != orig.Classes() || params != len(orig.Params()) {
				t.Errorf("Check: %d classes, %d parameters, %v; the model has %d and %d", classes, params, err, orig.Classes(), len(orig.Params()))
			}
			if got := orig.Architecture(); !reflect.DeepEqual(got, a) {
				t.Errorf("Sequential.Architecture() = %+v, want %+v", got, a)
			}
			d, err := a.Digest()
			if err != nil || len(d) != 16 {
				t.Fatalf("digest %q, %v", d, err)
			}
			renamed := back
			renamed.Name = "another"
			if d2, _ := renamed.Digest(); d2 != d {
				t.Errorf("digest changed with the name: %s, %s", d, d2)
			}
		})
	}
}

// TestArchitectureDigestFollowsOptions: changing any one option changes
// the digest; spelling a default out does not.
func TestArchitectureDigestFollowsOptions(t *testing.T) {
	base := Architecture{Name: "m", Input: Shape{H: 8, W: 8, C: 1}, Layers: []LayerSpec{
		Conv2D{Filters: 2, Kernel: 3}, MaxPooling2D{Size: 2}, Flatten{}, Dropout{Rate: 0.5}, Dense{Units: 3}}}
	digest := func(a Architecture) string {
		t.Helper()
		d, err := a.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d0 := digest(base)
	with := func(i int, s LayerSpec) Architecture {
		a := base
		a.Layers = slices.Clone(base.Layers)
		a.Layers[i] = s
		return a
	}
	same := []Architecture{
		with(0, Conv2D{Filters: 2, Kernel: 3, Strides: 1}),
		with(1, MaxPooling2D{Size: 2, Strides: 2}),
		with(0, Conv2D{Filters: 2, Kernel: 3, KernelW: 3, StridesW: 1, Dilation: 1, DilationW: 1}),
	}
	for _, a := range same {
		if d := digest(a); d != d0 {
			t.Errorf("%+v: digest %s, want %s", a.Layers, d, d0)
		}
	}
	other := []Architecture{
		with(0, Conv2D{Filters: 3, Kernel: 3}),
		with(0, Conv2D{Filters: 2, Kernel: 3, Padding: Same}),
		with(0, Conv2D{Filters: 2, Kernel: 3, Init: Glorot}),
		with(0, Conv2D{Filters: 2, Kernel: 3, KernelInit: &Initializer{Kind: InitConstant, Value: 1}}),
		with(0, Conv2D{Filters: 2, Kernel: 3, Name: "c"}),
		with(0, Conv2D{Filters: 2, Kernel: 3, NoBias: true}),
		with(0, Conv2D{Filters: 2, Kernel: 3, KernelW: 2}),
		with(0, Conv2D{Filters: 2, Kernel: 3, StridesW: 2}),
		with(0, Conv2D{Filters: 2, Kernel: 3, Dilation: 2}),
		with(0, Conv2D{Filters: 2, Kernel: 3, DilationW: 2}),
		with(0, DepthwiseConv2D{Kernel: 3}),
		with(1, AveragePooling2D{Size: 2}),
		with(3, Dropout{Rate: 0.25}),
		with(4, Dense{Units: 4}),
		{Name: "m", Input: Shape{H: 8, W: 9, C: 1}, Layers: base.Layers},
	}
	seen := map[string]int{d0: -1}
	for i, a := range other {
		d := digest(a)
		if j, dup := seen[d]; dup {
			t.Errorf("change %d has the digest of change %d: %s", i, j, d)
		}
		seen[d] = i
	}
}

// TestArchitectureJSON: the canonical JSON, spelled out.
func TestArchitectureJSON(t *testing.T) {
	a := Architecture{Name: "tiny", Input: Shape{H: 4, W: 4, C: 1}, Layers: []LayerSpec{
		Conv2D{Filters: 2, Kernel: 3, KernelInit: &Initializer{Kind: InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "uniform"}, BiasInit: &Initializer{}},
		Activation{"relu"}, Flatten{}, Dropout{Rate: 0.5}, Dense{Units: 2, Init: Glorot}, Reshape{To: Shape{C: -1}}, Activation{"softmax"}}}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"format":"meshtrain-sequential/1","name":"tiny","input":[4,4,1],"layers":[` +
		`{"type":"conv2d","filters":2,"kernel":3,"strides":1,"padding":"valid","init":"he",` +
		`"kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"bias_initializer":{"kind":"constant","value":0}},` +
		`{"type":"activation","fn":"relu"},{"type":"flatten"},{"type":"dropout","rate":0.5},{"type":"dense","units":2,"init":"glorot"},` +
		`{"type":"reshape","to":[-1]},{"type":"activation","fn":"softmax"}]}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
}

// TestParseArchitectureErrors: what ParseArchitecture refuses, and how it
// says so; a layer's problem is a *LayerError naming it.
func TestParseArchitectureErrors(t *testing.T) {
	const head = `{"format":"meshtrain-sequential/1","name":"m","input":[8,8,1],"layers":[`
	for _, tc := range []struct {
		name, json, want string
		layer            int // the *LayerError's index, or -1 for none
	}{
		{"not json", `{`, "unexpected end", -1},
		{"format", `{"format":"meshtrain-sequential/9","input":[1],"layers":[]}`, `format "meshtrain-sequential/9"`, -1},
		{"unknown field", `{"format":"meshtrain-sequential/1","input":[1],"layers":[],"extra":1}`, `unknown field "extra"`, -1},
		{"trailing data", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]} {}`, "after top-level value", -1},
		{"bad input", `{"format":"meshtrain-sequential/1","input":[8,8],"layers":[]}`, "want [H, W, C] or [C]", -1},
		{"empty input", `{"format":"meshtrain-sequential/1","input":[0],"layers":[{"type":"dense","units":2,"init":"he"}]}`, "input shape", -1},
		{"unknown type", head + `{"type":"lstm"}]}`, `type "lstm"`, -1},
		{"unknown option", head + `{"type":"flatten","data_format":"channels_last"}]}`, `unknown field "data_format"`, -1},
		{"missing option", head + `{"type":"conv2d","filters":2,"kernel":3}]}`, `layer 0: init ""`, -1},
		{"bad init", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"xavier"}]}`, `init "xavier"`, -1},
		{"initializer fields", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","kernel_initializer":{"kind":"constant","value":1,"stddev":2}}]}`,
			"constant initializer: want the fields value and no other", -1},
		{"initializer kind", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","kernel_initializer":{"kind":"orthogonal"}}]}`, `initializer kind "orthogonal"`, -1},
		{"initializer mode", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan","distribution":"uniform"}}]}`,
			`mode "fan"`, -1},
		{"negative stddev", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","bias_initializer":{"kind":"random_normal","mean":0,"stddev":-1}}]}`,
			"layer 1: random_normal initializer: stddev -1", -1},
		{"overflowing stddev", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","kernel_initializer":{"kind":"random_normal","mean":0,"stddev":1e39}}]}`,
			"random_normal initializer: mean 0, stddev 1e+39: draws reach 6e+39, which overflows float32", -1},
		{"overflowing constant", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","bias_initializer":{"kind":"constant","value":-4e38}}]}`,
			"constant initializer: value -4e+38: draws reach -4e+38, which overflows float32", -1},
		{"overflowing scale", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1e300,"mode":"fan_in","distribution":"uniform"}}]}`,
			"variance_scaling initializer: scale 1e+300: draws reach", -1},
		{"too many layers", head + `{"type":"flatten"},{"type":"dense","units":2,"init":"he"}` + strings.Repeat(`,{"type":"dropout","rate":0.5}`, MaxLayers) + `]}`,
			"layers, more than meshtrain's", -1},
		{"dense on an image", head + `{"type":"dense","units":2,"init":"he"}]}`, "layer 0 (dense): the input is an image", 0},
		{"kernel too large", head + `{"type":"conv2d","filters":2,"kernel":9,"strides":1,"padding":"valid","init":"he"},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (conv2d): kernel 9×9 over 8×8×1", 0},
		{"no classes", head + `{"type":"flatten"},{"type":"dense","units":1,"init":"he"}]}`, "layer 1 (dense): 1 class score", 1},
		{"too many parameters", head + `{"type":"flatten"},{"type":"dense","units":16000000,"init":"he"}]}`, "layer 1 (dense): too large for meshtrain", 1},
		{"too much scratch", head + `{"type":"conv2d","filters":8000000,"kernel":3,"strides":1,"padding":"same","init":"he"}]}`, "layer 0 (conv2d): too large for meshtrain", 0},
		{"padding too large", head + `{"type":"zero_padding2d","top":16777216,"bottom":0,"left":0,"right":0},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (zero_padding2d): too large for meshtrain: an output of", 0},
		{"up-sampling too large", head + `{"type":"up_sampling2d","size_h":16777216,"size_w":2},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (up_sampling2d): too large for meshtrain: an output of", 0},
		{"depth multiplier too large", head + `{"type":"depthwise_conv2d","kernel":3,"strides":1,"multiplier":16777216,"padding":"same","init":"he"},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (depthwise_conv2d): too large for meshtrain: a kernel of 3×3 and a depth multiplier of 16777216", 0},
		{"dilation past the input", head + `{"type":"conv2d","filters":2,"kernel":3,"strides":1,"padding":"valid","init":"he","dilation":4},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (conv2d): kernel 3×3 dilation 4×4 over 8×8×1: a window of 9 does not fit in 8 cells", 0},
		{"normalization statistics", head + `{"type":"normalization","mean":[1,2],"variance":[1,2]},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (normalization): 2 means and 2 variances for 1 channels", 0},
		{"cropping everything", head + `{"type":"cropping2d","top":4,"bottom":4,"left":0,"right":0},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"layer 0 (cropping2d): cropping (4, 4) rows and (0, 0) columns of 8×8×1 leaves nothing", 0},
		{"conv option", head + `{"type":"conv2d","filters":2,"kernel":3,"strides":1,"padding":"valid","init":"he","dilation_w":-1},{"type":"flatten"},{"type":"dense","units":2,"init":"he"}]}`,
			"want each ≥ 0", 0},
		{"no parameters", head + `{"type":"flatten"},{"type":"reshape","to":[4,4,4]},{"type":"flatten"}]}`, "no layer has parameters", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArchitecture([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var le *LayerError
			if got := errors.As(err, &le); got != (tc.layer >= 0) || got && le.Index != tc.layer {
				t.Errorf("error %v: LayerError %v, want layer %d", err, le, tc.layer)
			}
		})
	}
}

// TestInitializers: each kind draws from its distribution for the fans
// it is given, and a layer whose kernel has an initializer still draws
// its biases by its Init.
func TestInitializers(t *testing.T) {
	const fanIn, fanOut = 300, 100
	stats := func(v []float32) (mean, sd, lo, hi float64) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, x := range v {
			mean += float64(x)
			lo, hi = min(lo, float64(x)), max(hi, float64(x))
		}
		mean /= float64(len(v))
		for _, x := range v {
			sd += (float64(x) - mean) * (float64(x) - mean)
		}
		return mean, math.Sqrt(sd / float64(len(v))), lo, hi
	}
	u := func(bound float64) float64 { return bound / math.Sqrt(3) } // a uniform's sd
	for _, tc := range []struct {
		init             Initializer
		mean, sd, lo, hi float64 // lo and hi bound every value
	}{
		{Initializer{}, 0, 0, 0, 0},
		{Initializer{Kind: InitConstant, Value: 1}, 1, 0, 1, 1},
		{Initializer{Kind: InitRandomUniform, Min: -0.05, Max: 0.15}, 0.05, 0.2 / math.Sqrt(12), -0.05, 0.15},
		{Initializer{Kind: InitRandomNormal, Mean: 1, Stddev: 0.5}, 1, 0.5, math.Inf(-1), math.Inf(1)},
		{Initializer{Kind: InitTruncatedNormal, Mean: 0, Stddev: 0.5}, 0, 0.5 * truncatedStddev, -1, 1},
		{Initializer{Kind: InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "uniform"}, 0, u(math.Sqrt(6.0 / (fanIn + fanOut))), -math.Sqrt(6.0 / (fanIn + fanOut)), math.Sqrt(6.0 / (fanIn + fanOut))},
		{Initializer{Kind: InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"}, 0, math.Sqrt(2.0 / fanIn), -2 * math.Sqrt(2.0/fanIn) / truncatedStddev, 2 * math.Sqrt(2.0/fanIn) / truncatedStddev},
		{Initializer{Kind: InitVarianceScaling, Scale: 3, Mode: "fan_out", Distribution: "untruncated_normal"}, 0, math.Sqrt(3.0 / fanOut), math.Inf(-1), math.Inf(1)},
	} {
		t.Run(tc.init.kind()+"_"+tc.init.Distribution, func(t *testing.T) {
			v := make([]float32, 200_000)
			tc.init.fill(rand.New(rand.NewPCG(1, 2)), v, fanIn, fanOut)
			mean, sd, lo, hi := stats(v)
			tol := 0.01 * max(tc.sd, 0.01)
			if math.Abs(mean-tc.mean) > 3*tol || math.Abs(sd-tc.sd) > 3*tol || lo < tc.lo-1e-6 || hi > tc.hi+1e-6 {
				t.Errorf("mean %.5f sd %.5f range [%.4f, %.4f], want mean %.5f sd %.5f within [%.4f, %.4f]", mean, sd, lo, hi, tc.mean, tc.sd, tc.lo, tc.hi)
			}
		})
	}
	// A Dense with only a kernel initializer: Torch's biases, U(±1/√fan_in).
	m, err := NewSequential("d", Shape{C: 400}, 1, 1, Dense{Units: 300, Init: Torch, KernelInit: &Initializer{Kind: InitConstant, Value: 0.5}}, Dense{Units: 2})
	if err != nil {
		t.Fatal(err)
	}
	w, b := m.Params()[:120000], m.Params()[120000:120300]
	if _, sd, lo, hi := stats(w); sd != 0 || lo != 0.5 || hi != 0.5 {
		t.Errorf("weights: sd %v range [%v, %v], want all 0.5", sd, lo, hi)
	}
	if _, _, lo, hi := stats(b); lo >= 0 || hi <= 0 || hi > 0.05 || lo < -0.05 {
		t.Errorf("biases in [%v, %v], want Torch's U(±0.05)", lo, hi)
	}
}

// FuzzParseArchitecture: whatever the bytes, ParseArchitecture returns an
// error or an Architecture whose JSON reads back the same, and that
// Build builds whenever Check passed it (a chain or a graph).
func FuzzParseArchitecture(f *testing.F) {
	for _, a := range testArchitectures() {
		b, err := json.Marshal(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"format":"meshtrain-sequential/1","input":[8],"layers":[{"type":"dense","units":2,"init":"torch"}]}`))
	f.Add([]byte(`{"format":"meshtrain-graph/1","input":[4,4,2],"layers":[{"type":"conv2d","filters":2,"kernel":3,"strides":1,"padding":"same","init":"he","inputs":[-1]},` +
		`{"type":"batch_normalization","momentum":0.99,"epsilon":0.001,"center":true,"scale":true,"inputs":[0]},{"type":"add","inputs":[1,-1]},` +
		`{"type":"flatten","inputs":[2]},{"type":"dense","units":3,"init":"glorot","inputs":[3]}]}`))
	// The merges: Concatenate on each axis, broadcasts, Subtract.
	f.Add([]byte(`{"format":"meshtrain-graph/1","input":[2,3,2],"layers":[{"type":"conv2d","filters":2,"kernel":1,"strides":1,"padding":"valid","init":"he","inputs":[-1]},` +
		`{"type":"concatenate","axis":-1,"inputs":[0,-1]},{"type":"concatenate","axis":1,"inputs":[1,1]},{"type":"concatenate","axis":2,"inputs":[2,2]},` +
		`{"type":"flatten","inputs":[3]},{"type":"dense","units":4,"init":"glorot","inputs":[4]},{"type":"multiply","inputs":[3,5]},` +
		`{"type":"dense","units":1,"init":"glorot","inputs":[4]},{"type":"subtract","inputs":[6,7]},{"type":"maximum","inputs":[8,7,8]},` +
		`{"type":"minimum","inputs":[8,9]},{"type":"average","inputs":[10,9]},{"type":"flatten","inputs":[11]},{"type":"dense","units":3,"init":"glorot","inputs":[12]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseArchitecture(b)
		if err != nil {
			return
		}
		j, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("an architecture read cannot be written: %v", err)
		}
		back, err := ParseArchitecture(j)
		if err != nil {
			t.Fatalf("its JSON does not read back: %v\n%s", err, j)
		}
		if j2, _ := json.Marshal(back); string(j2) != string(j) {
			t.Fatalf("JSON changed on a round trip:\n%s\n%s", j, j2)
		}
		if _, params, _ := a.Check(); params <= 1<<20 {
			m, err := a.Build(1, 1)
			if err != nil {
				t.Fatalf("Check passed it, Build refuses it: %v", err)
			}
			// A small model takes a training step (every kernel's
			// indexing, the merges' broadcasts among them).
			if buf, err := a.Buffers(2); err == nil && params <= 1<<14 && buf.Activations+buf.Scratch <= 1<<18 {
				if _, err := m.ForwardBackward(make([]float32, 2*m.InputDim()), []int32{0, 1}, 2); err != nil {
					t.Fatalf("a model that builds does not train: %v", err)
				}
			}
		}
	})
}
