package keras

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// TestReadImageLayers: a model TensorFlow.js wrote (testdata/
// mobile_tfjs.json: tfjs-layers 4.22's model.save of a Sequential with
// Rescaling, ZeroPadding2D, a Conv2D without bias, DepthwiseConv2D,
// SeparableConv2D, a dilated 3×1 Conv2D, Cropping2D, UpSampling2D and
// GlobalAveragePooling2D) reads as these nn layers, with the 5,242
// parameters TF.js's countParams gives, and SeparableConv2D "sep" as two
// nn layers, its depthwise then its pointwise convolution.
func TestReadImageLayers(t *testing.T) {
	m, err := ReadFile(filepath.Join("testdata", "mobile_tfjs.json"))
	if err != nil {
		t.Fatal(err)
	}
	normal := &nn.Initializer{Kind: nn.InitVarianceScaling, Scale: 1, Mode: "fan_avg", Distribution: "truncated_normal"}
	want := nn.Architecture{Name: "mobile", Input: nn.Shape{H: 28, W: 28, C: 1}, Layers: []nn.LayerSpec{
		nn.Rescaling{Scale: 1.0 / 255},
		nn.ZeroPadding2D{Top: 1, Bottom: 1, Left: 1, Right: 1},
		nn.Conv2D{Filters: 16, Kernel: 3, Strides: 2, NoBias: true, KernelInit: normal}, nn.Activation{Fn: "relu"},
		nn.DepthwiseConv2D{Kernel: 3, Strides: 1, Multiplier: 2, Padding: nn.Same, KernelInit: normal, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.DepthwiseConv2D{Kernel: 3, Strides: 1, Multiplier: 1, Padding: nn.Same, NoBias: true, KernelInit: glorot},
		nn.Conv2D{Filters: 32, Kernel: 1, Strides: 1, KernelInit: glorot, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Conv2D{Filters: 32, Kernel: 3, KernelW: 1, Strides: 1, Dilation: 2, Padding: nn.Same, KernelInit: normal, BiasInit: zeros}, nn.Activation{Fn: "relu"},
		nn.Cropping2D{Bottom: 1, Right: 1},
		nn.UpSampling2D{SizeH: 2, SizeW: 2},
		nn.GlobalAveragePooling2D{},
		nn.Dense{Units: 10, KernelInit: normal, BiasInit: zeros}, nn.Activation{Fn: "softmax"},
	}}
	got, _ := json.Marshal(m.Arch)
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("architecture\n got %s\nwant %s", got, wantJSON)
	}
	if m.Form != FormTFJS || m.Params != 5242 || m.Classes != 10 {
		t.Errorf("form %q, %d parameters, %d classes; want %q, 5242, 10", m.Form, m.Params, m.Classes, FormTFJS)
	}
	sep := m.Layers[4]
	if sep.Name != "sep" || sep.First != 6 || sep.End != 9 {
		t.Errorf("SeparableConv2D: %+v, want nn layers 6 … 8", sep)
	}
	model, err := m.NewModel(nn.MNISTSpec, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range model.Tensors() {
		names = append(names, p.Name+" "+sprint(p.Shape))
	}
	wantNames := "2.weight [16 1 3 3], 4.weight [32 1 3 3], 4.bias [32], 6.weight [32 1 3 3], 7.weight [32 32 1 1], 7.bias [32], 9.weight [32 32 3 1], 9.bias [32], 14.weight [10 32], 14.bias [10]"
	if strings.Join(names, ", ") != wantNames {
		t.Errorf("tensors\n got %s\nwant %s", strings.Join(names, ", "), wantNames)
	}
}

// TestParseImageLayers: each image layer's options, in the forms Keras
// writes them, read as nn's layers; and what is refused, naming the
// option.
func TestParseImageLayers(t *testing.T) {
	img := "28, 28, 1"
	flat := layer("Flatten", `"data_format": "channels_last"`)
	gap := layer("GlobalAveragePooling2D", `"data_format": "channels_last", "keepdims": false`)
	for _, tc := range []struct {
		name, json string
		want       string // the architecture's layers as JSON, or the error
	}{
		{"conv without bias", seq(img, layer("Conv2D", `"filters": 4, "kernel_size": 3, "use_bias": false, "bias_initializer": "zeros"`), flat, softmax10),
			`{"type":"conv2d","filters":4,"kernel":3,"strides":1,"padding":"valid","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"no_bias":true}`},
		{"non-square kernel and strides", seq(img, layer("Conv2D", `"filters": 4, "kernel_size": [3, 5], "strides": [2, 1], "padding": "same"`), flat, softmax10),
			`"kernel":3,"strides":2,"padding":"same","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"bias_initializer":{"kind":"constant","value":0},"kernel_w":5,"strides_w":1}`},
		{"dilation", seq(img, layer("Conv2D", `"filters": 4, "kernel_size": 3, "dilation_rate": [2, 3]`), flat, softmax10),
			`"bias_initializer":{"kind":"constant","value":0},"dilation":2,"dilation_w":3}`},
		{"Keras 3 depthwise", seq(img, `{"module": "keras.layers", "class_name": "DepthwiseConv2D", "config": {"name": "dw", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, `+
			`"kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_last", "dilation_rate": [1, 1], "activation": "relu", "use_bias": true, "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null}, `+
			`"bias_regularizer": null, "activity_regularizer": null, "bias_constraint": null, "depth_multiplier": 3, "depthwise_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}, "registered_name": null}, "depthwise_regularizer": null, "depthwise_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 28, 28, 1]}}`, gap, softmax10),
			`{"type":"depthwise_conv2d","kernel":3,"strides":1,"multiplier":3,"padding":"same","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"bias_initializer":{"kind":"constant","value":0}},{"type":"activation","fn":"relu"},{"type":"global_average_pooling2d"}`},
		{"separable without bias", seq(img, layer("SeparableConv2D", `"filters": 8, "kernel_size": 3, "strides": 2, "use_bias": false, "depth_multiplier": 2`), gap, softmax10),
			`{"type":"depthwise_conv2d","kernel":3,"strides":2,"multiplier":2,"padding":"valid","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"no_bias":true},` +
				`{"type":"conv2d","filters":8,"kernel":1,"strides":1,"padding":"valid","init":"he","kernel_initializer":{"kind":"variance_scaling","scale":1,"mode":"fan_avg","distribution":"uniform"},"no_bias":true},{"type":"global_average_pooling2d"}`},
		{"global pools keepdims", seq(img, layer("GlobalMaxPool2D", `"keepdims": true`), flat, softmax10), `{"type":"global_max_pooling2d","keepdims":true},{"type":"flatten"}`},
		{"padding int", seq(img, layer("ZeroPadding2D", `"padding": 2`), gap, softmax10), `{"type":"zero_padding2d","top":2,"bottom":2,"left":2,"right":2}`},
		{"padding pair", seq(img, layer("ZeroPadding2D", `"padding": [1, 3]`), gap, softmax10), `{"type":"zero_padding2d","top":1,"bottom":1,"left":3,"right":3}`},
		{"padding default", seq(img, layer("ZeroPadding2D", `"padding": null`), gap, softmax10), `{"type":"zero_padding2d","top":1,"bottom":1,"left":1,"right":1}`},
		{"cropping tuples", seq(img, layer("Cropping2D", `"cropping": {"class_name": "__tuple__", "items": [{"class_name": "__tuple__", "items": [2, 0]}, {"class_name": "__tuple__", "items": [1, 3]}]}`), gap, softmax10),
			`{"type":"cropping2d","top":2,"bottom":0,"left":1,"right":3}`},
		{"up-sampling", seq(img, layer("UpSampling2D", `"size": 3, "interpolation": "nearest"`), gap, softmax10), `{"type":"up_sampling2d","size_h":3,"size_w":3}`},
		{"rescaling", seq(img, layer("Rescaling", `"scale": 0.00392156862745098, "offset": -1.0`), gap, softmax10), `{"type":"rescaling","scale":0.00392156862745098,"offset":-1}`},
		{"normalization per channel", seq("28, 28, 3", layer("Normalization", `"axis": -1, "invert": false, "mean": [0.485, 0.456, 0.406], "variance": [0.052, 0.050, 0.051]`), gap, softmax10),
			`{"type":"normalization","mean":[0.485,0.456,0.406],"variance":[0.052,0.05,0.051]}`},
		{"normalization tf.keras 2", seq(img, layer("Normalization", `"axis": [-1], "mean": 0.1307, "variance": 0.0095`), gap, softmax10),
			`{"type":"normalization","mean":[0.1307],"variance":[0.0095]}`},
		{"normalization over everything", seq(img, layer("Normalization", `"axis": null, "mean": 3.0, "variance": 2.0, "invert": true`), gap, softmax10),
			`{"type":"normalization","mean":[3],"variance":[2],"invert":true}`},

		// Refused, naming the option.
		{"bilinear", seq(img, layer("UpSampling2D", `"size": 2, "interpolation": "bilinear"`), gap, softmax10),
			`layer 1 "l" (UpSampling2D): interpolation "bilinear" is not supported: meshtrain's UpSampling2D repeats the nearest cell`},
		{"adapted normalization", seq(img, layer("Normalization", `"axis": -1, "mean": null, "variance": null`), gap, softmax10),
			`layer 1 "l" (Normalization): mean and variance are null: the layer was adapted (adapt())`},
		{"normalization axis", seq(img, layer("Normalization", `"axis": 1, "mean": 1, "variance": 1`), gap, softmax10), `axis 1 is not supported`},
		{"normalization channels", seq(img, layer("Normalization", `"axis": -1, "mean": [1, 2], "variance": [1, 2]`), gap, softmax10),
			`layer 1 "l" (Normalization): 2 means and 2 variances for 1 channels`},
		{"rescaling per channel", seq(img, layer("Rescaling", `"scale": [1, 2, 3]`), gap, softmax10), `scale [1,2,3] is not supported: meshtrain's Rescaling takes one number`},
		{"depthwise regularizer", seq(img, layer("DepthwiseConv2D", `"kernel_size": 3, "depthwise_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}`), gap, softmax10),
			`depthwise_regularizer L2 {"l2":0.01} is not supported`},
		{"pointwise constraint", seq(img, layer("SeparableConv2D", `"filters": 2, "kernel_size": 3, "pointwise_constraint": {"class_name": "NonNeg", "config": {}}`), gap, softmax10),
			`pointwise_constraint NonNeg is not supported`},
		{"depth multiplier", seq(img, layer("DepthwiseConv2D", `"kernel_size": 3, "depth_multiplier": 0`), gap, softmax10), `depth_multiplier 0: want an integer of at least 1`},
		{"padding form", seq(img, layer("ZeroPadding2D", `"padding": [1, 2, 3]`), gap, softmax10), `padding [1,2,3]: want an integer, (rows, columns) or ((top, bottom), (left, right))`},
		{"negative cropping", seq(img, layer("Cropping2D", `"cropping": [[1, -1], [0, 0]]`), gap, softmax10), `cropping [[1,-1],[0,0]]: want`},
		{"cropping everything", seq(img, layer("Cropping2D", `"cropping": 14`), gap, softmax10), `layer 1 "l" (Cropping2D): cropping (14, 14) rows and (14, 14) columns of 28×28×1 leaves nothing`},
		{"keepdims", seq(img, layer("GlobalAveragePooling2D", `"keepdims": "yes"`), softmax10), `keepdims "yes": want true or false`},
		{"channels first", seq(img, layer("GlobalAveragePooling2D", `"data_format": "channels_first"`), softmax10), `data_format "channels_first" is not supported`},
		{"zero dilation", seq(img, layer("Conv2D", `"filters": 2, "kernel_size": 3, "dilation_rate": [0, 1]`), flat, softmax10), `dilation_rate [0,1]: want sizes of at least 1`},
		{"groups", seq(img, layer("Conv2D", `"filters": 2, "kernel_size": 3, "groups": 2`), flat, softmax10), `groups 2 is not supported: meshtrain's convolutions take every input channel (DepthwiseConv2D for one group per channel)`},
		{"use_bias type", seq(img, layer("DepthwiseConv2D", `"kernel_size": 3, "use_bias": "no"`), gap, softmax10), `use_bias "no": want true or false`},
		{"unknown option", seq(img, layer("DepthwiseConv2D", `"kernel_size": 3, "depthwise_quantizer": 4`), gap, softmax10), `option depthwise_quantizer = 4 is not supported`},
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

// FuzzParseImageLayers is FuzzParse from seeds of the image layers'
// options: whatever Parse reads checks, and its JSON reads back.
func FuzzParseImageLayers(f *testing.F) {
	img := "8, 8, 2"
	gap := layer("GlobalAveragePooling2D", `"keepdims": false`)
	for _, l := range []string{
		layer("Conv2D", `"filters": 2, "kernel_size": [3, 2], "strides": [2, 1], "dilation_rate": 2, "use_bias": false, "padding": "same"`),
		layer("DepthwiseConv2D", `"kernel_size": 3, "depth_multiplier": 2, "padding": "same"`),
		layer("SeparableConv2D", `"filters": 4, "kernel_size": [3, 3], "dilation_rate": [1, 2]`),
		layer("ZeroPadding2D", `"padding": [[1, 0], [2, 3]]`),
		layer("Cropping2D", `"cropping": [1, 2]`),
		layer("UpSampling2D", `"size": [2, 1]`),
		layer("Rescaling", `"scale": 0.5, "offset": 1`),
		layer("Normalization", `"axis": -1, "mean": [1, 2], "variance": [3, 4]`),
		layer("GlobalMaxPooling2D", `"keepdims": true`),
	} {
		f.Add([]byte(seq(img, l, gap, softmax10)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			var le *LayerError
			if errors.As(err, &le) && le.Class == "" {
				t.Fatalf("a layer's error without its class: %v", err)
			}
			return
		}
		if _, _, err := m.Arch.Check(); err != nil {
			t.Fatalf("Check: %v", err)
		}
		j, err := json.Marshal(m.Arch)
		if err != nil {
			t.Fatal(err)
		}
		back, err := nn.ParseArchitecture(j)
		if err != nil {
			t.Fatalf("%v\n%s", err, j)
		}
		if j2, _ := json.Marshal(back); string(j2) != string(j) {
			t.Fatalf("JSON changed on a round trip:\n%s\n%s", j, j2)
		}
	})
}

// TestImageModelFits: the TF.js model of TestReadImageLayers fits a
// fixed batch of 16 random images with random labels (its loss falls by
// a quarter within 60 Adam steps: a global-pooling head of 5,242
// parameters memorises random labels slowly), run as the trainer runs
// it, 2 shards per batch: the layers learn together, not only each on
// its own.
func TestImageModelFits(t *testing.T) {
	m, err := ReadFile(filepath.Join("testdata", "mobile_tfjs.json"))
	if err != nil {
		t.Fatal(err)
	}
	model, err := m.NewModel(nn.MNISTSpec, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, n*784)
	for i := range x {
		x[i] = float32(rng.IntN(256)) // raw pixels: the model's first layer is Rescaling(1/255)
	}
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(rng.IntN(10))
	}
	opt, err := nn.NewOptimizer(nn.Adam, nn.OptimizerConfig{Params: len(model.Params()), LR: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	first, last := 0.0, 0.0
	for i := range 60 {
		loss, err := model.ForwardBackward(x, labels, n)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = loss
		}
		last = loss
		opt.Step(model.Params(), model.Grads())
	}
	if !(last < 0.75*first) {
		t.Errorf("loss %.4f → %.4f in 60 steps, want it down by a quarter", first, last)
	}
}
