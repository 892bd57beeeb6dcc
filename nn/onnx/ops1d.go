package onnx

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the layers of Keras's text and tabular examples. A
// sequence, nn's 1×L×C (planar C×L), is N×C×1×L here, so that 1-D
// convolutions and poolings are 2-D ones of one row.
func init() {
	for kind, f := range map[string]op{
		"conv1d":                   conv1DOp,
		"embedding":                embeddingOp,
		"max_pooling1d":            pool1DOp,
		"average_pooling1d":        pool1DOp,
		"global_max_pooling1d":     globalPool1DOp,
		"global_average_pooling1d": globalPool1DOp,
		"layer_normalization":      layerNormOp,
		"prelu":                    preluOp,
		"leaky_relu":               alphaOp,
		"elu":                      alphaOp,
	} {
		ops[kind] = f
	}
}

// conv1DOp: Conv of kernel 1×K over N×C×1×L; its weight [F C K] made
// [F C 1 K]. Causal padding pads (K−1)·D before only.
func conv1DOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	c := s.(nn.Conv1D)
	st, dl := max(c.Strides, 1), max(c.Dilation, 1)
	var l, r int
	if c.Padding == nn.Causal {
		l = (c.Kernel - 1) * dl
	} else {
		l, r = pads(in.W, (c.Kernel-1)*dl+1, st, c.Padding)
	}
	name := b.prefixes[i] + ".weight"
	w, ok := b.tensors[name]
	if !ok {
		return "", fmt.Errorf("no weight tensor")
	}
	b.used[name] = true
	shape := b.shapesOf[name]
	wName := b.floats(b.name(i, "weight"), []int{shape[0], shape[1], 1, shape[2]}, w)
	args := []string{ins[0], wName}
	if bias, ok := b.weight(i, "bias"); ok {
		args = append(args, bias)
	}
	return b.add(i, "Conv", args, intsAttr("kernel_shape", 1, c.Kernel), intsAttr("strides", 1, st), intsAttr("dilations", 1, dl), intsAttr("pads", 0, l, 0, r)), nil
}

// embeddingOp: the ids (floats, as the data give them; nn checks they
// are whole) cast to int64 and gathered from the table, N×L×D, made
// N×D×1×L.
func embeddingOp(b *builder, i int, _ nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	table, ok := b.weight(i, "weight")
	if !ok {
		return "", fmt.Errorf("no weight tensor")
	}
	ids := b.add(i, "Cast", ins, intAttr("to", dtypeInt64))
	g := b.add(i, "Gather", []string{table, ids}, intAttr("axis", 0))
	t := b.add(i, "Transpose", []string{g}, intsAttr("perm", 0, 2, 1))
	return b.add(i, "Unsqueeze", []string{t, b.int64s(b.name(i, "axes"), 2)}), nil
}

func pool1DOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	op, size, strides, pad := "MaxPool", 0, 0, nn.Valid
	switch p := s.(type) {
	case nn.MaxPooling1D:
		size, strides, pad = p.Size, p.Strides, p.Padding
	case nn.AveragePooling1D:
		op, size, strides, pad = "AveragePool", p.Size, p.Strides, p.Padding
	default:
		return "", fmt.Errorf("not a 1-D pooling")
	}
	if size == 0 {
		size = 2
	}
	st := stride(strides, size)
	l, r := pads(in.W, size, st, pad)
	attrs := []attr{intsAttr("kernel_shape", 1, size), intsAttr("strides", 1, st), intsAttr("pads", 0, l, 0, r)}
	if op == "AveragePool" {
		attrs = append(attrs, intAttr("count_include_pad", 0))
	}
	return b.add(i, op, ins, attrs...), nil
}

func globalPool1DOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	op := "GlobalMaxPool"
	if _, ok := s.(nn.GlobalAveragePooling1D); ok {
		op = "GlobalAveragePool"
	}
	return b.addNamed(i, "flat", "Flatten", []string{b.add(i, op, ins)}, intAttr("axis", 1)), nil
}

// layerNormOp: over the channels (axis 1 of N×C×H×W or N×C) at each
// position, y = γ·(x − μ)/√(σ² + ε) + β, from ReduceMean (ONNX's
// LayerNormalization is opset 17's).
func layerNormOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	n := s.(nn.LayerNormalization)
	eps := n.Epsilon
	if eps == 0 {
		eps = 1e-3
	}
	x := ins[0]
	mean := b.addNamed(i, "mean", "ReduceMean", []string{x}, intsAttr("axes", 1), intAttr("keepdims", 1))
	d := b.addNamed(i, "centred", "Sub", []string{x, mean})
	v := b.addNamed(i, "var", "ReduceMean", []string{b.addNamed(i, "sq", "Mul", []string{d, d})}, intsAttr("axes", 1), intAttr("keepdims", 1))
	sd := b.add(i, "Sqrt", []string{b.addNamed(i, "vareps", "Add", []string{v, b.floats(b.name(i, "eps"), nil, []float32{float32(eps)})})})
	y := b.addNamed(i, "normed", "Div", []string{d, sd})
	dims := []int{in.C}
	if image(in) {
		dims = []int{in.C, 1, 1}
	}
	if g, ok := b.weight(i, "weight"); ok {
		y = b.addNamed(i, "scaled", "Mul", []string{y, b.reshaped(i, g, "gamma", dims)})
	}
	if beta, ok := b.weight(i, "bias"); ok {
		y = b.addNamed(i, "shifted", "Add", []string{y, b.reshaped(i, beta, "beta", dims)})
	}
	return y, nil
}

// reshaped is the initializer name reshaped to dims (C×1×1 to broadcast
// over an image's channels).
func (b *builder) reshaped(i int, name, what string, dims []int) string {
	if len(dims) == 1 {
		return name
	}
	return b.addNamed(i, what+"_c11", "Reshape", []string{name, b.int64s(b.name(i, what+"_shape"), dims...)})
}

// preluOp: PRelu with the slopes [C], made C×1×1 over an image.
func preluOp(b *builder, i int, _ nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	w, ok := b.weight(i, "weight")
	if !ok {
		return "", fmt.Errorf("no weight tensor")
	}
	dims := []int{in.C}
	if image(in) {
		dims = []int{in.C, 1, 1}
	}
	return b.add(i, "PRelu", []string{ins[0], b.reshaped(i, w, "slope", dims)}), nil
}

func alphaOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	switch a := s.(type) {
	case nn.LeakyReLU:
		return b.add(i, "LeakyRelu", ins, floatAttr("alpha", a.Alpha)), nil
	case nn.ELU:
		return b.add(i, "Elu", ins, floatAttr("alpha", a.Alpha)), nil
	}
	return "", fmt.Errorf("not LeakyReLU or ELU")
}
