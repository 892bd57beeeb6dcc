package kerasio

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the layers of Keras's text and tabular examples: sequences
// (nn's 1×L×C images, planar C×L; Keras's L×C) through Embedding,
// Conv1D and their pooling, LayerNormalization, and the activations
// with parameters of their own.
func init() {
	for kind, r := range map[string]rule{
		"conv1d":                   {weights: []pair{{"weight", "kernel", false}, {"bias", "bias", false}}, flow: fresh, layout: conv1DLayout, keras: conv1DLayer},
		"embedding":                {weights: []pair{{"weight", "embeddings", false}}, flow: fresh, layout: sameLayout, keras: embeddingLayer},
		"max_pooling1d":            {flow: fresh, keras: pool1DLayer},
		"average_pooling1d":        {flow: fresh, keras: pool1DLayer},
		"global_max_pooling1d":     {flow: fresh, keras: globalPool1DLayer},
		"global_average_pooling1d": {flow: fresh, keras: globalPool1DLayer},
		"layer_normalization":      {weights: []pair{{"weight", "gamma", false}, {"bias", "beta", false}}, flow: keep, layout: channelLayout, keras: layerNormLayer},
		"prelu":                    {weights: []pair{{"weight", "alpha", false}}, flow: keep, layout: preluLayout, keras: preluLayer},
		"leaky_relu":               {flow: keep, keras: alphaLayer},
		"elu":                      {flow: keep, keras: alphaLayer},
	} {
		rules[kind] = r
	}
}

// conv1DLayout: nn's weight [F C K] is Keras's kernel [K C F].
func conv1DLayout(p pair, s []int, _ layoutContext) ([]int, []int) {
	if p.keras != "kernel" {
		return s, nil
	}
	return transpose(s, []int{2, 1, 0})
}

func sameLayout(_ pair, s []int, _ layoutContext) ([]int, []int) { return s, nil }

// preluLayout: nn's slopes [C] are Keras's alpha of one per channel,
// shared over the positions: [1 1 C] for an image, [1 C] for a
// sequence, [C] (in the vector's order) for a vector.
func preluLayout(_ pair, s []int, c layoutContext) ([]int, []int) {
	switch len(c.spec.(nn.PReLU).SharedAxes) {
	case 2:
		return []int{1, 1, s[0]}, nil
	case 1:
		return []int{1, s[0]}, nil
	}
	return s, c.in.perm(s[0])
}

func conv1DLayer(s nn.LayerSpec, lc layerContext) (string, map[string]any, error) {
	c := s.(nn.Conv1D)
	st, dl := max(c.Strides, 1), max(c.Dilation, 1)
	if st > 1 && dl > 1 {
		return "", nil, fmt.Errorf("strides %d with dilation %d: Keras's convolutions take one or the other above 1, not both", st, dl)
	}
	pad := c.Padding.String()
	if c.Padding == nn.Causal {
		pad = "causal"
	}
	cfg := kernelConfig(map[string]any{"filters": c.Filters, "kernel_size": []int{c.Kernel}, "strides": []int{st}, "padding": pad,
		"dilation_rate": []int{dl}, "data_format": "channels_last"}, c.KernelInit, c.BiasInit, lc.in.C*c.Kernel, c.Filters*c.Kernel)
	cfg["use_bias"] = !c.NoBias
	return "Conv1D", cfg, nil
}

func embeddingLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	e := s.(nn.Embedding)
	init := initializerConfig(e.Init, map[string]any{"class_name": "RandomUniform", "config": map[string]any{"minval": -0.05, "maxval": 0.05, "seed": nil}}, e.InputDim, e.OutputDim)
	return "Embedding", map[string]any{"input_dim": e.InputDim, "output_dim": e.OutputDim, "embeddings_initializer": init,
		"embeddings_regularizer": nil, "activity_regularizer": nil, "embeddings_constraint": nil, "mask_zero": false}, nil
}

func pool1DLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	class, size, strides, pad := "MaxPooling1D", 0, 0, nn.Valid
	switch p := s.(type) {
	case nn.MaxPooling1D:
		size, strides, pad = p.Size, p.Strides, p.Padding
	case nn.AveragePooling1D:
		class, size, strides, pad = "AveragePooling1D", p.Size, p.Strides, p.Padding
	default:
		return "", nil, fmt.Errorf("%s: not a 1-D pooling", nn.Kind(s))
	}
	if size == 0 {
		size = 2
	}
	return class, map[string]any{"pool_size": []int{size}, "strides": []int{stride(strides, size)}, "padding": pad.String(), "data_format": "channels_last"}, nil
}

func globalPool1DLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	class := "GlobalMaxPooling1D"
	if _, ok := s.(nn.GlobalAveragePooling1D); ok {
		class = "GlobalAveragePooling1D"
	}
	return class, map[string]any{"data_format": "channels_last"}, nil
}

func layerNormLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	n := s.(nn.LayerNormalization)
	eps := n.Epsilon
	if eps == 0 {
		eps = 1e-3
	}
	return "LayerNormalization", map[string]any{"axis": -1, "epsilon": eps, "center": !n.NoCenter, "scale": !n.NoScale,
		"beta_initializer":  initializerConfig(n.BetaInit, map[string]any{"class_name": "Zeros", "config": map[string]any{}}, 1, 1),
		"gamma_initializer": initializerConfig(n.GammaInit, map[string]any{"class_name": "Ones", "config": map[string]any{}}, 1, 1),
		"beta_regularizer":  nil, "gamma_regularizer": nil, "beta_constraint": nil, "gamma_constraint": nil}, nil
}

func preluLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	p := s.(nn.PReLU)
	var shared any
	if len(p.SharedAxes) > 0 {
		shared = p.SharedAxes
	}
	return "PReLU", map[string]any{"alpha_initializer": initializerConfig(p.AlphaInit, map[string]any{"class_name": "Zeros", "config": map[string]any{}}, 1, 1),
		"alpha_regularizer": nil, "alpha_constraint": nil, "shared_axes": shared}, nil
}

// alphaLayer writes LeakyReLU and ELU with their α ("alpha", as tf.keras
// 2 and TF.js name it, and Keras 3 still reads).
func alphaLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	switch a := s.(type) {
	case nn.LeakyReLU:
		return "LeakyReLU", map[string]any{"alpha": a.Alpha}, nil
	case nn.ELU:
		return "ELU", map[string]any{"alpha": a.Alpha}, nil
	}
	return "", nil, fmt.Errorf("%s: not LeakyReLU or ELU", nn.Kind(s))
}
