package keras

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshtrain/meshtrain/nn"
)

// activationNames are the activations read, and activationAliases
// the other names Keras and TensorFlow.js give some of them (Keras 3
// serialises swish as silu; TF.js's gelu_new is the tanh approximation).
var (
	activationNames   = []string{"relu", "tanh", "sigmoid", "softmax", "linear", "elu", "selu", "gelu", "swish", "silu", "softplus", "softsign", "hard_sigmoid", "gelu_new"}
	activationAliases = map[string]string{"silu": "swish", "gelu_new": "gelu_tanh"}
)

// activation reads an activation: a name, or Keras 3's serialised
// function ({"class_name": "function", "config": "relu"}); null is
// linear. hard_sigmoid is Keras 3's, relu6(x + 3)/6, when keras3, else
// tf.keras 2's and TensorFlow.js's, clip(0.2x + 0.5, 0, 1) (see
// Model.keras3).
func activation(v any, keras3 bool) (string, error) {
	name := ""
	switch v := v.(type) {
	case nil:
		return "linear", nil
	case string:
		name = v
	case map[string]any:
		name, _ = v["config"].(string)
		if name == "" {
			name, _ = v["class_name"].(string)
		}
	}
	if slices.Contains(activationNames, name) {
		if a, ok := activationAliases[name]; ok {
			return a, nil
		}
		if name == "hard_sigmoid" && !keras3 {
			return "hard_sigmoid_tf", nil
		}
		return name, nil
	}
	return "", fmt.Errorf("activation %s is not supported: meshtrain has %s", show(v), andList(activationNames))
}

// kernelLayer reads the options Conv2D and Dense share after their own:
// activation, use_bias, initializers, regularizers and constraints.
func kernelLayer(o *options) (fn string, kernel, bias *nn.Initializer, err error) {
	v, _ := o.take("activation")
	if fn, err = activation(v, o.keras3); err != nil {
		return "", nil, nil, err
	}
	if !o.used["use_bias"] { // unless read by a caller whose layer may go without a bias
		if v, ok := o.take("use_bias"); ok && v != nil && v != true {
			return "", nil, nil, fmt.Errorf("use_bias = %s is not supported: meshtrain's Dense always has a bias", show(v))
		}
	}
	ki, _ := o.take("kernel_initializer")
	if kernel, err = initializer(ki, "GlorotUniform"); err != nil {
		return "", nil, nil, fmt.Errorf("kernel_initializer: %w", err)
	}
	bi, _ := o.take("bias_initializer")
	if bias, err = initializer(bi, "Zeros"); err != nil {
		return "", nil, nil, fmt.Errorf("bias_initializer: %w", err)
	}
	const noReg = "meshtrain adds no per-layer penalty (--weight-decay is an L2 penalty on every parameter)"
	for _, k := range []string{"kernel_regularizer", "bias_regularizer", "activity_regularizer"} {
		if err := o.null(k, noReg); err != nil {
			return "", nil, nil, err
		}
	}
	for _, k := range []string{"kernel_constraint", "bias_constraint"} {
		if err := o.null(k, "meshtrain constrains no weights"); err != nil {
			return "", nil, nil, err
		}
	}
	return fn, kernel, bias, nil
}

// withActivation appends fn's layer to specs unless it is linear.
func withActivation(specs []nn.LayerSpec, fn string) []nn.LayerSpec {
	if fn == "linear" {
		return specs
	}
	return append(specs, nn.Activation{Fn: fn})
}

// kerasClass is how one Keras layer class becomes nn layers: its name
// and the names older Kerases give it, and read, which takes its options
// (after those every layer has) and returns the nn layers.
type kerasClass struct {
	names []string
	read  func(o *options) ([]nn.LayerSpec, error)
}

// classes is the one table from Keras's layer classes to nn's layers: a
// class nn learns is one entry here (Supported is made from it).
var classes = []kerasClass{
	{[]string{"Conv2D", "Convolution2D"}, readConv2D},
	{[]string{"MaxPooling2D", "MaxPool2D"}, readPool(false)},
	{[]string{"AveragePooling2D", "AvgPool2D"}, readPool(true)},
	{[]string{"Flatten"}, readFlatten},
	{[]string{"Reshape"}, readReshape},
	{[]string{"Dense"}, readDense},
	{[]string{"Dropout"}, readDropout},
	{[]string{"Activation"}, readActivation},
	{[]string{"ReLU"}, readReLU},
	{[]string{"Softmax"}, readSoftmax},
	{[]string{"BatchNormalization"}, readBatchNorm},
	{[]string{"Add"}, readAdd},
	{[]string{"DepthwiseConv2D"}, readDepthwiseConv2D},
	{[]string{"SeparableConv2D", "SeparableConvolution2D"}, readSeparableConv2D},
	{[]string{"GlobalAveragePooling2D", "GlobalAvgPool2D"}, readGlobalPool(false)},
	{[]string{"GlobalMaxPooling2D", "GlobalMaxPool2D"}, readGlobalPool(true)},
	{[]string{"ZeroPadding2D"}, readFrame(false)},
	{[]string{"Cropping2D"}, readFrame(true)},
	{[]string{"UpSampling2D"}, readUpSampling2D},
	{[]string{"Rescaling"}, readRescaling},
	{[]string{"Normalization"}, readNormalization},
	{[]string{"Subtract"}, readMerge(nn.Subtract{})},
	{[]string{"Multiply"}, readMerge(nn.Multiply{})},
	{[]string{"Average"}, readMerge(nn.Average{})},
	{[]string{"Maximum"}, readMerge(nn.Maximum{})},
	{[]string{"Minimum"}, readMerge(nn.Minimum{})},
	{[]string{"Concatenate"}, readConcatenate},
	// The text layers, the activation layers and LayerNormalization
	// (layers1d.go).
	{[]string{"Embedding"}, readEmbedding},
	{[]string{"Conv1D", "Convolution1D"}, readConv1D},
	{[]string{"MaxPooling1D", "MaxPool1D"}, readPool1D(false)},
	{[]string{"AveragePooling1D", "AvgPool1D"}, readPool1D(true)},
	{[]string{"GlobalMaxPooling1D", "GlobalMaxPool1D"}, readGlobalPool1D(false)},
	{[]string{"GlobalAveragePooling1D", "GlobalAvgPool1D"}, readGlobalPool1D(true)},
	{[]string{"LayerNormalization"}, readLayerNorm},
	{[]string{"LeakyReLU"}, readLeakyReLU},
	{[]string{"ELU"}, readELU},
	{[]string{"PReLU"}, readPReLU},
}

// Supported lists the layer classes this package reads.
var Supported = func() []string {
	out := []string{"InputLayer"}
	for _, c := range classes {
		out = append(out, c.names[0])
	}
	return out
}()

// classOf is the table's entry for a class name.
func classOf(name string) (kerasClass, bool) {
	for _, c := range classes {
		if slices.Contains(c.names, name) {
			return c, true
		}
	}
	return kerasClass{}, false
}

// layerSpecs reads one layer (not an InputLayer) as nn layers.
func layerSpecs(e entry, keras3 bool) ([]nn.LayerSpec, error) {
	o := &options{cfg: e.cfg, used: map[string]bool{}, keras3: keras3}
	if err := o.common(); err != nil {
		return nil, err
	}
	switch e.class {
	case "Sequential", "Functional", "Model":
		return nil, fmt.Errorf("a nested %s model is not supported: meshtrain reads one stack of layers (%s)", e.class, andList(Supported))
	}
	c, ok := classOf(e.class)
	if !ok {
		return nil, fmt.Errorf("%s is not supported: meshtrain reads %s", e.class, andList(Supported))
	}
	specs, err := c.read(o)
	if err != nil {
		return nil, err
	}
	return specs, o.rest()
}

func readConv2D(o *options) ([]nn.LayerSpec, error) {
	filters, err := intOpt(o, "filters")
	if err != nil {
		return nil, err
	}
	w, err := window(o)
	if err != nil {
		return nil, err
	}
	if v, _ := o.take("groups"); v != nil {
		if g, err := intOf(v); err != nil || g != 1 {
			return nil, fmt.Errorf("groups %s is not supported: meshtrain's convolutions take every input channel (DepthwiseConv2D for one group per channel)", show(v))
		}
	}
	bias, err := useBias(o)
	if err != nil {
		return nil, err
	}
	fn, kernel, biasInit, err := kernelLayer(o)
	if err != nil {
		return nil, err
	}
	c := w.conv2D(filters)
	c.NoBias, c.KernelInit = !bias, kernel
	if bias {
		c.BiasInit = biasInit
	}
	return withActivation([]nn.LayerSpec{c}, fn), nil
}

// readPool reads MaxPooling2D, or AveragePooling2D when avg.
func readPool(avg bool) func(o *options) ([]nn.LayerSpec, error) {
	return func(o *options) ([]nn.LayerSpec, error) {
		size, strides, pad, err := poolWindow(o, square)
		if err != nil {
			return nil, err
		}
		if avg {
			return []nn.LayerSpec{nn.AveragePooling2D{Size: size, Strides: strides, Padding: pad}}, nil
		}
		return []nn.LayerSpec{nn.MaxPooling2D{Size: size, Strides: strides, Padding: pad}}, nil
	}
}

// poolWindow reads a pooling layer's pool_size (default 2), strides
// (default the size), padding and data_format, each size read by size
// (square for 2-D, single for 1-D).
func poolWindow(o *options, size func(o *options, key string, def int) (int, error)) (n, strides int, pad nn.Padding, err error) {
	if n, err = size(o, "pool_size", 2); err != nil {
		return 0, 0, 0, err
	}
	if strides, err = size(o, "strides", n); err != nil {
		return 0, 0, 0, err
	}
	if n < 1 || strides < 1 {
		return 0, 0, 0, fmt.Errorf("pool_size %d, strides %d: want at least 1", n, strides)
	}
	if pad, err = padding(o); err != nil {
		return 0, 0, 0, err
	}
	return n, strides, pad, channelsLast(o)
}

func readFlatten(o *options) ([]nn.LayerSpec, error) {
	if err := channelsLast(o); err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.Flatten{}}, nil
}

func readReshape(o *options) ([]nn.LayerSpec, error) {
	v, _ := o.take("target_shape")
	list, err := listOf(v)
	if err != nil {
		return nil, fmt.Errorf("target_shape: %w", err)
	}
	dims := make([]int, len(list))
	for i, d := range list {
		if dims[i], err = intOf(d); err != nil || dims[i] == 0 || dims[i] < -1 {
			return nil, fmt.Errorf("target_shape %s: want sizes ≥ 1 (one may be -1)", show(v))
		}
	}
	var to nn.Shape
	switch len(dims) {
	case 1:
		to = nn.Shape{C: dims[0]}
	case 2:
		to = nn.Shape{H: dims[0], W: dims[1], C: 1}
	case 3:
		to = nn.Shape{H: dims[0], W: dims[1], C: dims[2]}
	default:
		return nil, fmt.Errorf("target_shape %s: meshtrain reshapes to vectors and H×W×C images", show(v))
	}
	return []nn.LayerSpec{nn.Reshape{To: to}}, nil
}

func readDense(o *options) ([]nn.LayerSpec, error) {
	units, err := intOpt(o, "units")
	if err != nil {
		return nil, err
	}
	fn, kernel, bias, err := kernelLayer(o)
	if err != nil {
		return nil, err
	}
	return withActivation([]nn.LayerSpec{nn.Dense{Units: units, KernelInit: kernel, BiasInit: bias}}, fn), nil
}

func readDropout(o *options) ([]nn.LayerSpec, error) {
	v, _ := o.take("rate")
	rate, err := floatOf(v)
	if err != nil {
		return nil, fmt.Errorf("rate: %w", err)
	}
	if err := o.null("noise_shape", "meshtrain's dropout draws each value on its own"); err != nil {
		return nil, err
	}
	o.take("seed") // the run's --seed draws the masks
	return []nn.LayerSpec{nn.Dropout{Rate: rate}}, nil
}

func readActivation(o *options) ([]nn.LayerSpec, error) {
	v, _ := o.take("activation")
	fn, err := activation(v, o.keras3)
	if err != nil {
		return nil, err
	}
	return []nn.LayerSpec{nn.Activation{Fn: fn}}, nil
}

func readReLU(o *options) ([]nn.LayerSpec, error) {
	for _, k := range []string{"max_value", "negative_slope", "threshold"} {
		v, _ := o.take(k)
		if v == nil {
			continue
		}
		if f, err := floatOf(v); err != nil || f != 0 {
			return nil, fmt.Errorf("%s %s is not supported: meshtrain's ReLU is max(x, 0)", k, show(v))
		}
	}
	return []nn.LayerSpec{nn.Activation{Fn: "relu"}}, nil
}

func readSoftmax(o *options) ([]nn.LayerSpec, error) {
	if v, _ := o.take("axis"); v != nil {
		if list, err := listOf(v); err == nil && len(list) == 1 {
			v = list[0]
		}
		if a, err := intOf(v); err != nil || a != -1 {
			return nil, fmt.Errorf("axis %s is not supported: meshtrain's softmax is over the last axis (-1)", show(v))
		}
	}
	return []nn.LayerSpec{nn.Activation{Fn: "softmax"}}, nil
}

// andList is "a, b and c".
func andList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// intOpt reads a required integer option.
func intOpt(o *options, key string) (int, error) {
	v, ok := o.take(key)
	if !ok || v == nil {
		return 0, fmt.Errorf("no %s", key)
	}
	n, err := intOf(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if n < 1 {
		return 0, fmt.Errorf("%s %d: want at least 1", key, n)
	}
	return n, nil
}

// readBatchNorm reads BatchNormalization over the channel axis with
// Keras's initial values (γ ones, β zeros, moving mean zeros, moving
// variance ones).
func readBatchNorm(o *options) ([]nn.LayerSpec, error) {
	if v, _ := o.take("axis"); v != nil {
		if list, err := listOf(v); err == nil && len(list) == 1 {
			v = list[0]
		}
		if a, err := intOf(v); err != nil || a != -1 && a != 3 {
			return nil, fmt.Errorf("axis %s is not supported: meshtrain normalises an image's channels (-1, or 3 as tf.keras 2 writes it)", show(v))
		}
	}
	var b nn.BatchNormalization
	for _, f := range []struct {
		key string
		to  *float64
	}{{"momentum", &b.Momentum}, {"epsilon", &b.Epsilon}} {
		v, _ := o.take(f.key)
		if v == nil {
			continue
		}
		x, err := floatOf(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		if x <= 0 {
			return nil, fmt.Errorf("%s %s is not supported: want one above 0", f.key, show(v))
		}
		*f.to = x
	}
	for _, f := range []struct {
		key string
		off *bool
	}{{"center", &b.NoCenter}, {"scale", &b.NoScale}} {
		if v, _ := o.take(f.key); v != nil {
			on, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("%s %s: want true or false", f.key, show(v))
			}
			*f.off = !on
		}
	}
	for _, f := range []struct {
		key string
		def float64
	}{{"beta_initializer", 0}, {"gamma_initializer", 1}, {"moving_mean_initializer", 0}, {"moving_variance_initializer", 1}} {
		v, _ := o.take(f.key)
		def := map[float64]string{0: "Zeros", 1: "Ones"}[f.def]
		init, err := initializer(v, def)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		if init.Kind != nn.InitConstant || init.Value != f.def {
			return nil, fmt.Errorf("%s %s is not supported: meshtrain's BatchNormalization starts from Keras's %s", f.key, show(v), def)
		}
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
	if err := o.flag("renorm", "batch renormalisation"); err != nil {
		return nil, err
	}
	o.take("renorm_momentum") // tf.keras 2's, unused without renorm
	o.take("fused")           // tf.keras 2's choice of kernel, not of result
	return []nn.LayerSpec{b}, nil
}

// readAdd reads Add, which sums a Functional model's tensors.
func readAdd(*options) ([]nn.LayerSpec, error) { return []nn.LayerSpec{nn.Add{}}, nil }
