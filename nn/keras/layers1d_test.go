package keras

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// TestReadTextFiles: the text classifiers, in Keras 3's form (written by
// hand), tf.keras 2's (by hand) and TensorFlow.js's (written by
// tfjs-layers 4.22's model.save, see testdata/README.md), and a TF.js
// model of every text layer and activation, read as the nn layers they
// define. hard_sigmoid is Keras 3's relu6(x + 3)/6 in the Keras 3 file
// and clip(0.2x + 0.5) in the others.
func TestReadTextFiles(t *testing.T) {
	uniform := &nn.Initializer{Kind: nn.InitRandomUniform, Min: -0.05, Max: 0.05}
	tfjsGlorot := &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "truncated_normal"}
	dense := func(units int, init *nn.Initializer) nn.Dense {
		return nn.Dense{Units: units, KernelInit: init, BiasInit: zeros}
	}
	act := func(fn string) nn.Activation { return nn.Activation{Fn: fn} }
	for _, tc := range []struct {
		file, form string
		input      nn.Shape
		layers     []nn.LayerSpec
		classes    int
	}{
		{"text_classifier_keras3.json", FormKeras3, nn.Shape{C: 64}, []nn.LayerSpec{
			nn.Embedding{InputDim: 1000, OutputDim: 16, Init: uniform},
			nn.Conv1D{Filters: 32, Kernel: 5, Strides: 1, Dilation: 1, KernelInit: glorot, BiasInit: zeros}, act("relu"),
			nn.MaxPooling1D{Size: 2, Strides: 2},
			nn.Conv1D{Filters: 32, Kernel: 3, Strides: 1, Dilation: 1, Padding: nn.Causal, NoBias: true, KernelInit: glorot},
			nn.LeakyReLU{Alpha: 0.2},
			nn.GlobalMaxPooling1D{},
			nn.LayerNormalization{Epsilon: 1e-3},
			dense(16, glorot), act("gelu"),
			dense(16, glorot), act("hard_sigmoid"),
			dense(4, glorot), act("softmax"),
		}, 4},
		{"text_classifier_tfkeras2.json", FormKeras2, nn.Shape{C: 64}, []nn.LayerSpec{
			nn.Embedding{InputDim: 1000, OutputDim: 16, Init: uniform},
			nn.Conv1D{Filters: 32, Kernel: 5, Strides: 1, Dilation: 1, Padding: nn.Same, KernelInit: glorot, BiasInit: zeros}, act("relu"),
			nn.AveragePooling1D{Size: 2, Strides: 2},
			nn.PReLU{SharedAxes: []int{1}},
			nn.LayerNormalization{Epsilon: 1e-3, Axis: 2},
			nn.GlobalAveragePooling1D{},
			dense(16, glorot), act("swish"),
			nn.ELU{Alpha: 1},
			dense(16, glorot), act("hard_sigmoid_tf"),
			dense(4, glorot), act("softmax"),
		}, 4},
		{"text_classifier_tfjs_model.json", FormTFJS, nn.Shape{C: 40}, []nn.LayerSpec{
			nn.Embedding{InputDim: 1000, OutputDim: 16, Init: uniform},
			nn.Conv1D{Filters: 32, Kernel: 5, Strides: 1, Dilation: 1, KernelInit: tfjsGlorot, BiasInit: zeros}, act("relu"),
			nn.GlobalMaxPooling1D{},
			nn.LayerNormalization{Epsilon: 1e-3, Axis: 1},
			dense(4, tfjsGlorot), act("softmax"),
		}, 4},
		{"text_layers_tfjs_model.json", FormTFJS, nn.Shape{C: 12}, []nn.LayerSpec{
			nn.Embedding{InputDim: 50, OutputDim: 8, Init: &nn.Initializer{Kind: nn.InitRandomNormal, Stddev: 0.05}},
			nn.Conv1D{Filters: 6, Kernel: 3, Strides: 1, Dilation: 2, Padding: nn.Same, KernelInit: tfjsGlorot, BiasInit: zeros}, act("elu"),
			nn.MaxPooling1D{Size: 2, Strides: 2},
			nn.AveragePooling1D{Size: 3, Strides: 1, Padding: nn.Same},
			nn.Conv1D{Filters: 4, Kernel: 2, Strides: 1, Dilation: 1, Padding: nn.Causal, NoBias: true, KernelInit: tfjsGlorot},
			nn.LeakyReLU{Alpha: 0.1},
			nn.ELU{Alpha: 1},
			nn.PReLU{SharedAxes: []int{1}, AlphaInit: &nn.Initializer{Kind: nn.InitConstant, Value: 0.25}},
			nn.GlobalAveragePooling1D{},
			nn.LayerNormalization{Epsilon: 1e-5, NoCenter: true, Axis: 1},
			dense(7, tfjsGlorot), act("selu"),
			dense(7, tfjsGlorot), act("hard_sigmoid_tf"),
			dense(7, tfjsGlorot), act("softplus"),
			dense(7, tfjsGlorot), act("softsign"),
			dense(7, tfjsGlorot), act("swish"),
			dense(7, tfjsGlorot), act("gelu"),
			dense(7, tfjsGlorot), act("gelu_tanh"),
			dense(3, tfjsGlorot), act("softmax"),
		}, 3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			want := nn.Architecture{Name: m.Arch.Name, Input: tc.input, Layers: tc.layers}
			got, _ := json.Marshal(m.Arch)
			w, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(w) {
				t.Errorf("read\n%s\nwant\n%s", got, w)
			}
			if m.Form != tc.form || m.Classes != tc.classes {
				t.Errorf("form %q, %d classes; want %q and %d", m.Form, m.Classes, tc.form, tc.classes)
			}
			if _, err := m.NewModel(nn.Spec{Rows: 1, Cols: tc.input.C, Classes: tc.classes}, 1, 1); err != nil {
				t.Errorf("NewModel for token sequences of %d: %v", tc.input.C, err)
			}
		})
	}
}

// keras3 is a Keras 3 Sequential of the given layers (Keras 3's form:
// module and registered_name) on an input of shape.
func keras3(shape string, layers ...string) string {
	for i, l := range layers {
		layers[i] = strings.Replace(l, `"name": "l", `, fmt.Sprintf(`"name": "k%d", `, i), 1)
	}
	return `{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, ` +
		shape + `], "dtype": "int32", "sparse": false, "name": "in"}, "registered_name": null}, ` + strings.Join(layers, ", ") + `]}, "registered_name": null}`
}

// TestParseText: the options of the text layers, activations and
// LayerNormalization as Keras names them, one point each, and what is
// refused, naming the option.
func TestParseText(t *testing.T) {
	emb := layer("Embedding", `"input_dim": 100, "output_dim": 4`)
	gmp := layer("GlobalMaxPooling1D", `"data_format": "channels_last", "keepdims": false`)
	out := `{"class_name": "Dense", "config": {"name": "out", "units": 3}}`
	text := func(layers ...string) string {
		return seq("20", append(append([]string{emb}, layers...), gmp, out)...)
	}
	for _, tc := range []struct {
		name, json string
		want       string // part of the architecture's JSON, or the error
	}{
		{"embedding defaults", seq("20", emb, gmp, out),
			`{"type":"embedding","input_dim":100,"output_dim":4,"embeddings_initializer":{"kind":"random_uniform","minval":-0.05,"maxval":0.05}}`},
		{"embedding options", seq("20", layer("Embedding", `"input_dim": 100, "output_dim": 4, "embeddings_initializer": "random_normal", "mask_zero": false, "input_length": 20, "embeddings_regularizer": null`), gmp, out),
			`"embeddings_initializer":{"kind":"random_normal","mean":0,"stddev":0.05}}`},
		{"conv1d integers", text(layer("Conv1D", `"filters": 3, "kernel_size": 2, "strides": 2, "padding": "same", "use_bias": false`)),
			`{"type":"conv1d","filters":3,"kernel":2,"strides":2,"padding":"same","dilation":1,"use_bias":false,"init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"}}`},
		{"conv1d dilated causal", text(layer("Conv1D", `"filters": 3, "kernel_size": [3], "dilation_rate": [2], "padding": "causal", "activation": "selu"`)),
			`"padding":"causal","dilation":2,"use_bias":true`},
		{"pool defaults", text(layer("MaxPooling1D", `"pool_size": null, "strides": null`), layer("AvgPool1D", `"pool_size": 3, "strides": 1, "padding": "same"`)),
			`{"type":"max_pooling1d","size":2,"strides":2,"padding":"valid"},{"type":"average_pooling1d","size":3,"strides":1,"padding":"same"}`},
		{"global average", seq("20", emb, layer("GlobalAveragePooling1D", `"data_format": "channels_last"`), out), `{"type":"global_average_pooling1d"}`},
		{"layer norm on a sequence and after a Dense", text(layer("LayerNormalization", `"axis": -1, "epsilon": 1e-6, "scale": false, "gamma_initializer": "ones"`)) + ``,
			`{"type":"layer_normalization","epsilon":0.000001,"center":true,"scale":false}`},
		{"layer norm initializers", seq("20", emb, gmp, layer("LayerNormalization", `"axis": [1], "beta_initializer": {"class_name": "Constant", "config": {"value": 0.5}}`), out),
			`{"type":"layer_normalization","epsilon":0.001,"center":true,"scale":true,"beta_initializer":{"kind":"constant","value":0.5},"axis":1}`},
		{"layer norm on an image", seq("6, 6, 2", layer("LayerNormalization", `"axis": [3]`), layer("Flatten", `"trainable": true`), out), `"axis":3`},
		{"leaky relu, tf.keras 2", text(layer("LeakyReLU", `"alpha": 0.01`)), `{"type":"leaky_relu","alpha":0.01}`},
		{"leaky relu, Keras 3", text(layer("LeakyReLU", `"negative_slope": 0.2`)), `{"type":"leaky_relu","alpha":0.2}`},
		{"leaky relu default", text(layer("LeakyReLU", `"trainable": true`)), `{"type":"leaky_relu","alpha":0.3}`},
		{"elu default", text(layer("ELU", `"trainable": true`)), `{"type":"elu","alpha":1}`},
		{"prelu", text(layer("PReLU", `"shared_axes": [1], "alpha_initializer": "zeros"`)), `{"type":"prelu","shared_axes":[1]}`},
		{"prelu after a Dense", seq("20", emb, gmp, layer("Dense", `"units": 5`), layer("PReLU", `"shared_axes": null, "alpha_initializer": {"class_name": "Constant", "config": {"value": 0.25}}`), out),
			`{"type":"prelu","alpha_initializer":{"kind":"constant","value":0.25}}`},
		{"activations", text(layer("Activation", `"activation": "silu"`), layer("Activation", `"activation": "gelu_new"`), layer("Activation", `"activation": "softsign"`)),
			`{"type":"activation","fn":"swish"},{"type":"activation","fn":"gelu_tanh"},{"type":"activation","fn":"softsign"}`},
		{"hard_sigmoid, tf.keras 2", text(layer("Activation", `"activation": "hard_sigmoid"`)), `{"type":"activation","fn":"hard_sigmoid_tf"}`},
		{"hard_sigmoid, Keras 3", keras3("20", emb, `{"module": "keras.layers", "class_name": "Activation", "config": {"name": "a", "activation": "hard_sigmoid"}}`, gmp, out),
			`{"type":"activation","fn":"hard_sigmoid"}`},
		{"hard_sigmoid, keras_version 3", strings.Replace(text(layer("Activation", `"activation": "hard_sigmoid"`)), `"2.11.0"`, `"3.3.3"`, 1), `{"type":"activation","fn":"hard_sigmoid"}`},
		{"hard_sigmoid, tf.keras 2.15 in Keras 3's form", strings.TrimSuffix(keras3("20", emb, `{"module": "keras.layers", "class_name": "Activation", "config": {"name": "a", "activation": "hard_sigmoid"}}`, gmp, out), "}") +
			`, "keras_version": "2.15.0"}`, `{"type":"activation","fn":"hard_sigmoid_tf"}`},
		{"a float sequence into Conv1D", seq("500, 1", layer("Conv1D", `"filters": 4, "kernel_size": 3`), gmp, out), `"input":[1,500,1]`},
		{"a float sequence of channels into pooling", seq("50, 3", layer("MaxPooling1D", `"pool_size": 2`), gmp, out), `"input":[1,50,3]`},
		{"a 2-D input into Flatten stays an image", seq("28, 28", layer("Flatten", `"trainable": true`), out), `"input":[28,28,1]`},
		{"int64 token input", strings.Replace(keras3("20", emb, gmp, out), `"int32"`, `"int64"`, 1), `"input":[20]`},

		// Refused, naming the option.
		{"mask_zero", seq("20", layer("Embedding", `"input_dim": 100, "output_dim": 4, "mask_zero": true`), gmp, out),
			`layer 1 "l" (Embedding): mask_zero = true (id 0 as padding masked from the layers after) is not supported: meshtrain reads every step`},
		{"embedding regularizer", seq("20", layer("Embedding", `"input_dim": 100, "output_dim": 4, "embeddings_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}`), gmp, out),
			"embeddings_regularizer L2"},
		{"embedding not first", seq("20", layer("Dense", `"units": 20`), layer("Embedding", `"input_dim": 100, "output_dim": 4`), gmp, out),
			`layer 2 "l_2" (Embedding): an Embedding takes token ids, the model's input: make it the first layer`},
		{"lora", seq("20", layer("Embedding", `"input_dim": 100, "output_dim": 4, "lora_rank": 4`), gmp, out), "option lora_rank = 4 is not supported"},
		{"conv1d groups", text(layer("Conv1D", `"filters": 4, "kernel_size": 2, "groups": 2`)), "groups 2 is not supported"},
		{"conv1d padding", text(layer("Conv1D", `"filters": 4, "kernel_size": 2, "padding": "full"`)), `padding "full" is not supported: meshtrain's Conv1D has valid, same and causal`},
		{"conv1d stride and dilation", text(layer("Conv1D", `"filters": 4, "kernel_size": 2, "strides": 2, "dilation_rate": 2`)), "strides 2 with dilation_rate 2 is not supported"},
		{"conv1d two sizes", text(layer("Conv1D", `"filters": 4, "kernel_size": [2, 2]`)), "kernel_size [2,2]: want an integer or a list of one"},
		{"conv1d channels first", text(layer("Conv1D", `"filters": 4, "kernel_size": 2, "data_format": "channels_first"`)), "data_format \"channels_first\" is not supported"},
		{"conv1d on an image", seq("20, 3, 2", layer("Conv1D", `"filters": 4, "kernel_size": 2`), gmp, out), `layer 1 "l" (Conv1D): the input is 20×3×2: it takes a sequence`},
		{"pool causal", text(layer("MaxPooling1D", `"padding": "causal"`)), `padding "causal" is not supported`},
		{"keepdims", seq("20", emb, layer("GlobalMaxPooling1D", `"keepdims": true`), out), "keepdims = true (an output of 1×C) is not supported"},
		{"rms scaling", text(layer("LayerNormalization", `"rms_scaling": true`)), "rms_scaling = true (RMS normalisation) is not supported"},
		{"layer norm over two axes", text(layer("LayerNormalization", `"axis": [1, 2]`)), "axis [1,2] is not supported: meshtrain normalises over the last axis alone"},
		{"layer norm over the steps", text(layer("LayerNormalization", `"axis": 1`)), `layer 2 "l_2" (LayerNormalization): axis 1 on an input of 1×20×4 is not supported`},
		{"prelu per value", text(layer("PReLU", `"shared_axes": null`)), `layer 2 "l_2" (PReLU): shared_axes none on an input of 1×20×4 is not supported: meshtrain's PReLU learns one slope per channel (PyTorch's), so shared_axes must be [1]`},
		{"prelu constraint", text(layer("PReLU", `"shared_axes": [1], "alpha_constraint": {"class_name": "NonNeg", "config": {}}`)), "alpha_constraint NonNeg is not supported"},
		{"activation", text(layer("Activation", `"activation": "relu6"`)), `activation "relu6" is not supported`},
		{"float input dtype", strings.Replace(keras3("20", emb, gmp, out), `"int32"`, `"float16"`, 1), "dtype float16 is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json))
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			b, _ := json.Marshal(m.Arch)
			if !strings.Contains(string(b), tc.want) {
				t.Fatalf("read %s, want it to contain %s", b, tc.want)
			}
		})
	}
}

// TestTextClassifierTrains: the Keras 3 text classifier (Embedding →
// Conv1D → … → GlobalMaxPooling1D → LayerNormalization → Dense softmax)
// builds from its file, its gradient agrees with finite differences of
// its loss (parameters drawn at the scale of the ones below, away from
// its kinks), and Adam fits a batch of synthetic token sequences, each
// class marked by a keyword among random tokens: the loss falls by half
// in 40 steps.
func TestTextClassifierTrains(t *testing.T) {
	m, err := ReadFile("testdata/text_classifier_keras3.json")
	if err != nil {
		t.Fatal(err)
	}
	model, err := m.NewModel(nn.Spec{Rows: 1, Cols: 64, Classes: 4}, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	rng := rand.New(rand.NewPCG(1, 2))
	x, labels := make([]float32, n*64), make([]int32, n)
	for e := range n {
		labels[e] = int32(e % 4)
		for s := range 64 {
			x[e*64+s] = float32(100 + rng.IntN(900))
		}
		x[e*64+rng.IntN(64)] = float32(1 + 10*int(labels[e]) + rng.IntN(5))
	}
	loss := func() float64 {
		l, err := model.ForwardBackward(x, labels, n)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	p := model.Params()
	saved := slices.Clone(p)
	for i := range p {
		p[i] = float32(0.3 * rng.NormFloat64())
	}
	loss()
	g := slices.Clone(model.Grads())
	var norm float64
	for _, v := range g {
		norm += float64(v) * float64(v)
	}
	norm = math.Sqrt(norm)
	orig := slices.Clone(p)
	along := func(eps float64) float64 {
		defer copy(p, orig)
		for i := range p {
			p[i] = orig[i] + float32(eps*float64(g[i])/norm)
		}
		up := loss()
		for i := range p {
			p[i] = orig[i] - float32(eps*float64(g[i])/norm)
		}
		return (up - loss()) / (2 * eps)
	}
	if num := along(1e-3); math.Abs(num-norm) > 0.02*norm {
		t.Errorf("along the gradient: %.6g, finite difference %.6g", norm, num)
	}
	copy(p, saved)

	opt, err := nn.NewOptimizer(nn.Adam, nn.OptimizerConfig{Params: len(p), LR: 0.003})
	if err != nil {
		t.Fatal(err)
	}
	first, last := 0.0, 0.0
	for i := range 40 {
		l := loss()
		if i == 0 {
			first = l
		}
		last = l
		opt.Step(model.Params(), model.Grads())
	}
	if !(last < first/2) {
		t.Errorf("loss %.4f → %.4f in 40 steps, want it halved", first, last)
	}
	t.Logf("loss %.4f → %.4f", first, last)
}
