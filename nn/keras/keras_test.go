package keras

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// glorot and zeros are Keras's default kernel and bias initializers as nn
// takes them.
var (
	glorot = &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "uniform"}
	zeros  = &nn.Initializer{Kind: nn.InitConstant}
)

// mnistCNN is the classic Keras MNIST CNN (keras/examples/mnist_cnn.py)
// in nn's layers.
func mnistCNN() nn.Architecture {
	return nn.Architecture{Name: "sequential", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 32, Kernel: 3, Strides: 1, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Conv2D{Filters: 64, Kernel: 3, Strides: 1, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2, Strides: 2},
		nn.Dropout{Rate: 0.25},
		nn.Flatten{},
		nn.Dense{Units: 128, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Dropout{Rate: 0.5},
		nn.Dense{Units: 10, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "softmax"},
	}}
}

// TestReadFiles: the fixtures (written by hand in each form Keras
// writes, see testdata) read as the nn layers they define, the same model
// whatever the form.
func TestReadFiles(t *testing.T) {
	cnn := mnistCNN()
	lenet := nn.Architecture{Name: "lenet", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 6, Kernel: 5, Strides: 1, Padding: nn.Same, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.AveragePooling2D{Size: 2, Strides: 2},
		nn.Conv2D{Filters: 16, Kernel: 5, Strides: 1, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.AveragePooling2D{Size: 2, Strides: 2},
		nn.Flatten{},
		nn.Dense{Units: 120, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Dense{Units: 84, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Dense{Units: 10, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "softmax"},
	}}
	mlp := nn.Architecture{Name: "sequential", Input: nn.Shape{C: 784}, Layers: []nn.LayerSpec{
		nn.Dense{Units: 512, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"}, nn.Dropout{Rate: 0.2},
		nn.Dense{Units: 512, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"}, nn.Dropout{Rate: 0.2},
		nn.Dense{Units: 10, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "softmax"},
	}}
	chain := nn.Architecture{Name: "chain", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Conv2D{Filters: 8, Kernel: 3, Strides: 1, Padding: nn.Same,
			KernelInit: &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "truncated_normal"}, BiasInit: zeros},
		nn.Activation{Fn: "relu"},
		nn.MaxPooling2D{Size: 2, Strides: 2},
		nn.Flatten{},
		nn.Dropout{Rate: 0.1},
		nn.Dense{Units: 10, KernelInit: &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 2, Mode: "fan_in", Distribution: "uniform"},
			BiasInit: &nn.Initializer{Kind: nn.InitConstant, Value: 0.01}},
	}}
	for _, tc := range []struct {
		file, form, version, class string
		arch                       nn.Architecture
		params                     int
		layers                     []string // the file's layers: index, class, name, nn layers
	}{
		{"mnist_cnn_tfkeras2.json", FormKeras2, "2.11.0", "Sequential", cnn, 1199882, []string{
			"0 InputLayer conv2d_input []", "1 Conv2D conv2d [0 1]", "2 Conv2D conv2d_1 [2 3]", "3 MaxPooling2D max_pooling2d [4]",
			"4 Dropout dropout [5]", "5 Flatten flatten [6]", "6 Dense dense [7 8]", "7 Dropout dropout_1 [9]", "8 Dense dense_1 [10 11]"}},
		{"mnist_cnn_keras3.json", FormKeras3, "", "Sequential", cnn, 1199882, []string{
			"0 InputLayer input_layer []", "1 Conv2D conv2d [0 1]", "2 Conv2D conv2d_1 [2 3]", "3 MaxPooling2D max_pooling2d [4]",
			"4 Dropout dropout [5]", "5 Flatten flatten [6]", "6 Dense dense [7 8]", "7 Dropout dropout_1 [9]", "8 Dense dense_1 [10 11]"}},
		{"lenet_tfjs_model.json", FormTFJS, "2.15.0", "Sequential", lenet, 61706, []string{
			"0 InputLayer conv2d_input []", "1 Conv2D conv2d [0 1]", "2 AveragePooling2D average_pooling2d [2]", "3 Conv2D conv2d_1 [3 4]",
			"4 AveragePooling2D average_pooling2d_1 [5]", "5 Flatten flatten [6]", "6 Dense dense [7 8]", "7 Dense dense_1 [9 10]", "8 Dense dense_2 [11 12]"}},
		{"mnist_mlp_keras22.json", FormKerasList, "2.2.2", "Sequential", mlp, 669706, []string{
			"0 Dense dense_1 [0 1]", "1 Dropout dropout_1 [2]", "2 Dense dense_2 [3 4]", "3 Dropout dropout_2 [5]", "4 Dense dense_3 [6 7]"}},
		{"functional_chain_keras3.json", FormKeras3, "", "Functional", chain, 15770, []string{
			"0 InputLayer image []", "1 Conv2D conv1 [0 1]", "2 MaxPooling2D pool1 [2]", "3 Flatten flatten [3]", "4 Dropout dropout [4]", "5 Dense logits [5]"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Form != tc.form || m.KerasVersion != tc.version || m.Class != tc.class || m.Params != tc.params || m.Classes != 10 {
				t.Errorf("form %q version %q class %q, %d parameters, %d classes; want %q %q %q, %d, 10",
					m.Form, m.KerasVersion, m.Class, m.Params, m.Classes, tc.form, tc.version, tc.class, tc.params)
			}
			got, _ := json.Marshal(m.Arch)
			want, _ := json.Marshal(tc.arch)
			if string(got) != string(want) {
				t.Errorf("architecture\n got %s\nwant %s", got, want)
			}
			var layers []string
			for _, l := range m.Layers {
				var idx []int
				for i := l.First; i < l.End; i++ {
					idx = append(idx, i)
				}
				layers = append(layers, strings.Join([]string{itoa(l.Index), l.Class, l.Name, sprint(idx)}, " "))
			}
			if !slices.Equal(layers, tc.layers) {
				t.Errorf("layers\n got %q\nwant %q", layers, tc.layers)
			}
			if err := m.CheckData(nn.MNISTSpec); err != nil {
				t.Errorf("MNIST: %v", err)
			}
			model, err := m.NewModel(nn.MNISTSpec, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(model.Params()) != tc.params || model.Name() != tc.arch.Name {
				t.Errorf("built %s of %d parameters", model.Name(), len(model.Params()))
			}
		})
	}
	// The same model in tf.keras 2.x's and Keras 3's forms.
	a, _ := ReadFile(filepath.Join("testdata", "mnist_cnn_tfkeras2.json"))
	b, _ := ReadFile(filepath.Join("testdata", "mnist_cnn_keras3.json"))
	da, _ := a.Arch.Digest()
	db, _ := b.Arch.Digest()
	if da != db {
		t.Errorf("the CNN's digests: %s (tf.keras 2.x) and %s (Keras 3)", da, db)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
func sprint(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = itoa(x)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// TestUnsupportedFiles: each fixture of what meshtrain cannot train is
// refused naming the layer (index, name, class) and what is supported.
func TestUnsupportedFiles(t *testing.T) {
	for _, tc := range []struct {
		file        string
		index       int
		name, class string
		want        string
	}{
		{"unsupported_lstm.json", 1, "lstm", "LSTM", "LSTM is not supported: meshtrain reads InputLayer, Conv2D, MaxPooling2D, AveragePooling2D"},
		{"unsupported_channels_first.json", 1, "conv2d", "Conv2D", `data_format "channels_first" is not supported: meshtrain reads images channels last (H×W×C)`},
		{"unsupported_regularizer.json", 2, "dense", "Dense", `kernel_regularizer L2 {"l2":0.009999999776482582} is not supported: meshtrain adds no per-layer penalty`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", tc.file)
			_, err := ReadFile(path)
			var le *LayerError
			if !errors.As(err, &le) || le.Index != tc.index || le.Name != tc.name || le.Class != tc.class || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want layer %d %q (%s): …%s", err, tc.index, tc.name, tc.class, tc.want)
			}
			if !strings.HasPrefix(err.Error(), path+": layer ") {
				t.Errorf("error %q does not start by naming the file and the layer", err)
			}
		})
	}
}

// seq is a tf.keras 2.x Sequential of the given layers after an
// InputLayer of shape.
func seq(shape string, layers ...string) string {
	// layer names every layer "l": the second and later become l_2 …,
	// as Keras numbers them (a repeated name is refused).
	seen := 0
	for i, l := range layers {
		if strings.Contains(l, `"name": "l", `) {
			if seen++; seen > 1 {
				layers[i] = strings.Replace(l, `"name": "l", `, fmt.Sprintf(`"name": "l_%d", `, seen), 1)
			}
		}
	}
	return `{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, ` + shape +
		`], "dtype": "float32", "sparse": false, "ragged": false, "name": "in"}}, ` + strings.Join(layers, ", ") + `]}, "keras_version": "2.11.0", "backend": "tensorflow"}`
}

// layer is one layer of class with config.
func layer(class, config string) string {
	return `{"class_name": "` + class + `", "config": {"name": "l", ` + config + `}}`
}

const softmax10 = `{"class_name": "Dense", "config": {"name": "out", "units": 10, "activation": "softmax"}}`

// TestParse: the options Keras names, read as nn's layers, and what is
// refused; inline models, one point each.
func TestParse(t *testing.T) {
	flat := layer("Flatten", `"data_format": "channels_last"`)
	for _, tc := range []struct {
		name, json string
		want       string // the architecture's layers as JSON, or the error
	}{
		{"strides and same padding", seq("28, 28, 1", layer("Conv2D", `"filters": 4, "kernel_size": 3, "strides": [2, 2], "padding": "same", "activation": "tanh"`), flat, softmax10),
			`{"type":"conv2d","filters":4,"kernel":3,"strides":2,"padding":"same","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"bias_initializer":{"kind":"constant","value":0}},{"type":"activation","fn":"tanh"}`},
		{"pools", seq("28, 28, 1", layer("MaxPool2D", `"pool_size": 3, "strides": 1, "padding": "same"`), layer("AvgPool2D", `"pool_size": [2, 2], "strides": null`), flat, softmax10),
			`{"type":"max_pooling2d","size":3,"strides":1,"padding":"same"},{"type":"average_pooling2d","size":2,"strides":2,"padding":"valid"}`},
		{"2-D input, reshape", seq("28, 28", layer("Reshape", `"target_shape": [784]`), layer("Reshape", `"target_shape": [28, 28, -1]`), flat, softmax10),
			`{"type":"reshape","to":[784]},{"type":"reshape","to":[28,28,-1]}`},
		{"activation layers", seq("784", layer("Dense", `"units": 10`), layer("ReLU", `"max_value": null, "negative_slope": 0.0, "threshold": 0.0`), layer("Activation", `"activation": "linear"`), layer("Softmax", `"axis": -1`)),
			`{"type":"activation","fn":"relu"},{"type":"activation","fn":"linear"},{"type":"activation","fn":"softmax"}`},
		{"initializers by name", seq("784", layer("Dense", `"units": 10, "kernel_initializer": "he_normal", "bias_initializer": "ones"`)),
			`"kernel_initializer":{"kind":"variance_scaling","scale":2,"mode":"fan_in","distribution":"truncated_normal"},"bias_initializer":{"kind":"constant","value":1}`},
		{"initializers with config", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 0.01, "seed": 4}}, "bias_initializer": {"class_name": "Constant", "config": {"value": 0.1}}`)),
			`"kernel_initializer":{"kind":"random_normal","mean":0,"stddev":0.01},"bias_initializer":{"kind":"constant","value":0.1}`},
		{"Keras 2 variance scaling normal", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "VarianceScaling", "config": {"scale": 2.0, "mode": "fan_out", "distribution": "normal", "seed": null}}`)),
			`"kernel_initializer":{"kind":"variance_scaling","scale":2,"mode":"fan_out","distribution":"truncated_normal"}`},
		{"uniform and truncated", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "RandomUniform", "config": {"minval": -0.1, "maxval": 0.1}}, "bias_initializer": {"class_name": "TruncatedNormal", "config": {}}`)),
			`"kernel_initializer":{"kind":"random_uniform","minval":-0.1,"maxval":0.1},"bias_initializer":{"kind":"truncated_normal","mean":0,"stddev":0.05}`},
		{"lecun and glorot normal", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "LecunNormal", "config": {"seed": null}}, "bias_initializer": {"class_name": "GlorotNormal", "config": {"seed": null}}`)),
			`"kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_in","distribution":"truncated_normal"},"bias_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"truncated_normal"}`},
		{"Keras 3 function activation", seq("784", layer("Dense", `"units": 10, "activation": {"module": "keras.activations", "class_name": "function", "config": "tanh", "registered_name": "function"}`), softmax10),
			`{"type":"activation","fn":"tanh"}`},
		{"off options", seq("784", layer("Dense", `"units": 10, "lora_rank": null, "quantization_config": null, "autocast": false`)), `{"type":"dense"`},
		{"input from build_input_shape", `{"class_name": "Sequential", "config": {"name": "s", "layers": [` + softmax10 + `], "build_input_shape": [null, 784]}}`, `"input":[784]`},
		{"input from build_config", `{"module": "keras", "class_name": "Sequential", "config": {"name": "s", "layers": [` + layer("Flatten", `"data_format": null`) + `, ` + softmax10 + `]}, "build_config": {"input_shape": [null, 28, 28]}}`,
			`"input":[28,28,1]`},
		{"tfjs-layers' own save", `{"modelTopology": {"class_name": "Sequential", "config": {"name": "s", "layers": [` + layer("Dense", `"units": 10, "batch_input_shape": [null, 784]`) + `]}, "keras_version": "tfjs-layers 4.17.0", "backend": "tensor_flow.js"}, "format": "layers-model"}`,
			`"input":[784]`},
		{"Keras 2 Functional chain", `{"class_name": "Model", "config": {"name": "m", "layers": [` +
			`{"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 784], "name": "x"}, "inbound_nodes": []},` +
			`{"class_name": "Dense", "name": "h", "config": {"name": "h", "units": 32, "activation": "relu"}, "inbound_nodes": [[["x", 0, 0, {}]]]},` +
			`{"class_name": "Dense", "name": "y", "config": {"name": "y", "units": 10}, "inbound_nodes": [[["h", 0, 0, {}]]]}],` +
			`"input_layers": [["x", 0, 0]], "output_layers": [["y", 0, 0]]}}`,
			`{"type":"dense","units":32`},
		{"Keras 3 single input triple", `{"module": "keras", "class_name": "Functional", "config": {"name": "m", "layers": [` +
			`{"module": "keras.layers", "class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 784], "dtype": "float32", "name": "x"}, "inbound_nodes": []},` +
			`{"module": "keras.layers", "class_name": "Dense", "name": "y", "config": {"name": "y", "units": 10}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 784], "dtype": "float32", "keras_history": ["x", 0, 0]}}], "kwargs": {}}]}],` +
			`"input_layers": ["x", 0, 0], "output_layers": ["y", 0, 0]}}`,
			`"input":[784],"layers":[{"type":"dense","units":10`},

		// Refused.
		{"SimpleRNN", seq("28, 28", layer("SimpleRNN", `"units": 64`)), `layer 1 "l" (SimpleRNN): SimpleRNN is not supported: meshtrain reads InputLayer`},
		{"use_bias false", seq("784", layer("Dense", `"units": 10, "use_bias": false`)), `layer 1 "l" (Dense): use_bias = false is not supported: meshtrain's Dense always has a bias`},
		{"unequal strides", seq("28, 28, 1", layer("MaxPooling2D", `"pool_size": 2, "strides": [1, 2]`)), "strides [1,2] is not supported"},
		{"groups", seq("28, 28, 1", layer("Conv2D", `"filters": 2, "kernel_size": 3, "groups": 2`)), "groups 2 is not supported"},
		{"causal padding", seq("28, 28, 1", layer("Conv2D", `"filters": 2, "kernel_size": 3, "padding": "causal"`)), `padding "causal" is not supported: meshtrain has valid and same`},
		{"activation", seq("784", layer("Dense", `"units": 10, "activation": "mish"`)), `activation "mish" is not supported: meshtrain has relu, tanh, sigmoid, softmax, linear, elu`},
		{"initializer", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "Orthogonal", "config": {"gain": 1.0, "seed": null}}`)),
			"kernel_initializer: Orthogonal is not supported: meshtrain has Zeros, Ones, Constant"},
		{"initializer option", seq("784", layer("Dense", `"units": 10, "kernel_initializer": {"class_name": "RandomNormal", "config": {"mean": 0, "stddev": 1, "extra": 2}}`)),
			"kernel_initializer: RandomNormal: option extra = 2 is not supported"},
		{"constraint", seq("784", layer("Dense", `"units": 10, "kernel_constraint": {"class_name": "MaxNorm", "config": {"max_value": 2, "axis": 0}}`)),
			`kernel_constraint MaxNorm {"axis":0,"max_value":2} is not supported: meshtrain constrains no weights`},
		{"activity regularizer", seq("784", layer("Dense", `"units": 10, "activity_regularizer": {"class_name": "L1", "config": {"l1": 0.01}}`)), "activity_regularizer L1"},
		{"dtype", seq("784", layer("Dense", `"units": 10, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_float16"}, "registered_name": null}`)),
			"dtype mixed_float16 is not supported: meshtrain computes in float32"},
		{"frozen", seq("784", layer("Dense", `"units": 10, "trainable": false`)), "trainable = false is not supported"},
		{"unknown option", seq("784", layer("Dense", `"units": 10, "lora_rank": 4`)), "option lora_rank = 4 is not supported"},
		{"noise shape", seq("784", layer("Dropout", `"rate": 0.5, "noise_shape": [null, 1]`), softmax10), "noise_shape [null,1] is not supported"},
		{"relu with a ceiling", seq("784", softmax10, layer("ReLU", `"max_value": 6.0`)), "max_value 6.0 is not supported"},
		{"softmax over another axis", seq("28, 28, 1", layer("Softmax", `"axis": 1`)), "axis 1 is not supported"},
		{"sparse input", `{"class_name": "Sequential", "config": {"name": "s", "layers": [{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 784], "sparse": true, "name": "in"}}, ` + softmax10 + `]}}`,
			`layer 0 "in" (InputLayer): sparse = true (a sparse input) is not supported`},
		{"unknown size", seq("null, null, 1", softmax10), "size 0 is null: meshtrain needs every size but the batch's"},
		{"rank 4 input", seq("2, 28, 28, 1", softmax10), "4 dimensions: meshtrain reads vectors and H×W×C images"},
		{"nested model", seq("784", `{"class_name": "Sequential", "config": {"name": "inner", "layers": []}}`), `layer 1 "inner" (Sequential): a nested Sequential model is not supported`},
		{"shape error mapped to the Keras layer", seq("28, 28, 1", layer("Conv2D", `"filters": 2, "kernel_size": 3, "activation": "relu"`), softmax10),
			`layer 2 "out" (Dense): the input is an image, 26×26×2: put a Flatten before it`},
		{"too few classes", seq("784", layer("Dense", `"units": 1`)), `layer 1 "l" (Dense): 1 class score: want at least 2`},
		{"duplicate names", strings.Replace(seq("784", layer("Dense", `"units": 32, "activation": "relu"`), layer("Dense", `"units": 10, "activation": "softmax"`)), `"l_2"`, `"l"`, 1),
			`layer 2 "l" (Dense): the name "l" is also layer 1's: Keras refuses a model whose layer names repeat ("All layer names should be unique.")`},
		{"overflowing initializer", seq("784", layer("Dense", `"units": 10, "activation": "softmax", "kernel_initializer": {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": 1e39}}`)),
			`layer 1 "l" (Dense): kernel_initializer: RandomNormal: random_normal initializer: mean 0, stddev 1e+39: draws reach 6e+39, which overflows float32`},
		{"relu last", seq("784", layer("Dense", `"units": 10, "activation": "relu"`)),
			`layer 1 "l" (Dense): the last activation, relu, does not fit the loss`},
		{"tanh last", seq("784", softmax10, `{"class_name": "Activation", "config": {"name": "act", "activation": "tanh"}}`),
			`layer 2 "act" (Activation): the last activation, tanh, does not fit the loss`},
		{"no input shape", `{"class_name": "Sequential", "config": {"name": "s", "layers": [` + softmax10 + `]}}`, "no input shape"},
		{"subclassed", `{"class_name": "MyModel", "config": {}}`, `model class "MyModel": meshtrain reads Sequential and Functional models`},
		{"not a model", `[1, 2]`, "a list, not a JSON object"},
		{"not JSON", `{"class_name": `, "not JSON"},
		{"trailing data", seq("784", softmax10) + ` {}`, "data after the model's object"},
		{"shared layer", `{"class_name": "Functional", "config": {"name": "m", "layers": [` +
			`{"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 10], "name": "x"}, "inbound_nodes": []},` +
			`{"class_name": "Dense", "name": "h", "config": {"name": "h", "units": 10}, "inbound_nodes": [[["x", 0, 0, {}]], [["h", 0, 0, {}]]]}],` +
			`"input_layers": [["x", 0, 0]], "output_layers": [["h", 1, 0]]}}`,
			`layer 1 "h" (Dense): called 2 times (a shared layer: one set of weights used at 2 places) is not supported`},
		{"dead branch", `{"class_name": "Functional", "config": {"name": "m", "layers": [` +
			`{"class_name": "InputLayer", "name": "x", "config": {"batch_input_shape": [null, 10], "name": "x"}, "inbound_nodes": []},` +
			`{"class_name": "Dense", "name": "h", "config": {"name": "h", "units": 10}, "inbound_nodes": [[["x", 0, 0, {}]]]},` +
			`{"class_name": "Dense", "name": "side", "config": {"name": "side", "units": 10}, "inbound_nodes": [[["x", 0, 0, {}]]]}],` +
			`"input_layers": [["x", 0, 0]], "output_layers": [["h", 0, 0]]}}`,
			`layer 2 "side" (Dense): not on the path from the input to the output: the graph branches`},
		{"two outputs", `{"class_name": "Functional", "config": {"name": "m", "layers": [], "input_layers": [["x", 0, 0]], "output_layers": [["a", 0, 0], ["b", 0, 0]]}}`,
			"1 input (x) and 2 outputs (a, b): meshtrain reads a Functional model whose layers each run once, from one input to one output"},
		{"Keras 3 call arguments", `{"module": "keras", "class_name": "Functional", "config": {"name": "m", "layers": [` +
			`{"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [null, 784], "name": "x"}, "inbound_nodes": []},` +
			`{"class_name": "Dropout", "name": "d", "config": {"name": "d", "rate": 0.5}, "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ["x", 0, 0]}}], "kwargs": {"training": false}}]}],` +
			`"input_layers": ["x", 0, 0], "output_layers": ["d", 0, 0]}}`,
			`layer 1 "d" (Dropout): inbound_nodes: a call with training = false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse([]byte(tc.json))
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				b, _ := json.Marshal(m.Arch)
				got = string(b)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCheckData: a model is checked against the data set's image size
// and classes, naming the layers that disagree.
func TestCheckData(t *testing.T) {
	read := func(js string) *Model {
		t.Helper()
		m, err := Parse([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		m    *Model
		spec nn.Spec
		want string
	}{
		{"image", read(seq("28, 28, 1", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.MNISTSpec, ""},
		{"flattened", read(seq("784", softmax10)), nn.MNISTSpec, ""},
		{"2-D", read(seq("28, 28", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.MNISTSpec, ""},
		{"colour", read(seq("28, 28, 3", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.MNISTSpec,
			`the model takes inputs of 28×28×3 (layer 0 "in" (InputLayer)); the data set's are 28×28×1 (28×28×1, or 784 flattened)`},
		{"colour data", read(seq("28, 28, 3", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.Spec{Rows: 28, Cols: 28, Classes: 10, Channels: 3}, ""},
		{"colour data, greyscale model", read(seq("28, 28, 1", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.Spec{Rows: 28, Cols: 28, Classes: 10, Channels: 3},
			"the model takes inputs of 28×28×1 (layer 0 \"in\" (InputLayer)); the data set's are 28×28×3 (28×28×3, or 2352 flattened)"},
		{"transposed", read(seq("14, 56, 1", layer("Flatten", `"data_format": "channels_last"`), softmax10)), nn.MNISTSpec, "the model takes inputs of 14×56×1"},
		{"no InputLayer", read(`{"class_name": "Sequential", "config": {"name": "s", "layers": [` + layer("Dense", `"units": 10, "batch_input_shape": [null, 100]`) + `]}}`), nn.MNISTSpec,
			"the model takes inputs of 100 (its first layer's batch_input_shape)"},
		{"classes", read(seq("784", layer("Dense", `"units": 5, "activation": "softmax"`))), nn.MNISTSpec,
			`the model scores 5 classes (layer 1 "l" (Dense)); the data set has 10: end with a Dense of 10 units`},
		{"binary", read(seq("784", layer("Dense", `"units": 1, "activation": "sigmoid"`))), nn.MNISTSpec, "ends in one output and a sigmoid"},
		{"binary data", read(seq("784", layer("Dense", `"units": 1, "activation": "sigmoid"`))), nn.Spec{Rows: 28, Cols: 28, Classes: 2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.CheckData(tc.spec)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if _, err2 := tc.m.NewModel(tc.spec, 1, 1); (err2 == nil) != (err == nil) {
				t.Errorf("NewModel: %v, CheckData: %v", err2, err)
			}
		})
	}
}

// TestTable: the file's layers against the nn layers they became.
func TestTable(t *testing.T) {
	m, err := ReadFile(filepath.Join("testdata", "mnist_cnn_keras3.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := `#  Keras layer                   nn layers
0  InputLayer "input_layer"      (input 28×28×1)
1  Conv2D "conv2d"               0 conv2d, 1 relu
2  Conv2D "conv2d_1"             2 conv2d, 3 relu
3  MaxPooling2D "max_pooling2d"  4 max_pooling2d
4  Dropout "dropout"             5 dropout
5  Flatten "flatten"             6 flatten
6  Dense "dense"                 7 dense, 8 relu
7  Dropout "dropout_1"           9 dropout
8  Dense "dense_1"               10 dense, 11 softmax
`
	if got := m.Table(); got != want {
		t.Errorf("table\n%s\nwant\n%s", got, want)
	}
}

// TestReadFileRefusesAFIFO: the file is read as every input is, a FIFO
// refused by name rather than waited on.
func TestReadFileRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), "a Keras model's JSON is a few kilobytes") {
		t.Errorf("large file: %v", err)
	}
}

// FuzzParse: whatever the bytes, Parse returns an error or a model whose
// architecture checks, reads back from its canonical JSON, and maps
// every nn layer to one of the file's layers.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(seq("28, 28", layer("Reshape", `"target_shape": [784]`), softmax10)))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			var le *LayerError
			if errors.As(err, &le) && (le.Class == "" || strings.Contains(err.Error(), "nn: ")) {
				t.Fatalf("a layer's error without its class, or with nn's prefix: %v", err)
			}
			return
		}
		classes, params, err := m.Arch.Check()
		if err != nil || classes != m.Classes || params != m.Params {
			t.Fatalf("Check: %d classes, %d parameters, %v; the model says %d, %d", classes, params, err, m.Classes, m.Params)
		}
		if b, err := m.Arch.Buffers(3); err != nil || b.Params != int64(m.Params) || b.Activations <= 0 {
			t.Fatalf("a model that checks has buffers %+v, %v", b, err)
		}
		j, err := json.Marshal(m.Arch)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nn.ParseArchitecture(j); err != nil {
			t.Fatalf("the canonical JSON does not read back: %v\n%s", err, j)
		}
		next := 0
		for _, l := range m.Layers {
			if l.First != next || l.End < l.First {
				t.Fatalf("layers %+v do not tile the nn layers", m.Layers)
			}
			next = l.End
		}
		if next != len(m.Arch.Layers) {
			t.Fatalf("the file's layers cover %d of %d nn layers", next, len(m.Arch.Layers))
		}
	})
}
