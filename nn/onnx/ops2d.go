package onnx

import (
	"fmt"
	"math"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the image layers of Keras's starting models.
func init() {
	for kind, f := range map[string]op{
		"depthwise_conv2d":         depthwiseOp,
		"global_average_pooling2d": globalPoolOp,
		"global_max_pooling2d":     globalPoolOp,
		"zero_padding2d":           padOp,
		"cropping2d":               cropOp,
		"up_sampling2d":            upSampleOp,
		"rescaling":                rescalingOp,
		"normalization":            normalizationOp,
	} {
		ops[kind] = f
	}
}

// depthwiseOp: a Conv of group C, whose weight [C·M 1 KH KW] is nn's.
func depthwiseOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	d := s.(nn.DepthwiseConv2D)
	attrs := append(convAttrs(in, d.Kernel, d.KernelW, d.Strides, d.StridesW, d.Dilation, d.DilationW, d.Padding), intAttr("group", in.C))
	return b.conv(i, ins[0], attrs)
}

// globalPoolOp: N×C×1×1, flattened to N×C unless the spec keeps the
// dimensions (a 1×1×C image).
func globalPoolOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	var out string
	keep := false
	switch g := s.(type) {
	case nn.GlobalAveragePooling2D:
		out, keep = b.add(i, "GlobalAveragePool", ins), g.KeepDims
	case nn.GlobalMaxPooling2D:
		out, keep = b.add(i, "GlobalMaxPool", ins), g.KeepDims
	default:
		return "", fmt.Errorf("not a global pooling")
	}
	if keep {
		return out, nil
	}
	return b.addNamed(i, "flat", "Flatten", []string{out}, intAttr("axis", 1)), nil
}

// int64s adds an int64 initializer.
func (b *builder) int64s(name string, v ...int) string {
	t := tensor{name: name, dims: []int{len(v)}, ints: []int64{}}
	for _, x := range v {
		t.ints = append(t.ints, int64(x))
	}
	b.inits = append(b.inits, t)
	return name
}

// floats adds a float32 initializer of the given dims.
func (b *builder) floats(name string, dims []int, v []float32) string {
	b.inits = append(b.inits, tensor{name: name, dims: dims, floats: v})
	return name
}

func padOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	z := s.(nn.ZeroPadding2D)
	pads := b.int64s(b.name(i, "pads"), 0, 0, z.Top, z.Left, 0, 0, z.Bottom, z.Right)
	return b.add(i, "Pad", []string{ins[0], pads}), nil
}

func cropOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	c := s.(nn.Cropping2D)
	starts := b.int64s(b.name(i, "starts"), c.Top, c.Left)
	ends := b.int64s(b.name(i, "ends"), in.H-c.Bottom, in.W-c.Right)
	axes := b.int64s(b.name(i, "axes"), 2, 3)
	return b.add(i, "Slice", []string{ins[0], starts, ends, axes}), nil
}

// upSampleOp: nearest-neighbour Resize by whole factors, each output
// cell the input's at ⌊y/s⌋ (asymmetric coordinates, floor), which
// repeats rows and columns as Keras's UpSampling2D does.
func upSampleOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	u := s.(nn.UpSampling2D)
	sh, sw := u.SizeH, u.SizeW
	if sh == 0 {
		sh = 2
	}
	if sw == 0 {
		sw = 2
	}
	scales := b.floats(b.name(i, "scales"), []int{4}, []float32{1, 1, float32(sh), float32(sw)})
	return b.add(i, "Resize", []string{ins[0], "", scales}, strAttr("mode", "nearest"),
		strAttr("coordinate_transformation_mode", "asymmetric"), strAttr("nearest_mode", "floor")), nil
}

func rescalingOp(b *builder, i int, s nn.LayerSpec, ins []string, _ nn.Shape) (string, error) {
	r := s.(nn.Rescaling)
	scale := b.floats(b.name(i, "scale"), nil, []float32{float32(r.Scale)})
	offset := b.floats(b.name(i, "offset"), nil, []float32{float32(r.Offset)})
	return b.addNamed(i, "shifted", "Add", []string{b.add(i, "Mul", []string{ins[0], scale}), offset}), nil
}

// normalizationOp: (x − mean)/std per channel (nn's: each channel's
// standard deviation at least 1e-7), or mean + x·std inverted; the
// statistics broadcast over N×C×H×W or N×C.
func normalizationOp(b *builder, i int, s nn.LayerSpec, ins []string, in nn.Shape) (string, error) {
	n := s.(nn.Normalization)
	mean, std := make([]float32, in.C), make([]float32, in.C)
	for c := range in.C {
		k := c % len(n.Mean)
		mean[c] = float32(n.Mean[k])
		std[c] = max(float32(math.Sqrt(float64(float32(n.Variance[k])))), 1e-7)
	}
	dims := []int{1, in.C}
	if image(in) {
		dims = append(dims, 1, 1)
	}
	m, sd := b.floats(b.name(i, "mean"), dims, mean), b.floats(b.name(i, "std"), dims, std)
	if n.Invert {
		return b.addNamed(i, "unnormalised", "Add", []string{b.add(i, "Mul", []string{ins[0], sd}), m}), nil
	}
	return b.addNamed(i, "normalised", "Div", []string{b.add(i, "Sub", []string{ins[0], m}), sd}), nil
}
