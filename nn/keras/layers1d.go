package keras

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
)

// The text layers, the activation layers with a parameter and
// LayerNormalization, read as nn's layers of the same names, with these
// options: Embedding (input_dim, output_dim, embeddings_initializer;
// mask_zero refused, input_length ignored), Conv1D (filters,
// kernel_size, strides, padding valid, same or causal, dilation_rate,
// use_bias, activation, initializers), MaxPooling1D and
// AveragePooling1D (pool_size, strides, padding), GlobalMaxPooling1D and
// GlobalAveragePooling1D, LayerNormalization (axis −1, or the last axis
// by its index as tf.keras 2 and TF.js write it; epsilon, center, scale,
// initializers), LeakyReLU (alpha, Keras 3's negative_slope), ELU
// (alpha), PReLU (alpha_initializer; shared_axes spanning the positions:
// one slope per channel). A sequence is nn's 1×L×C (see nn.Shape); an
// Embedding takes the model's input, a vector of token ids, which an
// InputLayer of dtype int32 or int64 gives (read as the float32 ids
// meshtrain's data sets hold). A float sequence input, Keras's (L, C),
// is the sequence 1×L×C when a 1-D layer takes it (see sequenceInput).

// sequenceLayers are the classes that take a sequence, Keras's (batch,
// steps, channels).
var sequenceLayers = []string{"Conv1D", "Convolution1D", "MaxPooling1D", "MaxPool1D", "AveragePooling1D", "AvgPool1D",
	"GlobalMaxPooling1D", "GlobalMaxPool1D", "GlobalAveragePooling1D", "GlobalAvgPool1D"}

// sequenceInput is the model's input in: a 2-D Keras input (L, C), which
// shape reads as the image L×C×1, is the sequence 1×L×C when the first
// layer after the input takes a sequence (as in Keras's time-series
// examples: Input(shape=(500, 1)) → Conv1D). Its examples are then
// planar, C×L (see nn.Shape): for one channel the very bytes of
// Keras's L×1.
func sequenceInput(in nn.Shape, es []entry) nn.Shape {
	for _, e := range es {
		if e.class == "InputLayer" {
			continue
		}
		if in.H > 0 && in.C == 1 && slices.Contains(sequenceLayers, e.class) {
			return nn.Shape{H: 1, W: in.H, C: in.W}
		}
		break
	}
	return in
}

// tokenInput is an InputLayer's config without its dtype when that is
// int32 or int64: token ids, which meshtrain's data sets give as the
// float32 values of the ids (exact below 2²⁴; see nn.Embedding).
func tokenInput(cfg map[string]any) map[string]any {
	if d := dtype(cfg["dtype"]); d != "int32" && d != "int64" {
		return cfg
	}
	c := maps.Clone(cfg)
	delete(c, "dtype")
	return c
}

// keras3 reports whether the file was written by Keras 3, whose
// hard_sigmoid is relu6(x + 3)/6 where tf.keras 2's and TensorFlow.js's
// is clip(0.2x + 0.5, 0, 1): its keras_version says 3.x, or, without
// one, it is in Keras 3's form. A TensorFlow.js model is computed by
// TensorFlow.js, with tf.keras 2's definitions, whatever Keras wrote it.
func (m *Model) keras3() bool {
	if m.Form == FormTFJS {
		return false
	}
	if m.KerasVersion != "" {
		return strings.HasPrefix(m.KerasVersion, "3.")
	}
	return m.Form == FormKeras3
}

// single reads an int or a list of one (kernel_size, strides, pool_size,
// dilation_rate of a 1-D layer); def is used for null.
func single(o *options, key string, def int) (int, error) {
	v, _ := o.take(key)
	if v == nil {
		return def, nil
	}
	if n, ok := v.(json.Number); ok {
		return intOf(n)
	}
	list, err := listOf(v)
	if err != nil || len(list) != 1 {
		return 0, fmt.Errorf("%s %s: want an integer or a list of one", key, show(v))
	}
	n, err := intOf(list[0])
	if err != nil {
		return 0, fmt.Errorf("%s %s: want an integer", key, show(v))
	}
	return n, nil
}

func readEmbedding(o *options) ([]nn.LayerSpec, error) {
	in, err := intOpt(o, "input_dim")
	if err != nil {
		return nil, err
	}
	out, err := intOpt(o, "output_dim")
	if err != nil {
		return nil, err
	}
	v, _ := o.take("embeddings_initializer")
	init, err := initializer(v, "RandomUniform")
	if err != nil {
		return nil, fmt.Errorf("embeddings_initializer: %w", err)
	}
	if err := o.flag("mask_zero", "id 0 as padding masked from the layers after"); err != nil {
		return nil, fmt.Errorf("%w: meshtrain reads every step", err)
	}
	if err := o.flag("sparse", "sparse gradients"); err != nil {
		return nil, err
	}
	o.take("input_length") // the input's shape gives the length
	for _, k := range []string{"embeddings_regularizer", "activity_regularizer"} {
		if err := o.null(k, "meshtrain adds no per-layer penalty"); err != nil {
			return nil, err
		}
	}
	if err := o.null("embeddings_constraint", "meshtrain constrains no weights"); err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.Embedding{InputDim: in, OutputDim: out, Init: init}}, nil
}

func readConv1D(o *options) ([]nn.LayerSpec, error) {
	filters, err := intOpt(o, "filters")
	if err != nil {
		return nil, err
	}
	var c nn.Conv1D
	c.Filters = filters
	for _, f := range []struct {
		key string
		to  *int
		def int
	}{{"kernel_size", &c.Kernel, 0}, {"strides", &c.Strides, 1}, {"dilation_rate", &c.Dilation, 1}} {
		if *f.to, err = single(o, f.key, f.def); err != nil {
			return nil, err
		}
		if *f.to < 1 {
			return nil, fmt.Errorf("%s %d: want at least 1", f.key, *f.to)
		}
	}
	if c.Strides > 1 && c.Dilation > 1 {
		// Keras refuses it too ("strides > 1 not supported in conjunction
		// with dilation_rate > 1").
		return nil, fmt.Errorf("strides %d with dilation_rate %d is not supported: Keras refuses a dilated convolution with a stride", c.Strides, c.Dilation)
	}
	if v, _ := o.take("groups"); v != nil {
		if g, err := intOf(v); err != nil || g != 1 {
			return nil, fmt.Errorf("groups %s is not supported: meshtrain's convolutions take every input channel", show(v))
		}
	}
	if v, _ := o.take("padding"); v != nil {
		s, _ := v.(string)
		switch strings.ToLower(s) {
		case "valid":
		case "same":
			c.Padding = nn.Same
		case "causal":
			c.Padding = nn.Causal
		default:
			return nil, fmt.Errorf("padding %s is not supported: meshtrain's Conv1D has valid, same and causal", show(v))
		}
	}
	if err := channelsLast(o); err != nil {
		return nil, err
	}
	bias, err := useBias(o)
	if err != nil {
		return nil, err
	}
	c.NoBias = !bias
	fn, kernel, biasInit, err := kernelLayer(o)
	if err != nil {
		return nil, err
	}
	c.KernelInit = kernel
	if bias {
		c.BiasInit = biasInit
	}
	return withActivation([]nn.LayerSpec{c}, fn), nil
}

// readPool1D reads MaxPooling1D, or AveragePooling1D when avg.
func readPool1D(avg bool) func(o *options) ([]nn.LayerSpec, error) {
	return func(o *options) ([]nn.LayerSpec, error) {
		size, strides, pad, err := poolWindow(o, single)
		if err != nil {
			return nil, err
		}
		if avg {
			return []nn.LayerSpec{nn.AveragePooling1D{Size: size, Strides: strides, Padding: pad}}, nil
		}
		return []nn.LayerSpec{nn.MaxPooling1D{Size: size, Strides: strides, Padding: pad}}, nil
	}
}

// readGlobalPool1D reads GlobalMaxPooling1D, or GlobalAveragePooling1D
// when avg.
func readGlobalPool1D(avg bool) func(o *options) ([]nn.LayerSpec, error) {
	return func(o *options) ([]nn.LayerSpec, error) {
		if err := channelsLast(o); err != nil {
			return nil, err
		}
		if err := o.flag("keepdims", "an output of 1×C"); err != nil {
			return nil, fmt.Errorf("%w: meshtrain's global pooling gives a vector of C", err)
		}
		if avg {
			return []nn.LayerSpec{nn.GlobalAveragePooling1D{}}, nil
		}
		return []nn.LayerSpec{nn.GlobalMaxPooling1D{}}, nil
	}
}

// constantInit reads one of a normalisation's or PReLU's initializers:
// nil when it is Keras's default, the constant def.
func constantInit(o *options, key, defName string, def float64) (*nn.Initializer, error) {
	v, _ := o.take(key)
	init, err := initializer(v, defName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if init.Kind == nn.InitConstant && init.Value == def {
		return nil, nil
	}
	return init, nil
}

// readLayerNorm reads LayerNormalization over the last axis.
func readLayerNorm(o *options) ([]nn.LayerSpec, error) {
	var n nn.LayerNormalization
	if v, _ := o.take("axis"); v != nil {
		if list, err := listOf(v); err == nil && len(list) == 1 {
			v = list[0]
		}
		a, err := intOf(v)
		if err != nil || a == 0 || a < -1 {
			return nil, fmt.Errorf("axis %s is not supported: meshtrain normalises over the last axis alone (-1)", show(v))
		}
		if a > 0 {
			n.Axis = a // checked against the input's rank (see nn.LayerNormalization)
		}
	}
	if v, _ := o.take("epsilon"); v != nil {
		e, err := floatOf(v)
		if err != nil {
			return nil, fmt.Errorf("epsilon: %w", err)
		}
		if e <= 0 {
			return nil, fmt.Errorf("epsilon %s is not supported: want one above 0", show(v))
		}
		n.Epsilon = e
	}
	for _, f := range []struct {
		key string
		off *bool
	}{{"center", &n.NoCenter}, {"scale", &n.NoScale}} {
		if v, _ := o.take(f.key); v != nil {
			on, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("%s %s: want true or false", f.key, show(v))
			}
			*f.off = !on
		}
	}
	if err := o.flag("rms_scaling", "RMS normalisation"); err != nil {
		return nil, err
	}
	var err error
	if n.BetaInit, err = constantInit(o, "beta_initializer", "Zeros", 0); err != nil {
		return nil, err
	}
	if n.GammaInit, err = constantInit(o, "gamma_initializer", "Ones", 1); err != nil {
		return nil, err
	}
	for _, k := range []string{"beta_regularizer", "gamma_regularizer"} {
		if err := o.null(k, "meshtrain adds no per-layer penalty"); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"beta_constraint", "gamma_constraint"} {
		if err := o.null(k, "meshtrain constrains no weights"); err != nil {
			return nil, err
		}
	}
	return []nn.LayerSpec{n}, nil
}

// alphaOpt reads the first of keys that is set, a finite number, or def.
func alphaOpt(o *options, def float64, keys ...string) (float64, error) {
	for _, k := range keys {
		if v, _ := o.take(k); v != nil {
			f, err := floatOf(v)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", k, err)
			}
			return f, nil
		}
	}
	return def, nil
}

// readLeakyReLU reads LeakyReLU: its slope is alpha in tf.keras 2 and
// TensorFlow.js, negative_slope in Keras 3, 0.3 by default in all three.
func readLeakyReLU(o *options) ([]nn.LayerSpec, error) {
	a, err := alphaOpt(o, 0.3, "negative_slope", "alpha")
	if err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.LeakyReLU{Alpha: a}}, nil
}

func readELU(o *options) ([]nn.LayerSpec, error) {
	a, err := alphaOpt(o, 1, "alpha")
	if err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.ELU{Alpha: a}}, nil
}

// readPReLU reads PReLU; nn checks shared_axes against the input (one
// slope per channel).
func readPReLU(o *options) ([]nn.LayerSpec, error) {
	init, err := constantInit(o, "alpha_initializer", "Zeros", 0)
	if err != nil {
		return nil, err
	}
	if err := o.null("alpha_regularizer", "meshtrain adds no per-layer penalty"); err != nil {
		return nil, err
	}
	if err := o.null("alpha_constraint", "meshtrain constrains no weights"); err != nil {
		return nil, err
	}
	p := nn.PReLU{AlphaInit: init}
	if v, _ := o.take("shared_axes"); v != nil {
		if _, ok := v.(json.Number); ok {
			v = []any{v}
		}
		list, err := listOf(v)
		if err != nil {
			return nil, fmt.Errorf("shared_axes: %w", err)
		}
		for _, a := range list {
			n, err := intOf(a)
			if err != nil {
				return nil, fmt.Errorf("shared_axes %s: want integers", show(v))
			}
			p.SharedAxes = append(p.SharedAxes, n)
		}
	}
	return []nn.LayerSpec{p}, nil
}
