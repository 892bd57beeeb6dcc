package kerasio

import (
	"fmt"
	"math"

	"github.com/meshtrain/meshtrain/nn"
)

// layerContext is what a rule's keras function knows of the layer
// besides its spec: its input and output shapes.
type layerContext struct {
	in, out nn.Shape
	inOrder order // the order of a vector input (see order.go)
}

// pair2 is Keras's [n, n] for a square window or stride.
func pair2(n int) []int { return []int{n, n} }

// kernelConfig is the options Conv2D and Dense share, as Keras writes
// them: no activation (nn's is a layer of its own), a bias, the
// initializers (Keras's defaults when the spec has none), no
// regularizers or constraints.
// fanIn and fanOut are the kernel's fans, for an untruncated normal
// variance scaling (see initializerConfig).
func kernelConfig(cfg map[string]any, kernel, bias *nn.Initializer, fanIn, fanOut int) map[string]any {
	cfg["activation"] = "linear"
	cfg["use_bias"] = true
	cfg["kernel_initializer"] = initializerConfig(kernel, map[string]any{"class_name": "GlorotUniform", "config": map[string]any{"seed": nil}}, fanIn, fanOut)
	cfg["bias_initializer"] = initializerConfig(bias, map[string]any{"class_name": "Zeros", "config": map[string]any{}}, 1, 1)
	for _, k := range []string{"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint"} {
		cfg[k] = nil
	}
	return cfg
}

// initializerConfig is Keras's serialised initializer for i (def when
// nil): the draws differ from Keras's but not their distribution. A
// variance scaling of an untruncated normal, which TF.js lacks (its
// "normal" is truncated, as tf.keras 2's), is written as the
// RandomNormal it is for the layer's fans.
func initializerConfig(i *nn.Initializer, def map[string]any, fanIn, fanOut int) map[string]any {
	if i == nil {
		return def
	}
	obj := func(class string, cfg map[string]any) map[string]any {
		return map[string]any{"class_name": class, "config": cfg}
	}
	switch i.Kind {
	case nn.InitRandomUniform:
		return obj("RandomUniform", map[string]any{"minval": i.Min, "maxval": i.Max, "seed": nil})
	case nn.InitRandomNormal:
		return obj("RandomNormal", map[string]any{"mean": i.Mean, "stddev": i.Stddev, "seed": nil})
	case nn.InitTruncatedNormal:
		return obj("TruncatedNormal", map[string]any{"mean": i.Mean, "stddev": i.Stddev, "seed": nil})
	case nn.InitVarianceScaling:
		if i.Distribution == "untruncated_normal" {
			fan := map[string]float64{"fan_in": float64(fanIn), "fan_out": float64(fanOut), "fan_avg": float64(fanIn+fanOut) / 2}[i.Mode]
			return obj("RandomNormal", map[string]any{"mean": 0, "stddev": math.Sqrt(i.Scale / max(fan, 1)), "seed": nil})
		}
		return obj("VarianceScaling", map[string]any{"scale": i.Scale, "mode": i.Mode, "distribution": i.Distribution, "seed": nil})
	}
	return obj("Constant", map[string]any{"value": i.Value})
}

func stride(s int, def int) int {
	if s == 0 {
		return def
	}
	return s
}

func conv2DLayer(s nn.LayerSpec, lc layerContext) (string, map[string]any, error) {
	c := s.(nn.Conv2D)
	k, st, dl := window2D(c.Kernel, c.KernelW, c.Strides, c.StridesW, c.Dilation, c.DilationW)
	taps := k[0] * k[1]
	if err := kerasWindow(st, dl); err != nil {
		return "", nil, err
	}
	cfg := kernelConfig(map[string]any{
		"filters": c.Filters, "kernel_size": k, "strides": st, "padding": c.Padding.String(),
		"data_format": "channels_last", "dilation_rate": dl,
	}, c.KernelInit, c.BiasInit, lc.in.C*taps, c.Filters*taps)
	cfg["use_bias"] = !c.NoBias
	return "Conv2D", cfg, nil
}

func denseLayer(s nn.LayerSpec, lc layerContext) (string, map[string]any, error) {
	d := s.(nn.Dense)
	return "Dense", kernelConfig(map[string]any{"units": d.Units}, d.KernelInit, d.BiasInit, lc.in.Size(), d.Units), nil
}

func batchNormLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	b := s.(nn.BatchNormalization)
	momentum, eps := b.Momentum, b.Epsilon
	if momentum == 0 {
		momentum = 0.99
	}
	if eps == 0 {
		eps = 1e-3
	}
	c := func(v float64) map[string]any {
		if v == 0 {
			return map[string]any{"class_name": "Zeros", "config": map[string]any{}}
		}
		return map[string]any{"class_name": "Ones", "config": map[string]any{}}
	}
	return "BatchNormalization", map[string]any{
		"axis": -1, "momentum": momentum, "epsilon": eps, "center": !b.NoCenter, "scale": !b.NoScale,
		"beta_initializer": c(0), "gamma_initializer": c(1), "moving_mean_initializer": c(0), "moving_variance_initializer": c(1),
		"beta_regularizer": nil, "gamma_regularizer": nil, "beta_constraint": nil, "gamma_constraint": nil,
	}, nil
}

func poolLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	class, size, strides, pad := "MaxPooling2D", 0, 0, nn.Valid
	switch p := s.(type) {
	case nn.MaxPooling2D:
		size, strides, pad = p.Size, p.Strides, p.Padding
	case nn.AveragePooling2D:
		class, size, strides, pad = "AveragePooling2D", p.Size, p.Strides, p.Padding
	default:
		return "", nil, fmt.Errorf("%s: not a pooling", nn.Kind(s))
	}
	return class, map[string]any{"pool_size": pair2(size), "strides": pair2(stride(strides, size)), "padding": pad.String(), "data_format": "channels_last"}, nil
}

func flattenLayer(nn.LayerSpec, layerContext) (string, map[string]any, error) {
	return "Flatten", map[string]any{"data_format": "channels_last"}, nil
}

// reshapeLayer writes the shape the layer gives (a −1 resolved).
func reshapeLayer(_ nn.LayerSpec, c layerContext) (string, map[string]any, error) {
	return "Reshape", map[string]any{"target_shape": dims(c.out)}, nil
}

func dropoutLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	return "Dropout", map[string]any{"rate": s.(nn.Dropout).Rate, "noise_shape": nil, "seed": nil}, nil
}

// kerasActivations are nn's functions Keras names otherwise (tf.keras
// 2's and TF.js's hard_sigmoid, 0.2x + 0.5), and those no file of the
// TF.js form holds, with why.
var kerasActivations = map[string]struct{ name, refused string }{
	"hard_sigmoid_tf": {name: "hard_sigmoid"},
	"hard_sigmoid":    {refused: "Keras 3's relu6(x + 3)/6, which TF.js and tf.keras 2 (tensorflowjs_converter's Keras) read as 0.2x + 0.5"},
	"gelu_tanh":       {refused: "gelu's tanh approximation, which Keras names by no string and TF.js 4.22 fails to load as gelu_new"},
}

func activationLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	fn := s.(nn.Activation).Fn
	if k, ok := kerasActivations[fn]; ok {
		if k.refused != "" {
			return "", nil, fmt.Errorf("activation %s: %s; export it as ONNX", fn, k.refused)
		}
		fn = k.name
	}
	return "Activation", map[string]any{"activation": fn}, nil
}

func addLayer(nn.LayerSpec, layerContext) (string, map[string]any, error) {
	return "Add", map[string]any{}, nil
}

// dims is s as Keras's shape without the batch: [H, W, C] or [C].
func dims(s nn.Shape) []int {
	if !isImage(s) {
		return []int{s.C}
	}
	return []int{s.H, s.W, s.C}
}

// kerasWindow refuses what Keras's convolutions refuse and nn's take: a
// stride and a dilation both above 1.
func kerasWindow(strides, dilation []int) error {
	if max(strides[0], strides[1]) > 1 && max(dilation[0], dilation[1]) > 1 {
		return fmt.Errorf("strides %v with dilation %v: Keras's convolutions take one or the other above 1, not both", strides, dilation)
	}
	return nil
}
