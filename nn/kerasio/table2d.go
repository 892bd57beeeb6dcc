package kerasio

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the image layers of Keras's starting models: the
// depthwise convolution (with Conv2D's 1×1 after it, SeparableConv2D),
// global pooling, padding, cropping, up-sampling, and the preprocessing
// layers.
func init() {
	for kind, r := range map[string]rule{
		"depthwise_conv2d":         {weights: []pair{{"weight", "depthwise_kernel", false}, {"bias", "bias", false}}, flow: fresh, layout: depthwiseLayout, keras: depthwiseLayer},
		"global_average_pooling2d": {flow: fresh, keras: globalPoolLayer},
		"global_max_pooling2d":     {flow: fresh, keras: globalPoolLayer},
		"zero_padding2d":           {flow: fresh, keras: frameLayer},
		"cropping2d":               {flow: fresh, keras: frameLayer},
		"up_sampling2d":            {flow: fresh, keras: upSamplingLayer},
		"rescaling":                {flow: keep, keras: rescalingLayer},
		"normalization":            {flow: keep, keras: normalizationLayer},
	} {
		rules[kind] = r
	}
}

// depthwiseLayout: nn's weight [C·M 1 KH KW] (output channel c·M+m from
// input channel c) is Keras's depthwise_kernel [KH KW C M]; the bias is
// the same.
func depthwiseLayout(p pair, s []int, c layoutContext) ([]int, []int) {
	if p.keras != "depthwise_kernel" {
		return s, nil
	}
	ch := c.inShape.C
	return transpose([]int{ch, s[0] / ch, s[2], s[3]}, []int{2, 3, 0, 1})
}

// window2D is a convolution's kernel, strides and dilation, height's
// then width's, with nn's defaults filled in (0: 1, or the height's).
func window2D(kernel, kernelW, strides, stridesW, dilation, dilationW int) (k, s, d []int) {
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	sh, dh := max(strides, 1), max(dilation, 1)
	return []int{kernel, or(kernelW, kernel)}, []int{sh, or(stridesW, sh)}, []int{dh, or(dilationW, dh)}
}

func depthwiseLayer(s nn.LayerSpec, lc layerContext) (string, map[string]any, error) {
	d := s.(nn.DepthwiseConv2D)
	k, st, dl := window2D(d.Kernel, d.KernelW, d.Strides, d.StridesW, d.Dilation, d.DilationW)
	m := max(d.Multiplier, 1)
	if err := kerasWindow(st, dl); err != nil {
		return "", nil, err
	}
	cfg := kernelConfig(map[string]any{"kernel_size": k, "strides": st, "padding": d.Padding.String(), "depth_multiplier": m,
		"data_format": "channels_last", "dilation_rate": dl}, d.KernelInit, d.BiasInit, lc.in.C*k[0]*k[1], m*k[0]*k[1])
	cfg["use_bias"] = !d.NoBias
	cfg["depthwise_initializer"], cfg["depthwise_regularizer"], cfg["depthwise_constraint"] = cfg["kernel_initializer"], nil, nil
	delete(cfg, "kernel_initializer")
	delete(cfg, "kernel_regularizer")
	delete(cfg, "kernel_constraint")
	return "DepthwiseConv2D", cfg, nil
}

func globalPoolLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	cfg := map[string]any{"data_format": "channels_last"}
	switch g := s.(type) {
	case nn.GlobalAveragePooling2D:
		if g.KeepDims {
			cfg["keepdims"] = true
		}
		return "GlobalAveragePooling2D", cfg, nil
	case nn.GlobalMaxPooling2D:
		if g.KeepDims {
			cfg["keepdims"] = true
		}
		return "GlobalMaxPooling2D", cfg, nil
	}
	return "", nil, fmt.Errorf("%s: not a global pooling", nn.Kind(s))
}

// frameLayer writes ZeroPadding2D and Cropping2D: ((top, bottom), (left,
// right)).
func frameLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	frame := func(t, b, l, r int) [][]int { return [][]int{{t, b}, {l, r}} }
	switch f := s.(type) {
	case nn.ZeroPadding2D:
		return "ZeroPadding2D", map[string]any{"padding": frame(f.Top, f.Bottom, f.Left, f.Right), "data_format": "channels_last"}, nil
	case nn.Cropping2D:
		return "Cropping2D", map[string]any{"cropping": frame(f.Top, f.Bottom, f.Left, f.Right), "data_format": "channels_last"}, nil
	}
	return "", nil, fmt.Errorf("%s: not a frame", nn.Kind(s))
}

func upSamplingLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	u := s.(nn.UpSampling2D)
	two := func(v int) int {
		if v == 0 {
			return 2
		}
		return v
	}
	return "UpSampling2D", map[string]any{"size": []int{two(u.SizeH), two(u.SizeW)}, "interpolation": "nearest", "data_format": "channels_last"}, nil
}

func rescalingLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	r := s.(nn.Rescaling)
	return "Rescaling", map[string]any{"scale": r.Scale, "offset": r.Offset}, nil
}

// normalizationLayer writes Keras's Normalization with its mean and
// variance (TF.js has no such layer: tensorflowjs_converter's Keras file
// and Keras itself read it). A mean per channel of a vector flattened
// from an image would be in another order than Keras's, and is refused.
func normalizationLayer(s nn.LayerSpec, c layerContext) (string, map[string]any, error) {
	n := s.(nn.Normalization)
	if len(n.Mean) > 1 && !c.inOrder.identity() {
		return "", nil, fmt.Errorf("a mean per channel of a vector flattened from an image of several channels, which Keras orders otherwise")
	}
	return "Normalization", map[string]any{"axis": -1, "mean": n.Mean, "variance": n.Variance, "invert": n.Invert}, nil
}
