package keras

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The image layers of the models Keras users start from (MobileNet's
// depthwise and separable convolutions, global pooling heads, padding,
// cropping, up-sampling, and the preprocessing layers a model may begin
// with): their readers, entered in classes (layers.go).

// kernelWindow is a convolution's window as Keras configures it.
type kernelWindow struct {
	kh, kw, sh, sw, dh, dw int
	pad                    nn.Padding
}

// window reads kernel_size, strides, dilation_rate, padding and
// data_format, the options of Keras's 2-D convolutions.
func window(o *options) (kernelWindow, error) {
	var w kernelWindow
	var err error
	if w.kh, w.kw, err = pair(o, "kernel_size", 0); err != nil {
		return w, err
	}
	if w.sh, w.sw, err = pair(o, "strides", 1); err != nil {
		return w, err
	}
	if w.dh, w.dw, err = pair(o, "dilation_rate", 1); err != nil {
		return w, err
	}
	if w.pad, err = padding(o); err != nil {
		return w, err
	}
	return w, channelsLast(o)
}

// conv2D is the Conv2D of filters on the window, its options spelled as
// nn's canonical JSON spells them.
func (w kernelWindow) conv2D(filters int) nn.Conv2D {
	return nn.Conv2D{Filters: filters, Kernel: w.kh, Strides: w.sh, Padding: w.pad,
		KernelW: unlessEqual(w.kw, w.kh), StridesW: unlessEqual(w.sw, w.sh), Dilation: unlessEqual(w.dh, 1), DilationW: unlessEqual(w.dw, w.dh)}
}

// depthwise is the DepthwiseConv2D of multiplier on the window.
func (w kernelWindow) depthwise(multiplier int) nn.DepthwiseConv2D {
	c := w.conv2D(1)
	return nn.DepthwiseConv2D{Kernel: c.Kernel, Strides: c.Strides, Multiplier: multiplier, Padding: c.Padding,
		KernelW: c.KernelW, StridesW: c.StridesW, Dilation: c.Dilation, DilationW: c.DilationW}
}

// unlessEqual is v, or 0 (nn's spelling of "the same") when it is def.
func unlessEqual(v, def int) int {
	if v == def {
		return 0
	}
	return v
}

// pair reads an option that is an int or a list of two (height, width),
// each at least 1; def stands for null.
func pair(o *options, key string, def int) (int, int, error) {
	v, _ := o.take(key)
	if v == nil {
		if def < 1 {
			return 0, 0, fmt.Errorf("no %s", key)
		}
		return def, def, nil
	}
	var h, w int
	if n, ok := v.(json.Number); ok {
		i, err := intOf(n)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", key, err)
		}
		h, w = i, i
	} else {
		list, err := listOf(v)
		if err != nil || len(list) != 2 {
			return 0, 0, fmt.Errorf("%s %s: want an integer or a list of two (height, width)", key, show(v))
		}
		h, err = intOf(list[0])
		if err == nil {
			w, err = intOf(list[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s %s: want integers", key, show(v))
		}
	}
	if h < 1 || w < 1 {
		return 0, 0, fmt.Errorf("%s %s: want sizes of at least 1", key, show(v))
	}
	return h, w, nil
}

// useBias reads use_bias (null: true).
func useBias(o *options) (bool, error) {
	v, _ := o.take("use_bias")
	if v == nil {
		return true, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("use_bias %s: want true or false", show(v))
	}
	return b, nil
}

// noPenalties refuses the regularizers and constraints of a layer's
// weights (their keys' prefixes: "kernel", "depthwise" …).
func noPenalties(o *options, weights ...string) error {
	for _, w := range append(weights, "activity") {
		if err := o.null(w+"_regularizer", "meshtrain adds no per-layer penalty (--weight-decay is an L2 penalty on every parameter)"); err != nil {
			return err
		}
	}
	for _, w := range weights {
		if err := o.null(w+"_constraint", "meshtrain constrains no weights"); err != nil {
			return err
		}
	}
	return nil
}

// initOpt reads an initializer option with Keras's default.
func initOpt(o *options, key, def string) (*nn.Initializer, error) {
	v, _ := o.take(key)
	init, err := initializer(v, def)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return init, nil
}

// depthMultiplier reads depth_multiplier (null: 1).
func depthMultiplier(o *options) (int, error) {
	v, _ := o.take("depth_multiplier")
	if v == nil {
		return 1, nil
	}
	m, err := intOf(v)
	if err != nil || m < 1 {
		return 0, fmt.Errorf("depth_multiplier %s: want an integer of at least 1", show(v))
	}
	return m, nil
}

// readDepthwiseConv2D reads DepthwiseConv2D: nn's DepthwiseConv2D, whose
// weight [C·M 1 KH KW] is Keras's depthwise_kernel [KH KW C M]
// rearranged, then its activation.
func readDepthwiseConv2D(o *options) ([]nn.LayerSpec, error) {
	w, err := window(o)
	if err != nil {
		return nil, err
	}
	m, err := depthMultiplier(o)
	if err != nil {
		return nil, err
	}
	// tf.keras 2 writes the Conv2D option groups, 1, into a
	// DepthwiseConv2D's config too (the class derives from Conv2D's).
	if v, _ := o.take("groups"); v != nil {
		if g, err := intOf(v); err != nil || g != 1 {
			return nil, fmt.Errorf("groups %s is not supported: a DepthwiseConv2D has one group per input channel", show(v))
		}
	}
	bias, err := useBias(o)
	if err != nil {
		return nil, err
	}
	v, _ := o.take("activation")
	fn, err := activation(v, o.keras3)
	if err != nil {
		return nil, err
	}
	d := w.depthwise(m)
	d.NoBias = !bias
	if d.KernelInit, err = initOpt(o, "depthwise_initializer", "GlorotUniform"); err != nil {
		return nil, err
	}
	bi, err := initOpt(o, "bias_initializer", "Zeros")
	if err != nil {
		return nil, err
	}
	if bias {
		d.BiasInit = bi
	}
	if err := noPenalties(o, "depthwise", "bias"); err != nil {
		return nil, err
	}
	return withActivation([]nn.LayerSpec{d}, fn), nil
}

// readSeparableConv2D reads SeparableConv2D as two nn layers and its
// activation: the depthwise convolution without a bias (nn layer i,
// Keras's depthwise_kernel [KH KW C M] as i.weight [C·M 1 KH KW]), then
// a 1×1 Conv2D of the layer's filters (nn layer i+1, pointwise_kernel
// [1 1 C·M filters] as (i+1).weight [filters C·M 1 1], and bias as
// (i+1).bias), which is what Keras computes (a depthwise then a
// pointwise convolution, the bias added once, at the end).
func readSeparableConv2D(o *options) ([]nn.LayerSpec, error) {
	filters, err := intOpt(o, "filters")
	if err != nil {
		return nil, err
	}
	w, err := window(o)
	if err != nil {
		return nil, err
	}
	m, err := depthMultiplier(o)
	if err != nil {
		return nil, err
	}
	bias, err := useBias(o)
	if err != nil {
		return nil, err
	}
	v, _ := o.take("activation")
	fn, err := activation(v, o.keras3)
	if err != nil {
		return nil, err
	}
	d := w.depthwise(m)
	d.NoBias = true
	if d.KernelInit, err = initOpt(o, "depthwise_initializer", "GlorotUniform"); err != nil {
		return nil, err
	}
	p := nn.Conv2D{Filters: filters, Kernel: 1, Strides: 1, NoBias: !bias}
	if p.KernelInit, err = initOpt(o, "pointwise_initializer", "GlorotUniform"); err != nil {
		return nil, err
	}
	bi, err := initOpt(o, "bias_initializer", "Zeros")
	if err != nil {
		return nil, err
	}
	if bias {
		p.BiasInit = bi
	}
	if err := noPenalties(o, "depthwise", "pointwise", "bias"); err != nil {
		return nil, err
	}
	return withActivation([]nn.LayerSpec{d, p}, fn), nil
}

// readGlobalPool reads GlobalAveragePooling2D, or GlobalMaxPooling2D
// when max.
func readGlobalPool(max bool) func(o *options) ([]nn.LayerSpec, error) {
	return func(o *options) ([]nn.LayerSpec, error) {
		if err := channelsLast(o); err != nil {
			return nil, err
		}
		keep := false
		if v, _ := o.take("keepdims"); v != nil {
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("keepdims %s: want true or false", show(v))
			}
			keep = b
		}
		if max {
			return []nn.LayerSpec{nn.GlobalMaxPooling2D{KeepDims: keep}}, nil
		}
		return []nn.LayerSpec{nn.GlobalAveragePooling2D{KeepDims: keep}}, nil
	}
}

// readFrame reads ZeroPadding2D's padding, or Cropping2D's cropping when
// crop: an int for every side, (rows, columns), or ((top, bottom),
// (left, right)).
func readFrame(crop bool) func(o *options) ([]nn.LayerSpec, error) {
	return func(o *options) ([]nn.LayerSpec, error) {
		key := "padding"
		if crop {
			key = "cropping"
		}
		v, _ := o.take(key)
		t, b, l, r, err := sides(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", key, show(v), err)
		}
		if err := channelsLast(o); err != nil {
			return nil, err
		}
		if crop {
			return []nn.LayerSpec{nn.Cropping2D{Top: t, Bottom: b, Left: l, Right: r}}, nil
		}
		return []nn.LayerSpec{nn.ZeroPadding2D{Top: t, Bottom: b, Left: l, Right: r}}, nil
	}
}

var errSides = errors.New("want an integer, (rows, columns) or ((top, bottom), (left, right)) of integers ≥ 0")

// sides reads the forms of ZeroPadding2D's padding (null: 1 on each
// side, Keras's default) and Cropping2D's cropping.
func sides(v any) (t, b, l, r int, err error) {
	if v == nil {
		return 1, 1, 1, 1, nil
	}
	if n, ok := v.(json.Number); ok {
		i, err := intOf(n)
		if err != nil || i < 0 {
			return 0, 0, 0, 0, errSides
		}
		return i, i, i, i, nil
	}
	list, err := listOf(v)
	if err != nil || len(list) != 2 {
		return 0, 0, 0, 0, errSides
	}
	var out [4]int
	for axis, x := range list {
		if n, ok := x.(json.Number); ok {
			i, err := intOf(n)
			if err != nil || i < 0 {
				return 0, 0, 0, 0, errSides
			}
			out[2*axis], out[2*axis+1] = i, i
			continue
		}
		two, err := listOf(x)
		if err != nil || len(two) != 2 {
			return 0, 0, 0, 0, errSides
		}
		for k, y := range two {
			i, err := intOf(y)
			if err != nil || i < 0 {
				return 0, 0, 0, 0, errSides
			}
			out[2*axis+k] = i
		}
	}
	return out[0], out[1], out[2], out[3], nil
}

// readUpSampling2D reads UpSampling2D with nearest-neighbour
// interpolation.
func readUpSampling2D(o *options) ([]nn.LayerSpec, error) {
	h, w, err := pair(o, "size", 2)
	if err != nil {
		return nil, err
	}
	if v, _ := o.take("interpolation"); v != nil && v != "nearest" {
		return nil, fmt.Errorf("interpolation %s is not supported: meshtrain's UpSampling2D repeats the nearest cell (\"nearest\")", show(v))
	}
	if err := channelsLast(o); err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.UpSampling2D{SizeH: h, SizeW: w}}, nil
}

// scalar reads a number, or a list of one.
func scalar(v any) (float64, error) {
	if list, err := listOf(v); err == nil && len(list) == 1 {
		v = list[0]
	}
	return floatOf(v)
}

// readRescaling reads Rescaling: x·scale + offset (offset null: 0).
func readRescaling(o *options) ([]nn.LayerSpec, error) {
	v, _ := o.take("scale")
	scale, err := scalar(v)
	if err != nil {
		return nil, fmt.Errorf("scale %s is not supported: meshtrain's Rescaling takes one number", show(v))
	}
	offset := 0.0
	if v, _ := o.take("offset"); v != nil {
		if offset, err = scalar(v); err != nil {
			return nil, fmt.Errorf("offset %s is not supported: meshtrain's Rescaling takes one number", show(v))
		}
	}
	return []nn.LayerSpec{nn.Rescaling{Scale: scale, Offset: offset}}, nil
}

// readNormalization reads Normalization with its mean and variance in
// the config (a number, or one per channel of the last axis).
func readNormalization(o *options) ([]nn.LayerSpec, error) {
	mv, _ := o.take("mean")
	vv, _ := o.take("variance")
	if mv == nil || vv == nil {
		return nil, errors.New("mean and variance are null: the layer was adapted (adapt()), and its statistics are in the weights file, " +
			"which meshtrain does not read for Normalization; give the layer mean= and variance= (the adapted layer's layer.mean and layer.variance)")
	}
	mean, err := numbers(mv)
	if err != nil {
		return nil, fmt.Errorf("mean %s: %w", show(mv), err)
	}
	variance, err := numbers(vv)
	if err != nil {
		return nil, fmt.Errorf("variance %s: %w", show(vv), err)
	}
	if v, _ := o.take("axis"); v != nil {
		if list, err := listOf(v); err == nil && len(list) == 1 {
			v = list[0]
		}
		if a, err := intOf(v); err != nil || a != -1 {
			return nil, fmt.Errorf("axis %s is not supported: meshtrain normalises each channel of the last axis (-1)", show(v))
		}
	} else if len(mean) != 1 || len(variance) != 1 {
		// axis None: one mean and variance for every value.
		return nil, fmt.Errorf("axis null with %d means: want one mean and variance for every value", len(mean))
	}
	invert := false
	if v, _ := o.take("invert"); v != nil {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("invert %s: want true or false", show(v))
		}
		invert = b
	}
	return []nn.LayerSpec{nn.Normalization{Mean: mean, Variance: variance, Invert: invert}}, nil
}

// numbers reads a number or a flat list of numbers (Keras writes a
// per-channel mean as a list; one broadcast to the last axis, [[[m]]],
// has one number).
func numbers(v any) ([]float64, error) {
	if list, err := listOf(v); err == nil {
		var out []float64
		for _, x := range list {
			if inner, err := listOf(x); err == nil && len(list) == 1 {
				return numbers(inner)
			}
			f, err := floatOf(x)
			if err != nil {
				return nil, fmt.Errorf("want numbers: %w", err)
			}
			out = append(out, f)
		}
		if len(out) == 0 {
			return nil, errors.New("an empty list")
		}
		return out, nil
	}
	f, err := floatOf(v)
	if err != nil {
		return nil, fmt.Errorf("want a number or a list of numbers")
	}
	return []float64{f}, nil
}
