package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestSequentialShapes: each layer's output shape is inferred from the
// input as Keras infers it (valid and same padding, strides, pool windows
// side by side by default), and the parameters are counted per layer.
func TestSequentialShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  Shape
		layers []LayerSpec
		outs   []string
		params int
	}{
		{"lenet", Shape{H: 28, W: 28, C: 1}, lenetLayers(10),
			[]string{"28×28×6", "14×14×6", "14×14×6", "10×10×16", "5×5×16", "5×5×16", "400", "120", "120", "84", "84", "10"}, 61706},
		{"strides_and_padding", Shape{H: 28, W: 28, C: 3}, []LayerSpec{
			Conv2D{Filters: 8, Kernel: 3, Strides: 2, Padding: Same}, // ⌈28/2⌉
			Conv2D{Filters: 4, Kernel: 3, Strides: 2},                // (14−3)/2+1
			MaxPooling2D{Size: 2, Padding: Same},                     // ⌈6/2⌉
			AveragePooling2D{Size: 3, Strides: 1, Padding: Same},     // 3
			MaxPooling2D{Size: 2, Strides: 1},                        // 3−2+1
			Flatten{},
			Dropout{Rate: 0.5},
			Dense{Units: 3},
			Activation{"softmax"},
		}, []string{"14×14×8", "6×6×4", "3×3×4", "3×3×4", "2×2×4", "16", "16", "3", "3"},
			8*3*9 + 8 + 4*8*9 + 4 + 16*3 + 3},
		{"reshape_a_vector", Shape{C: 48}, []LayerSpec{
			Reshape{To: Shape{H: 4, W: 4, C: -1}},
			Conv2D{Filters: 2, Kernel: 4},
			Flatten{},
			Dense{Units: 1},
			Activation{"sigmoid"},
		}, []string{"4×4×3", "1×1×2", "2", "1", "1"}, 2*3*16 + 2 + 2 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewSequential(tc.name, tc.input, 1, 1, tc.layers...)
			if err != nil {
				t.Fatal(err)
			}
			var outs []string
			for _, s := range m.outs {
				outs = append(outs, s.String())
			}
			if !slices.Equal(outs, tc.outs) {
				t.Errorf("output shapes\n got %v\nwant %v", outs, tc.outs)
			}
			if len(m.Params()) != tc.params || m.InputDim() != tc.input.Size() {
				t.Errorf("%d parameters and %d inputs, want %d and %d", len(m.Params()), m.InputDim(), tc.params, tc.input.Size())
			}
		})
	}
}

// TestSequentialErrors: a shape a layer cannot take, a bad option or a
// model that does not end in class scores is an error naming the layer's
// index and kind (not a panic).
func TestSequentialErrors(t *testing.T) {
	img := Shape{H: 6, W: 6, C: 1}
	head := []LayerSpec{Flatten{}, Dense{Units: 3}}
	with := func(ls ...LayerSpec) []LayerSpec { return append(ls, head...) }
	for _, tc := range []struct {
		name   string
		input  Shape
		shards int
		layers []LayerSpec
		want   string
	}{
		{"kernel larger than input", img, 0, with(Conv2D{Filters: 2, Kernel: 3}, Conv2D{Filters: 2, Kernel: 5}), "layer 1 (conv2d): kernel 5×5 over 4×4×2"},
		{"no filters", img, 0, with(Conv2D{Kernel: 3}), "layer 0 (conv2d): 0 filters"},
		{"negative stride", img, 0, with(Conv2D{Filters: 1, Kernel: 3, Strides: -1}), "layer 0 (conv2d)"},
		{"bad padding", img, 0, with(Conv2D{Filters: 1, Kernel: 3, Padding: 7}), "padding Padding(7)"},
		{"conv on a vector", Shape{C: 36}, 0, with(Conv2D{Filters: 1, Kernel: 3}), "layer 0 (conv2d): it takes an H×W×C image"},
		{"pool larger than input", img, 0, with(MaxPooling2D{Size: 7}), "layer 0 (max_pooling2d): pool 7×7 over 6×6×1"},
		{"pool on a vector", Shape{C: 36}, 0, with(AveragePooling2D{Size: 2}), "layer 0 (average_pooling2d)"},
		{"dense on an image", img, 0, []LayerSpec{Dense{Units: 3}}, "layer 0 (dense): the input is an image, 6×6×1: put a Flatten before it"},
		{"no units", img, 0, []LayerSpec{Flatten{}, Dense{}}, "layer 1 (dense): 0 units"},
		{"softmax on an image", img, 0, with(Activation{"softmax"}), "layer 0 (activation softmax): softmax takes a vector"},
		{"unknown activation", img, 0, with(Activation{"mish"}), `layer 0 (activation mish): unknown function "mish"`},
		{"dropout rate 1", img, 0, with(Dropout{Rate: 1}), "layer 0 (dropout): rate 1"},
		{"dropout rate NaN", img, 0, with(Dropout{Rate: math.NaN()}), "layer 0 (dropout)"},
		{"reshape to another size", img, 0, with(Reshape{To: Shape{H: 5, W: 5, C: 1}}), "layer 0 (reshape): 6×6×1 (36 floats) cannot become 5×5×1"},
		{"reshape with two −1", img, 0, with(Reshape{To: Shape{H: -1, W: -1, C: 1}}), "at most one size may be −1"},
		{"reshape that does not divide", img, 0, with(Reshape{To: Shape{H: 5, W: -1, C: 1}}), "does not divide"},
		{"ends in an image", img, 0, []LayerSpec{Conv2D{Filters: 2, Kernel: 3}}, "layer 0 (conv2d): the model ends in an image"},
		{"one class score", img, 0, []LayerSpec{Flatten{}, Dense{Units: 1}}, "layer 1 (dense): 1 class score"},
		{"sigmoid after 3 outputs", img, 0, append(with(), Activation{"sigmoid"}), "layer 2 (activation sigmoid): sigmoid after 3 outputs"},
		{"softmax after 1 output", img, 0, []LayerSpec{Flatten{}, Dense{Units: 1}, Activation{"softmax"}}, "layer 2 (activation softmax): 1 class score"},
		{"no layers", img, 0, nil, "no layers"},
		{"no parameters", Shape{C: 4}, 0, []LayerSpec{Activation{"relu"}}, "no layer has parameters"},
		{"a nil spec", img, 0, []LayerSpec{Flatten{}, nil, Dense{Units: 2}}, "layer 1 is a nil LayerSpec"},
		{"a name twice", img, 0, []LayerSpec{Flatten{}, Dense{Units: 4, Name: "fc"}, Dense{Units: 2, Name: "fc"}}, `layer 2 (dense): name "fc" is layer 1's too`},
		{"a name with a dot", img, 0, []LayerSpec{Flatten{}, Dense{Units: 2, Name: "a.b"}}, "cannot contain a dot"},
		{"an index for a name", img, 0, []LayerSpec{Flatten{}, Dense{Units: 4, Name: "2"}, Dense{Units: 2}}, `layer 2 (dense): name "2" is layer 1's too`},
		{"negative shards", img, -1, head, "-1 batch shards"},
		{"empty input", Shape{H: 3}, 0, head, "input shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSequential("m", tc.input, 1, tc.shards, tc.layers...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestSequentialTensors: tensors are named as torch.nn.Sequential names
// them, "<index>.weight" counting the layers without parameters, unless a
// layer's Name gives the prefix; shapes are PyTorch's (OIHW, out×in); and
// they tile the parameter vector in order.
func TestSequentialTensors(t *testing.T) {
	m, err := NewSequential("m", Shape{H: 8, W: 8, C: 2}, 1, 1,
		Conv2D{Filters: 4, Kernel: 3},
		Activation{"relu"},
		MaxPooling2D{Size: 2},
		Conv2D{Filters: 5, Kernel: 3, Name: "features"},
		Flatten{},
		Dropout{Rate: 0.1},
		Dense{Units: 6},
		Activation{"tanh"},
		Dense{Units: 3},
	)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	off := 0
	for _, p := range m.Tensors() {
		got = append(got, fmt.Sprintf("%s %v", p.Name, p.Shape))
		if p.Offset != off {
			t.Errorf("%s at offset %d, want %d", p.Name, p.Offset, off)
		}
		off += p.Size()
	}
	want := []string{"0.weight [4 2 3 3]", "0.bias [4]", "features.weight [5 4 3 3]", "features.bias [5]",
		"6.weight [6 5]", "6.bias [6]", "8.weight [3 6]", "8.bias [3]"}
	if !slices.Equal(got, want) || off != len(m.Params()) {
		t.Errorf("tensors\n got %v\nwant %v (covering %d of %d floats)", got, want, off, len(m.Params()))
	}
}

// TestFusedMatchesGeneric: LeNet-5 with its conv → pool → ReLU stages
// fused (nn's model) and as separate layers (run in chunks, with the
// listed weight gradient) start from the same parameters and compute the
// same loss, Evaluate figures and gradients, to rounding; so do the
// textbook order (ReLU before the pooling), which fuses too, and a model
// whose layers cannot fuse.
func TestFusedMatchesGeneric(t *testing.T) {
	textbook := lenetLayers(10)
	textbook[1], textbook[2] = textbook[2], textbook[1]
	textbook[4], textbook[5] = textbook[5], textbook[4]
	// Convolutions without a bias fuse too, their bias zeros of their own.
	// A dilated convolution does not fuse: its stage runs as three layers.
	dilated := lenetLayers(10)
	c := dilated[0].(Conv2D)
	c.Dilation = 2
	dilated[0] = c
	noBias := lenetLayers(10)
	for i, l := range noBias {
		if c, ok := l.(Conv2D); ok {
			c.NoBias = true
			noBias[i] = c
		}
	}
	for _, tc := range []struct {
		name   string
		layers []LayerSpec
		fused  int
	}{{"lenet", lenetLayers(10), 2}, {"textbook_order", textbook, 2}, {"no_bias", noBias, 2}, {"dilated_first", dilated, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 37
			x, labels := testBatch(4, n, 784, 10)
			var ms [2]*Sequential
			for i, opt := range []seqOptions{{}, {unfused: true}} {
				m, err := newSequential("lenet", Shape{H: 28, W: 28, C: 1}, 8, 2, opt, tc.layers)
				if err != nil {
					t.Fatal(err)
				}
				ms[i] = m
			}
			f, g := ms[0], ms[1]
			if len(f.fused) != tc.fused || len(g.fused) != 0 || len(g.shards[0].chunkers) != 6 {
				t.Fatalf("fused stages at %v and %v, %d layers in chunks", f.fused, g.fused, len(g.shards[0].chunkers))
			}
			if !slices.Equal(f.Params(), g.Params()) {
				t.Fatal("different initial parameters")
			}
			lf, err := f.ForwardBackward(x, labels, n)
			if err != nil {
				t.Fatal(err)
			}
			lg, _ := g.ForwardBackward(x, labels, n)
			if math.Abs(lf-lg) > 1e-6*lf {
				t.Errorf("loss: fused %v, generic %v", lf, lg)
			}
			for i := range f.Grads() {
				a, b := float64(f.Grads()[i]), float64(g.Grads()[i])
				if math.Abs(a-b) > 1e-5+1e-4*math.Abs(a) {
					t.Fatalf("grad %d: fused %v, generic %v", i, a, b)
				}
			}
			ef, cf, _ := f.Evaluate(x, labels, n)
			eg, cg, _ := g.Evaluate(x, labels, n)
			if math.Abs(ef-eg) > 1e-6*ef || cf != cg {
				t.Errorf("Evaluate: fused %v %d, generic %v %d", ef, cf, eg, cg)
			}
		})
	}
}

// gradCheck compares a model's gradient with central finite differences
// of loss along the gradient's direction and on its largest coordinates
// and a sample (as TestModelGradients does), skipping coordinates whose
// quotients at two steps disagree (a kink), at most a quarter of them.
func gradCheck(t *testing.T, m Model, g []float32, loss func() float64) {
	t.Helper()
	gradCheckSteps(t, m, g, loss, 1e-3)
}

// gradCheckSteps is gradCheck with steps of eps and eps/2 on each
// coordinate for each eps in steps, a coordinate passing at the first
// step where it has no kink: a model with many kinks (Maximum's ties)
// tries a smaller step where a larger one crossed one, and a larger
// where a smaller one drowns a small gradient in float32's rounding.
func gradCheckSteps(t *testing.T, m Model, g []float32, loss func() float64, steps ...float32) {
	t.Helper()
	p := m.Params()
	quotient := func(v []float32, eps float32) float64 {
		orig := slices.Clone(p)
		defer copy(p, orig)
		for i := range p {
			p[i] = orig[i] + eps*v[i]
		}
		up := loss()
		for i := range p {
			p[i] = orig[i] - eps*v[i]
		}
		down := loss()
		return (up - down) / (2 * float64(eps))
	}
	var norm, gg float64
	for _, a := range g {
		norm += float64(a) * float64(a)
	}
	dir := make([]float32, len(g))
	for i, a := range g {
		dir[i] = float32(float64(a) / math.Sqrt(norm))
		gg += float64(dir[i]) * float64(a)
	}
	if num := quotient(dir, 1e-3); math.Abs(num-gg) > 0.01*math.Abs(num)+1e-4 {
		t.Errorf("along the gradient: %.6g, finite difference %.6g", gg, num)
	}
	idx := make([]int, len(g))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return -cmpAbs(g[a], g[b]) })
	rng := rand.New(rand.NewPCG(3, 5))
	coords := idx[:min(20, len(idx))]
	for range 20 {
		coords = append(coords, rng.IntN(len(g)))
	}
	skipped := 0
	e := make([]float32, len(g))
	for _, i := range coords {
		e[i] = 1
		kink, bad := true, ""
		for _, eps := range steps {
			q1, q2 := quotient(e, eps), quotient(e, eps/2)
			if math.Abs(q1-q2) > 0.05*math.Abs(q1)+1e-4 {
				continue
			}
			kink = false
			if math.Abs(q2-float64(g[i])) > 0.02*math.Abs(q2)+1e-4 {
				bad = fmt.Sprintf("param %d: gradient %.6g, finite difference %.6g (step %g)", i, g[i], q2, eps)
				continue
			}
			bad = ""
			break
		}
		e[i] = 0
		if kink {
			skipped++
		} else if bad != "" {
			t.Error(bad)
		}
	}
	if skipped > len(coords)/4 {
		t.Errorf("%d of %d coordinates skipped as kinks", skipped, len(coords))
	}
}

// TestSequentialGradients checks whole Sequentials' gradients against
// finite differences of their mean loss: strided and same-padded
// convolutions, both poolings, tanh, dropout (its masks fixed by SetStep)
// and the fused softmax cross-entropy; a sigmoid binary classifier; a
// softmax after a linear activation.
func TestSequentialGradients(t *testing.T) {
	for _, tc := range []struct {
		name    string
		input   Shape
		classes int
		layers  []LayerSpec
	}{
		{"conv_pool_dropout_softmax", Shape{H: 12, W: 12, C: 2}, 4, []LayerSpec{
			Conv2D{Filters: 4, Kernel: 3, Strides: 2, Padding: Same},
			Activation{"tanh"},
			AveragePooling2D{Size: 2, Padding: Same},
			Conv2D{Filters: 5, Kernel: 2, Padding: Same},
			MaxPooling2D{Size: 2},
			Flatten{},
			Dropout{Rate: 0.25},
			Dense{Units: 4},
			Activation{"softmax"},
		}},
		// The Keras CNN's stages at a small size: the second convolution
		// (16 input channels, 3×3, fused with its ReLU and max-pooling)
		// runs its backward pass channels last on AVX-512 (conv_hwc.go).
		{"keras_cnn_small", Shape{H: 9, W: 8, C: 1}, 3, []LayerSpec{
			Conv2D{Filters: 16, Kernel: 3, Padding: Same},
			Activation{"relu"},
			Conv2D{Filters: 6, Kernel: 3},
			Activation{"relu"},
			MaxPooling2D{Size: 2},
			Dropout{Rate: 0.25},
			Flatten{},
			Dense{Units: 8},
			Activation{"relu"},
			Dense{Units: 3},
			Activation{"softmax"},
		}},
		// A MobileNet-like chain of the image layers of Keras's starting
		// models, each with parameters in its part of the batch.
		{"mobile_small", Shape{H: 7, W: 6, C: 2}, 3, []LayerSpec{
			Rescaling{Scale: 0.5, Offset: 0.1},
			Normalization{Mean: []float64{0.2, -0.1}, Variance: []float64{1.5, 0.8}},
			ZeroPadding2D{Top: 1, Bottom: 0, Left: 1, Right: 1},
			Conv2D{Filters: 4, Kernel: 3, KernelW: 2, Strides: 2, StridesW: 1, Padding: Same, NoBias: true},
			Activation{"tanh"},
			DepthwiseConv2D{Kernel: 3, Multiplier: 2, Padding: Same},
			Activation{"tanh"},
			Conv2D{Filters: 5, Kernel: 1},
			UpSampling2D{SizeH: 2, SizeW: 1},
			Cropping2D{Top: 1, Right: 1},
			Conv2D{Filters: 4, Kernel: 2, Dilation: 2, Padding: Same},
			GlobalAveragePooling2D{},
			Dense{Units: 3},
			Activation{"softmax"},
		}},
		{"binary_sigmoid", Shape{H: 6, W: 5, C: 1}, 2, []LayerSpec{
			Flatten{}, Dense{Units: 8}, Activation{"sigmoid"}, Dense{Units: 1}, Activation{"sigmoid"},
		}},
		{"linear_logits", Shape{C: 10}, 3, []LayerSpec{
			Dense{Units: 6}, Activation{"relu"}, Dense{Units: 3}, Activation{"linear"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewSequential(tc.name, tc.input, 5, 2, tc.layers...)
			if err != nil {
				t.Fatal(err)
			}
			if m.Classes() != tc.classes {
				t.Fatalf("%d classes, want %d", m.Classes(), tc.classes)
			}
			const n = 6
			x, labels := testBatch(9, n, m.InputDim(), m.Classes())
			loss := func() float64 {
				m.SetStep(1, 2, 3)
				l, err := m.ForwardBackward(x, labels, n)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			loss()
			gradCheck(t, m, slices.Clone(m.Grads()), loss)
		})
	}
}

// TestDropout: masks depend only on the seed and (rank, epoch, step): the
// same step gives the same loss and gradient however the batch is split
// into shards, another rank or step another one; without SetStep each
// ForwardBackward is the next step; Evaluate does not drop; and the
// share dropped is the rate.
func TestDropout(t *testing.T) {
	layers := []LayerSpec{Flatten{}, Dense{Units: 64}, Activation{"relu"}, Dropout{Rate: 0.4}, Dense{Units: 5}}
	build := func(shards int, ls []LayerSpec) *Sequential {
		m, err := NewSequential("d", Shape{H: 4, W: 4, C: 1}, 11, shards, ls...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const n = 23
	x, labels := testBatch(2, n, 16, 5)
	step := func(m *Sequential, rank, epoch, s int) (float64, []float32) {
		m.SetStep(rank, epoch, s)
		l, err := m.ForwardBackward(x, labels, n)
		if err != nil {
			t.Fatal(err)
		}
		return l, slices.Clone(m.Grads())
	}
	m := build(2, layers)
	l0, g0 := step(m, 1, 2, 3)
	if l, g := step(m, 1, 2, 3); l != l0 || !slices.Equal(g, g0) {
		t.Error("the same step twice: different results")
	}
	for _, shards := range []int{1, 3} {
		l, g := step(build(shards, layers), 1, 2, 3)
		if math.Abs(l-l0) > 1e-6*l0 {
			t.Errorf("%d shards: loss %v, 2 shards %v", shards, l, l0)
		}
		for i := range g {
			if math.Abs(float64(g[i]-g0[i])) > 1e-6+1e-4*math.Abs(float64(g0[i])) {
				t.Fatalf("%d shards: grad %d = %v, 2 shards %v", shards, i, g[i], g0[i])
			}
		}
	}
	for _, other := range [][3]int{{0, 2, 3}, {1, 3, 3}, {1, 2, 4}} {
		if l, _ := step(m, other[0], other[1], other[2]); l == l0 {
			t.Errorf("rank, epoch, step %v: the loss of (1, 2, 3)", other)
		}
	}
	m.SetStep(1, 2, 3)
	a, _ := m.ForwardBackward(x, labels, n)
	b, _ := m.ForwardBackward(x, labels, n)
	if l, _ := step(m, 1, 2, 4); a != l0 || b != l {
		t.Errorf("without SetStep: losses %v, %v, want steps 3 and 4's %v, %v", a, b, l0, l)
	}
	plain := build(2, []LayerSpec{Flatten{}, Dense{Units: 64}, Activation{"relu"}, Dense{Units: 5}})
	if !slices.Equal(plain.Params(), m.Params()) {
		t.Fatal("dropout changed the initial parameters")
	}
	e1, c1, _ := m.Evaluate(x, labels, n)
	e2, c2, _ := plain.Evaluate(x, labels, n)
	if e1 != e2 || c1 != c2 {
		t.Errorf("Evaluate with dropout %v %d, without %v %d", e1, c1, e2, c2)
	}
	d := newDropout(10000, 0.4)
	d.setTrain(true)
	d.setStep(dropoutKey(1, 2, 3, 4, 5), 0)
	ones := make([]float32, 10000)
	for i := range ones {
		ones[i] = 1
	}
	y := make([]float32, len(ones))
	d.Forward(y, ones, 1)
	zeros := 0
	for _, v := range y {
		switch v {
		case 0:
			zeros++
		case float32(1 / 0.6):
		default:
			t.Fatalf("dropout output %v: want 0 or 1/0.6", v)
		}
	}
	if zeros < 3800 || zeros > 4200 {
		t.Errorf("%d of 10000 dropped at rate 0.4", zeros)
	}
}

// TestSequentialDeterminism: a Sequential with every kind of layer gives
// the same bits whether its shards run in parallel or in turn.
func TestSequentialDeterminism(t *testing.T) {
	layers := []LayerSpec{
		Conv2D{Filters: 4, Kernel: 3, Padding: Same}, Activation{"relu"}, MaxPooling2D{Size: 2},
		Conv2D{Filters: 6, Kernel: 3, Strides: 2}, AveragePooling2D{Size: 2, Padding: Same},
		Flatten{}, Dropout{Rate: 0.3}, Dense{Units: 10}, Activation{"sigmoid"}, Dense{Units: 4},
	}
	x, labels := testBatch(3, 29, 14*14, 4)
	run := func(procs int) ([]float32, float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		m, err := NewSequential("m", Shape{H: 14, W: 14, C: 1}, 3, 3, layers...)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := m.ForwardBackward(x, labels, 29)
		return slices.Clone(m.Grads()), l
	}
	g1, l1 := run(1)
	g2, l2 := run(2)
	if !slices.Equal(g1, g2) || l1 != l2 {
		t.Fatal("GOMAXPROCS 1 and 2: results differ")
	}
}

// TestSequentialAllocs: after the first step, a training step of a
// generic model (separate layers in chunks, dropout, average pooling, a
// sigmoid loss, batch normalisation and its buffers) allocates nothing.
func TestSequentialAllocs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opt    seqOptions
		layers []LayerSpec
	}{
		{"lenet_unfused", seqOptions{unfused: true}, lenetLayers(10)},
		{"binary", seqOptions{}, []LayerSpec{
			Conv2D{Filters: 3, Kernel: 5, Strides: 2, Padding: Same}, AveragePooling2D{Size: 3, Padding: Same},
			Flatten{}, Dropout{Rate: 0.2}, Dense{Units: 1}, Activation{"sigmoid"}}},
		{"batchnorm", seqOptions{}, []LayerSpec{
			Conv2D{Filters: 4, Kernel: 3, Strides: 2}, BatchNormalization{}, Activation{"relu"},
			Flatten{}, Dense{Units: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := newSequential(tc.name, Shape{H: 28, W: 28, C: 1}, 1, 2, tc.opt, tc.layers)
			if err != nil {
				t.Fatal(err)
			}
			x, labels := testBatch(1, 64, 784, m.Classes())
			step := func() {
				if _, err := m.ForwardBackward(x, labels, 64); err != nil {
					t.Fatal(err)
				}
			}
			step()
			if a := testing.AllocsPerRun(10, step); a != 0 {
				t.Errorf("%v allocations per training step", a)
			}
		})
	}
}
