// Package onnx writes meshtrain's models as ONNX models (onnx.proto3,
// opset 13) that onnxruntime and other ONNX runtimes run: the function
// nn computes in evaluation (moving statistics, no dropout), with its
// weights as initializers, ending in the outputs nn.Predictor gives
// (probabilities after a final softmax or sigmoid).
//
// The model's input, "input", is what a Keras user feeds: a batch of
// N×H×W×C images (channels last), N×L×C sequences, or N×C vectors (token
// ids for an Embedding); a first Transpose makes an image N×C×H×W, ONNX's
// layout and nn's (a sequence N×C×1×L), so the convolutions' weights are
// nn's own ([out, in, kh, kw], as ONNX's Conv takes them) and Flatten
// flattens as nn does. Its output, "output", is N × outputs.
//
// The one table is ops, keyed by nn's kind: the ONNX nodes each kind
// becomes (with the image layers' rows in ops2d.go, the text layers' in
// ops1d.go, the merges' in opsmerge.go). A kind without a row is refused
// by name, and TestEveryKindHasAnOp fails until it has one.
package onnx

import (
	"fmt"
	"math"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/kerasio"
)

// builder gathers a model's nodes and initializers.
type builder struct {
	a        nn.Architecture
	shapes   []nn.Shape
	prefixes []string
	tensors  map[string][]float32 // nn's tensors by name: parameters and buffers
	shapesOf map[string][]int
	used     map[string]bool
	nodes    []node
	inits    []tensor
}

// op writes layer i's nodes taking the values ins (of shape in, nn's) and
// returns the name of its output.
type op func(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error)

// ops is the one table: nn's kinds (nn.Kind's first word) and the ONNX
// nodes each becomes.
var ops = map[string]op{
	"conv2d":              convOp,
	"dense":               denseOp,
	"batch_normalization": batchNormOp,
	"max_pooling2d":       poolOp,
	"average_pooling2d":   poolOp,
	"flatten":             flattenOp,
	"reshape":             reshapeOp,
	"dropout":             identityOp,
	"activation":          activationOp,
	"add":                 addOp,
}

// Encode returns m, built from a with its parameters and buffers, as an
// ONNX ModelProto.
func Encode(a nn.Architecture, m nn.Model) ([]byte, error) {
	shapes, err := a.Shapes()
	if err != nil {
		return nil, err
	}
	prefixes, err := kerasio.TensorPrefixes(a)
	if err != nil {
		return nil, err
	}
	b := &builder{a: a, shapes: shapes, prefixes: prefixes, tensors: map[string][]float32{}, shapesOf: map[string][]int{}, used: map[string]bool{}}
	add := func(ts []nn.ParamTensor, data []float32) {
		for _, t := range ts {
			b.tensors[t.Name], b.shapesOf[t.Name] = data[t.Offset:t.Offset+t.Size()], t.Shape
		}
	}
	add(m.Tensors(), m.Params())
	if st, ok := m.(nn.Stateful); ok {
		add(st.BufferTensors(), st.Buffers())
	}
	input := "input"
	inDims := []int{a.Input.C}
	switch {
	case kerasio.SequenceInput(a): // Keras's N×L×C, nn's N×C×1×L
		inDims = []int{a.Input.W, a.Input.C}
		b.nodes = append(b.nodes, node{op: "Transpose", name: "input_ncl", in: []string{input}, out: []string{"input_ncl"}, attrs: []attr{intsAttr("perm", 0, 2, 1)}})
		axes := b.int64s("input_axes", 2)
		b.nodes = append(b.nodes, node{op: "Unsqueeze", name: "input_nchw", in: []string{"input_ncl", axes}, out: []string{"input_nchw"}})
		input = "input_nchw"
	case image(a.Input):
		inDims = []int{a.Input.H, a.Input.W, a.Input.C}
		b.nodes = append(b.nodes, node{op: "Transpose", name: "input_nchw", in: []string{input}, out: []string{"input_nchw"}, attrs: []attr{intsAttr("perm", 0, 3, 1, 2)}})
		input = "input_nchw"
	}
	outs := make([]string, len(a.Layers))
	for i, s := range a.Layers {
		kind, _, _ := strings.Cut(nn.Kind(s), " ")
		f, ok := ops[kind]
		if !ok {
			return nil, fmt.Errorf("layer %d (%s): meshtrain has no ONNX form of this kind yet", i, nn.Kind(s))
		}
		from := []int{i - 1}
		if a.Inputs != nil {
			from = a.Inputs[i]
		}
		var ins []string
		for _, j := range from {
			if j < 0 {
				ins = append(ins, input)
			} else {
				ins = append(ins, outs[j])
			}
		}
		in := a.Input
		if from[0] >= 0 {
			in = shapes[from[0]]
		}
		if outs[i], err = f(b, i, s, ins, in); err != nil {
			return nil, fmt.Errorf("layer %d (%s): %w", i, nn.Kind(s), err)
		}
	}
	for name := range b.tensors {
		if !b.used[name] {
			return nil, fmt.Errorf("tensor %s: no ONNX node takes it (a kind whose op misses a weight)", name)
		}
	}
	last := shapes[len(shapes)-1]
	b.nodes = append(b.nodes, node{op: "Identity", name: "output", in: []string{outs[len(outs)-1]}, out: []string{"output"}})
	var g []byte
	for _, n := range b.nodes {
		g = appendBytes(g, graphNode, n.encode())
	}
	g = appendString(g, graphName, a.Name)
	for _, t := range b.inits {
		g = appendBytes(g, graphInitializer, t.encode())
	}
	g = appendBytes(g, graphInput, valueInfo("input", inDims))
	g = appendBytes(g, graphOutput, valueInfo("output", []int{last.Size()}))
	var out []byte
	out = appendVarint(out, modelIRVersion, irVersion)
	out = appendString(out, modelProducerName, "meshtrain")
	out = appendString(out, modelProducerVer, "1")
	out = appendBytes(out, modelGraph, g)
	opset := appendString(nil, opsetDomain, "")
	opset = appendVarint(opset, opsetVersion, opsetVersionUsed)
	return appendBytes(out, modelOpsetImport, opset), nil
}

func image(s nn.Shape) bool { return s.H != 0 || s.W != 0 }

// name is layer i's value or node name with a suffix.
func (b *builder) name(i int, what string) string { return fmt.Sprintf("%d_%s", i, what) }

// weight adds nn's tensor suffix of layer i as an initializer and returns
// its name; ok false when the layer has none (a BatchNormalization
// without center …).
func (b *builder) weight(i int, suffix string) (string, bool) {
	name := b.prefixes[i] + "." + suffix
	data, ok := b.tensors[name]
	if !ok {
		if data, ok = b.tensors[suffix]; !ok { // a bare model's (softmax regression)
			return "", false
		}
		name = suffix
	}
	b.used[name] = true
	b.inits = append(b.inits, tensor{name: name, dims: b.shapesOf[name], floats: data})
	return name, true
}

// constant adds an initializer of n copies of v.
func (b *builder) constant(name string, n int, v float32) string {
	f := make([]float32, n)
	for i := range f {
		f[i] = v
	}
	b.inits = append(b.inits, tensor{name: name, dims: []int{n}, floats: f})
	return name
}

func (b *builder) add(i int, op string, ins []string, attrs ...attr) string {
	return b.addNamed(i, strings.ToLower(op), op, ins, attrs...)
}

// addNamed is add for a layer's second node of one op: what names it.
func (b *builder) addNamed(i int, what, op string, ins []string, attrs ...attr) string {
	out := b.name(i, what)
	b.nodes = append(b.nodes, node{op: op, name: out, in: ins, out: []string{out}, attrs: attrs})
	return out
}

// pads are nn's padding of a window of k moved s at a time over in
// (see nn.Padding: same puts the odd cell after, as TensorFlow does).
func pads(in, k, s int, p nn.Padding) (before, after int) {
	if p != nn.Same {
		return 0, 0
	}
	out := (in + s - 1) / s
	total := max((out-1)*s+k-in, 0)
	return total / 2, total - total/2
}

// window is the attributes of a square window of k moved s at a time
// over in with padding p: kernel_shape, strides and explicit pads.
func window(in nn.Shape, k, s int, p nn.Padding) []attr {
	t, bot := pads(in.H, k, s, p)
	l, r := pads(in.W, k, s, p)
	return []attr{intsAttr("kernel_shape", k, k), intsAttr("strides", s, s), intsAttr("pads", t, l, bot, r)}
}

// convAttrs are a convolution's kernel_shape, strides, dilations and
// explicit pads (nn's: TensorFlow's same padding over the dilated reach,
// the odd cell after), from its options with nn's defaults filled in.
func convAttrs(in nn.Shape, kernel, kernelW, strides, stridesW, dilation, dilationW int, p nn.Padding) []attr {
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	kh, sh, dh := kernel, max(strides, 1), max(dilation, 1)
	kw, sw, dw := or(kernelW, kh), or(stridesW, sh), or(dilationW, dh)
	t, bot := pads(in.H, (kh-1)*dh+1, sh, p)
	l, r := pads(in.W, (kw-1)*dw+1, sw, p)
	return []attr{intsAttr("kernel_shape", kh, kw), intsAttr("strides", sh, sw), intsAttr("dilations", dh, dw), intsAttr("pads", t, l, bot, r)}
}

// conv writes a Conv of layer i's weight and bias (if it has one).
func (b *builder) conv(i int, x string, attrs []attr) (string, error) {
	w, ok := b.weight(i, "weight")
	if !ok {
		return "", fmt.Errorf("no weight tensor")
	}
	args := []string{x, w}
	if bias, ok := b.weight(i, "bias"); ok {
		args = append(args, bias)
	}
	return b.add(i, "Conv", args, attrs...), nil
}

func convOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	c := s.(nn.Conv2D)
	return b.conv(i, ins[0], convAttrs(in, c.Kernel, c.KernelW, c.Strides, c.StridesW, c.Dilation, c.DilationW, c.Padding))
}

func denseOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	w, ok := b.weight(i, "weight")
	if !ok {
		return "", fmt.Errorf("no weight tensor")
	}
	args := []string{ins[0], w}
	if bias, ok := b.weight(i, "bias"); ok {
		args = append(args, bias)
	}
	return b.add(i, "Gemm", args, intAttr("transB", 1)), nil
}

func batchNormOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	bn := s.(nn.BatchNormalization)
	eps := bn.Epsilon
	if eps == 0 {
		eps = 1e-3 // Keras's default, as nn's
	}
	scale, ok := b.weight(i, "weight")
	if !ok {
		scale = b.constant(b.name(i, "ones"), in.C, 1)
	}
	bias, ok := b.weight(i, "bias")
	if !ok {
		bias = b.constant(b.name(i, "zeros"), in.C, 0)
	}
	mean, ok1 := b.weight(i, "running_mean")
	vr, ok2 := b.weight(i, "running_var")
	if !ok1 || !ok2 {
		return "", fmt.Errorf("no moving statistics")
	}
	return b.add(i, "BatchNormalization", []string{ins[0], scale, bias, mean, vr}, floatAttr("epsilon", eps)), nil
}

func poolOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	switch p := s.(type) {
	case nn.MaxPooling2D:
		return b.add(i, "MaxPool", ins, window(in, p.Size, stride(p.Strides, p.Size), p.Padding)...), nil
	case nn.AveragePooling2D:
		// count_include_pad 0: a window averages its cells inside the
		// input, as TensorFlow's same pooling and nn's.
		attrs := append(window(in, p.Size, stride(p.Strides, p.Size), p.Padding), intAttr("count_include_pad", 0))
		return b.add(i, "AveragePool", ins, attrs...), nil
	}
	return "", fmt.Errorf("not a pooling")
}

func stride(s, def int) int {
	if s == 0 {
		return def
	}
	return s
}

func flattenOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	return b.add(i, "Flatten", ins, intAttr("axis", 1)), nil
}

// reshapeOp: nn reshapes the planar floats as they lie, which is ONNX's
// Reshape of N×C×H×W to N×C'×H'×W'.
func reshapeOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	to := b.shapes[i]
	dims := []int64{-1, int64(to.C)}
	if image(to) {
		dims = append(dims, int64(to.H), int64(to.W))
	}
	shape := b.name(i, "shape")
	b.inits = append(b.inits, tensor{name: shape, dims: []int{len(dims)}, ints: dims})
	return b.add(i, "Reshape", []string{ins[0], shape}), nil
}

func identityOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	return b.add(i, "Identity", ins), nil
}

func activationOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	fn := s.(nn.Activation).Fn
	switch fn {
	case "relu":
		return b.add(i, "Relu", ins), nil
	case "tanh":
		return b.add(i, "Tanh", ins), nil
	case "sigmoid":
		return b.add(i, "Sigmoid", ins), nil
	case "softmax":
		return b.add(i, "Softmax", ins, intAttr("axis", -1)), nil
	case "linear":
		return b.add(i, "Identity", ins), nil
	case "elu":
		return b.add(i, "Elu", ins, floatAttr("alpha", 1)), nil
	case "selu": // ONNX's default α and γ are Keras's constants
		return b.add(i, "Selu", ins), nil
	case "softplus":
		return b.add(i, "Softplus", ins), nil
	case "softsign":
		return b.add(i, "Softsign", ins), nil
	case "hard_sigmoid": // Keras 3's: relu6(x + 3)/6
		return b.add(i, "HardSigmoid", ins, floatAttr("alpha", 1.0/6), floatAttr("beta", 0.5)), nil
	case "hard_sigmoid_tf": // tf.keras 2's and TF.js's: clip(0.2x + 0.5, 0, 1)
		return b.add(i, "HardSigmoid", ins, floatAttr("alpha", 0.2), floatAttr("beta", 0.5)), nil
	case "swish":
		return b.addNamed(i, "swish", "Mul", []string{ins[0], b.add(i, "Sigmoid", ins)}), nil
	case "gelu": // x·Φ(x) = ½x(1 + erf(x/√2)); ONNX's Gelu is opset 20's
		half, rt2 := b.floats(b.name(i, "half"), nil, []float32{0.5}), b.floats(b.name(i, "sqrt2"), nil, []float32{float32(math.Sqrt2)})
		erf := b.add(i, "Erf", []string{b.add(i, "Div", []string{ins[0], rt2})})
		one := b.floats(b.name(i, "one"), nil, []float32{1})
		return b.addNamed(i, "gelu", "Mul", []string{b.addNamed(i, "halfx", "Mul", []string{ins[0], half}), b.add(i, "Add", []string{erf, one})}), nil
	case "gelu_tanh": // ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
		c := func(what string, v float64) string { return b.floats(b.name(i, what), nil, []float32{float32(v)}) }
		x := ins[0]
		x3 := b.addNamed(i, "x3", "Mul", []string{b.addNamed(i, "x2", "Mul", []string{x, x}), x})
		inner := b.addNamed(i, "inner", "Add", []string{x, b.addNamed(i, "cx3", "Mul", []string{x3, c("c", 0.044715)})})
		t := b.add(i, "Tanh", []string{b.addNamed(i, "scaled", "Mul", []string{inner, c("k", math.Sqrt(2/math.Pi))})})
		return b.addNamed(i, "gelu", "Mul", []string{b.addNamed(i, "halfx", "Mul", []string{x, c("half", 0.5)}), b.addNamed(i, "onet", "Add", []string{t, c("one", 1)})}), nil
	}
	return "", fmt.Errorf("activation %s: meshtrain has no ONNX form of it yet", fn)
}

// addOp: Sum, ONNX's n-ary addition.
func addOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	return b.add(i, "Sum", ins), nil
}
