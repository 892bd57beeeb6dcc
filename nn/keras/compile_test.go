package keras

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
)

// withField is the fixture file with its top-level key set to the JSON
// value (a file's recorded settings changed, or added).
func withField(t *testing.T, file, key, value string) []byte {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(readFixture(t, file), &obj); err != nil {
		t.Fatal(err)
	}
	obj[key] = json.RawMessage(value)
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// h5Attrs is a file as an HDF5 model's attributes hold it (tf.keras 2's
// model.save to .h5): "model_config", the model's to_json, beside
// "training_config".
func h5Attrs(t *testing.T, file, training string) []byte {
	t.Helper()
	return []byte(`{"model_config": ` + string(readFixture(t, file)) + `, "training_config": ` + training + `}`)
}

func readFixture(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTraining: the compile settings of each form (TF.js's model.save,
// tensorflowjs_converter's, Keras 3's compile_config, tf.keras 2's
// training_config) read as meshtrain's optimizer, rate and loss; what
// is not followed is noted, and a loss that cannot be honoured is an
// error saying what to compile with.
func TestTraining(t *testing.T) {
	// sigmoid is a binary model's tf.keras 2 JSON with training_config.
	sigmoid := func(training string) []byte {
		s := seq("4", layer("Dense", `"name": "l", "units": 1, "activation": "sigmoid"`))
		return []byte(s[:len(s)-1] + `, "training_config": ` + training + `}`)
	}
	keras3SGD := `{"optimizer": "sgd", "loss": {"module": "keras.losses", "class_name": "SparseCategoricalCrossentropy", ` +
		`"config": {"name": "sparse_categorical_crossentropy", "reduction": "sum_over_batch_size", "from_logits": true, "ignore_class": null}, "registered_name": null}}`
	schedule := `{"optimizer": {"module": "keras.optimizers", "class_name": "SGD", "config": {"name": "SGD", "learning_rate": ` +
		`{"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 1000, "decay_rate": 0.9}}, ` +
		`"momentum": 0.0, "nesterov": false, "clipnorm": 1.0}}, "loss": "categorical_crossentropy"}`
	for _, tc := range []struct {
		name  string
		file  []byte
		want  Training // Notes: substrings, in order
		error string
	}{
		{name: "TF.js model.save, Adam", file: readFixture(t, "compile_adam_tfjs_model.json"),
			want: Training{Field: "trainingConfig", Optimizer: nn.Adam, LR: 0.002, Class: "Adam", Loss: lossCategorical}},
		{name: "TF.js model.save, Nesterov momentum", file: readFixture(t, "compile_nesterov_tfjs_model.json"),
			want: Training{Field: "trainingConfig", Optimizer: nn.Nesterov, LR: 0.05, Momentum: 0.9, Class: "Momentum", Loss: lossSparse}},
		{name: "TF.js model.save, mean squared error", file: readFixture(t, "compile_rmsprop_mse_tfjs_model.json"),
			error: `mean_squared_error: meshtrain trains classifiers with cross-entropy, which follows the last activation (softmax or none: categorical; a sigmoid after one output: binary); compile the model with categorical_crossentropy, sparse_categorical_crossentropy or binary_crossentropy, or delete "trainingConfig" from the file`},
		{name: "tensorflowjs_converter of tf.keras 2.15, SGD momentum", file: readFixture(t, "lenet_tfjs_model.json"),
			want: Training{Field: "training_config", Optimizer: nn.Momentum, LR: 0.05, Momentum: 0.9, Class: "SGD", Loss: lossSparse}},
		{name: "Keras 3 compile_config, Adam", file: readFixture(t, "mnist_cnn_keras3.json"),
			want: Training{Field: "compile_config", Optimizer: nn.Adam, LR: 0.001, Class: "Adam", Loss: lossCategorical}},
		{name: "tf.keras 2 to_json: none", file: readFixture(t, "mnist_cnn_tfkeras2.json")},
		{name: "tf.keras 2 HDF5 attributes, Adadelta (mnist_cnn.py's)",
			file: h5Attrs(t, "mnist_cnn_tfkeras2.json", `{"loss": "categorical_crossentropy", "metrics": ["accuracy"], "weighted_metrics": null, "loss_weights": null, `+
				`"optimizer_config": {"class_name": "Adadelta", "config": {"name": "Adadelta", "learning_rate": 0.001, "decay": 0.0, "rho": 0.95, "epsilon": 1e-07}}}`),
			want: Training{Field: "training_config", Optimizer: nn.Adam, LR: 0.001, Class: "Adadelta", Loss: lossCategorical,
				Notes: []string{"the file's optimizer Adadelta is not one of meshtrain's (sgd, momentum, nesterov, adam): adam at its learning rate instead"}}},
		{name: "Keras 3 optimizer by name, loss object from logits",
			file: withField(t, "functional_chain_keras3.json", "compile_config", keras3SGD),
			want: Training{Field: "compile_config", Optimizer: nn.SGD, LR: 0.01, Class: "sgd", Loss: lossSparse}},
		{name: "Keras 3 learning-rate schedule and clipnorm",
			file: withField(t, "mnist_cnn_keras3.json", "compile_config", schedule),
			want: Training{Field: "compile_config", Optimizer: nn.SGD, LR: 0.1, Class: "SGD", Loss: lossCategorical,
				Notes: []string{"schedule ExponentialDecay is not followed: its initial rate, constant", "the file's clipnorm 1 is not applied"}}},
		{name: "Adam's other betas", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"class_name": "Adam", "config": {"learning_rate": 0.01, "beta_1": 0.5, "amsgrad": true}}, "loss": "categorical_crossentropy"}`),
			want: Training{Field: "compile_config", Optimizer: nn.Adam, LR: 0.01, Class: "Adam", Loss: lossCategorical,
				Notes: []string{"Adam beta_1 0.5 is not applied", "amsgrad is not applied"}}},
		{name: "an unknown optimizer", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"class_name": "Custom>MyOptimizer", "config": {"learning_rate": 3}}, "loss": null}`),
			want: Training{Field: "compile_config", Class: "MyOptimizer", Notes: []string{"MyOptimizer is not one meshtrain knows: the recipe's optimizer and learning rate instead"}}},
		{name: "from logits false without softmax", file: withField(t, "functional_chain_keras3.json", "compile_config", `{"optimizer": "adam", "loss": "sparse_categorical_crossentropy"}`),
			want: Training{Field: "compile_config", Optimizer: nn.Adam, LR: 0.001, Class: "adam", Loss: lossSparse,
				Notes: []string{"takes probabilities (from_logits false) but the model ends without softmax: meshtrain takes its outputs as logits"}}},
		{name: "binary cross-entropy on one sigmoid",
			file: sigmoid(`{"loss": "binary_crossentropy", "optimizer_config": {"class_name": "SGD", "config": {"learning_rate": 0.2}}}`),
			want: Training{Field: "training_config", Optimizer: nn.SGD, LR: 0.2, Class: "SGD", Loss: lossBinary}},
		{name: "categorical on one sigmoid", file: sigmoid(`{"loss": "categorical_crossentropy", "optimizer_config": null}`),
			error: "categorical_crossentropy on one sigmoid output: a single output takes binary cross-entropy; compile with binary_crossentropy"},
		{name: "binary on ten softmax outputs", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": "adam", "loss": "binary_crossentropy"}`),
			error: "binary_crossentropy on 10 outputs is multi-label"},
		{name: "two losses", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": "adam", "loss": ["categorical_crossentropy", "mse"]}`),
			error: `"compile_config": loss: 2 losses: the model has one output`},
		{name: "not an object", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `3`), error: `"compile_config" is a number, not an object`},
		{name: "optimizer without a class", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"config": {}}}`),
			error: `"compile_config": optimizer: {"config":{}}: no class_name`},
		{name: "a rate that is not a number", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"class_name": "Adam", "config": {"learning_rate": "fast"}}}`),
			error: `Adam learning_rate: "fast": want a number`},
		{name: "a negative rate", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"class_name": "Adam", "config": {"learning_rate": -1}}}`),
			error: "Adam learning_rate -1: want > 0"},
		{name: "momentum 1", file: withField(t, "mnist_cnn_keras3.json", "compile_config", `{"optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.1, "momentum": 1}}}`),
			error: "SGD momentum 1: want a value in (0, 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Parse(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Training()
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("error %v, want one containing %q", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			notes, wantNotes := got.Notes, tc.want.Notes
			got.Notes, tc.want.Notes = nil, nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if len(notes) != len(wantNotes) {
				t.Fatalf("notes %q, want %d containing %q", notes, len(wantNotes), wantNotes)
			}
			for i, w := range wantNotes {
				if !strings.Contains(notes[i], w) {
					t.Errorf("note %d %q lacks %q", i, notes[i], w)
				}
			}
		})
	}
}

// FuzzTraining: whatever the compile settings, Training returns an error
// or an optimizer nn builds (or none), at a rate > 0.
func FuzzTraining(f *testing.F) {
	for _, s := range []string{`{"optimizer": "adam", "loss": "categorical_crossentropy"}`,
		`{"optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.1, "momentum": 0.9, "nesterov": true}}, "loss": {"class_name": "function", "config": "sparse_categorical_crossentropy"}}`,
		`{"optimizer": {"class_name": "RMSprop", "config": {"learning_rate": {"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.1}}}}, "loss": {"out": "binary_crossentropy"}}`} {
		f.Add(s)
	}
	base, err := os.ReadFile(filepath.Join("testdata", "mnist_cnn_keras3.json"))
	if err != nil {
		f.Fatal(err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(base, &obj); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, settings string) {
		if !json.Valid([]byte(settings)) {
			return
		}
		obj["compile_config"] = json.RawMessage(settings)
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(b)
		if err != nil {
			t.Fatal(err) // the architecture is the fixture's
		}
		tr, err := m.Training()
		if err != nil || tr.Optimizer == "" {
			return
		}
		if _, err := nn.NewOptimizer(tr.Optimizer, nn.OptimizerConfig{Params: 1, LR: tr.LR, Momentum: tr.Momentum}); err != nil {
			t.Fatalf("%+v: %v", tr, err)
		}
	})
}
