package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// kerasFixture is a model file of nn/keras's tests.
func kerasFixture(name string) string {
	return filepath.Join("..", "..", "nn", "keras", "testdata", name)
}

// TestModelFileFlag: --model-file is where a model is taken (train,
// launch, worker, compare, sweep, eval, export), right after --model.
func TestModelFileFlag(t *testing.T) {
	for _, c := range newApp().Commands {
		names := flagNames(c.Flags)
		i := slices.Index(names, "model-file")
		switch c.Name {
		case "train", "launch", "worker", "compare", "sweep":
			if i < 1 || names[i-1] != "model" {
				t.Errorf("%s: --model-file at %d, after %v", c.Name, i, names[max(0, i-1):i])
			}
		case "eval", "export":
			if i < 0 {
				t.Errorf("%s has no --model-file", c.Name)
			}
		default:
			if i >= 0 {
				t.Errorf("%s has --model-file", c.Name)
			}
		}
	}
}

// TestModelFileRefusedBeforeWork: a model file meshtrain cannot train,
// or one that does not fit MNIST, is a usage error (exit 2) naming the
// file and the layer, before any work: each case also names a data
// directory that does not exist, which the work would hit first.
func TestModelFileRefusedBeforeWork(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	colour := filepath.Join(t.TempDir(), "colour.json")
	const colourModel = `{"class_name": "Sequential", "config": {"name": "s", "layers": [` +
		`{"class_name": "InputLayer", "config": {"batch_input_shape": [null, 32, 32, 3], "dtype": "float32", "name": "conv2d_input"}},` +
		`{"class_name": "Flatten", "config": {"name": "flatten"}}, {"class_name": "Dense", "config": {"name": "dense", "units": 10}}]}}`
	if err := os.WriteFile(colour, []byte(colourModel), 0o644); err != nil {
		t.Fatal(err)
	}
	bn := kerasFixture("unsupported_lstm.json")
	const bnWant = `layer 1 "lstm" (LSTM): LSTM is not supported: meshtrain reads`
	t.Setenv("TF_CONFIG", `{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}`)
	t.Setenv("MESHTRAIN_CLUSTER_SECRET", strings.Repeat("ab", 32))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"train", []string{"train", "--model-file", bn}, "train: --model-file: " + bn + ": " + bnWant},
		{"launch", []string{"launch", "-n", "2", "--model-file", bn}, bnWant},
		{"worker", []string{"worker", "--model-file", bn}, bnWant},
		{"compare", []string{"compare", "--out", t.TempDir(), "--model-file", bn}, bnWant},
		{"eval", []string{"eval", "--checkpoint", missing, "--model-file", bn}, bnWant},
		{"channels_first", []string{"train", "--model-file", kerasFixture("unsupported_channels_first.json")}, `layer 1 "conv2d" (Conv2D): data_format "channels_first" is not supported`},
		{"regularizer", []string{"launch", "--model-file", kerasFixture("unsupported_regularizer.json")}, `layer 2 "dense" (Dense): kernel_regularizer L2`},
		{"both", []string{"train", "--model", "lenet", "--model-file", kerasFixture("lenet_tfjs_model.json")}, "--model lenet and --model-file"},
		{"not MNIST's shape", []string{"launch", "--model-file", colour}, `the model takes inputs of 32×32×3 (layer 0 "conv2d_input" (InputLayer)); the data set's are 28×28×1 (28×28×1, or 784 flattened)`},
		{"missing file", []string{"train", "--model-file", missing}, "--model-file: open " + missing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"meshtrain", "--log-level", "error"}, tc.args...)
			if tc.args[0] != "eval" {
				args = append(args, "--data-dir", missing)
			}
			err := newApp().RunContext(context.Background(), args)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant a usage error (exit 2) containing %q", err, tc.want)
			}
		})
	}
}

// TestModelFileSetsTheJob: a model file gives the job its builder and
// the name "keras"; the recipe is lenet's unless flags say otherwise (a
// file without compile settings: TestModelFileCompileSettings has those).
func TestModelFileSetsTheJob(t *testing.T) {
	i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == "launch" })
	cmd := *commands[i]
	cmd.Action = func(c *cli.Context) error {
		job, _, err := jobFromFlags(c, 2)
		if err != nil {
			return err
		}
		if job.Model != modelKeras || job.NewModel == nil || job.LR != 0.05 || job.Epochs != 3 {
			t.Errorf("job: model %q, NewModel set %v, lr %v, epochs %d", job.Model, job.NewModel != nil, job.LR, job.Epochs)
		}
		if err := absModelFile(c); err != nil || !filepath.IsAbs(c.String("model-file")) {
			t.Errorf("--model-file %q after absModelFile (%v)", c.String("model-file"), err)
		}
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{&cmd}}
	if err := app.Run([]string{"meshtrain", "launch", "--model-file", kerasFixture("mnist_cnn_tfkeras2.json"), "--epochs", "3"}); err != nil {
		t.Fatal(err)
	}
}

// TestModelFileCompileSettings: a model file's recorded optimizer,
// learning rate and loss (each form's) set the job unless flags give
// them, and the line printed says which; a loss meshtrain cannot honour
// is a usage error.
func TestModelFileCompileSettings(t *testing.T) {
	// A Keras 3 file whose optimizer meshtrain does not know.
	b, err := os.ReadFile(kerasFixture("mnist_cnn_keras3.json"))
	if err != nil {
		t.Fatal(err)
	}
	custom := filepath.Join(t.TempDir(), "custom_optimizer.json")
	i := strings.LastIndex(string(b), `"compile_config"`)
	if err := os.WriteFile(custom, []byte(string(b[:i])+`"compile_config": {"optimizer": {"class_name": "Custom>Shampoo", "config": {"learning_rate": 0.3}}, "loss": "categorical_crossentropy"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		flags      []string
		optimizer  string
		lr, mom    float64
		schedule   string
		line       string
		notes      int
		err        string
	}{
		{"TF.js model.save", "compile_adam_tfjs_model.json", nil, "adam", 0.002, 0, "constant",
			"optimizer: adam lr 0.002, constant schedule; loss categorical_crossentropy (the model file's compile settings (trainingConfig): Adam lr 0.002; --optimizer, --lr, --momentum and --lr-schedule override)", 0, ""},
		{"TF.js Nesterov", "compile_nesterov_tfjs_model.json", nil, "nesterov", 0.05, 0.9, "constant",
			"optimizer: nesterov momentum 0.9 lr 0.05, constant schedule; loss sparse_categorical_crossentropy", 0, ""},
		{"--lr wins", "compile_adam_tfjs_model.json", []string{"--lr", "0.01"}, "adam", 0.01, 0, "constant",
			"optimizer: adam lr 0.01, constant schedule; loss categorical_crossentropy (--lr given; the rest from the model file's compile settings (trainingConfig): Adam lr 0.002)", 0, ""},
		{"--optimizer and --lr-schedule win", "compile_nesterov_tfjs_model.json", []string{"--optimizer", "sgd", "--lr-schedule", "step"}, "sgd", 0.05, 0.9, "step",
			"optimizer: sgd momentum 0.9 lr 0.05, step schedule; loss sparse_categorical_crossentropy (--optimizer, --lr-schedule given; the rest from the model file's compile settings (trainingConfig): Momentum lr 0.05)", 0, ""},
		{"tensorflowjs_converter (tf.keras 2)", "lenet_tfjs_model.json", []string{"--ignore-weights"}, "momentum", 0.05, 0.9, "constant",
			"optimizer: momentum momentum 0.9 lr 0.05, constant schedule; loss sparse_categorical_crossentropy (the model file's compile settings (training_config): SGD lr 0.05", 0, ""},
		{"Keras 3", "mnist_cnn_keras3.json", nil, "adam", 0.001, 0, "constant",
			"optimizer: adam lr 0.001, constant schedule; loss categorical_crossentropy (the model file's compile settings (compile_config): Adam lr 0.001", 0, ""},
		{"none recorded", "mnist_cnn_tfkeras2.json", nil, "sgd", 0.05, 0.9, "step",
			"optimizer: sgd momentum 0.9 lr 0.05, step schedule after 0.1 epochs of warm-up (lenet's recipe: the model file records no compile settings)", 0, ""},
		{"none recorded, --lr given", "mnist_cnn_tfkeras2.json", []string{"--lr", "0.1"}, "sgd", 0.1, 0.9, "step",
			"optimizer: sgd momentum 0.9 lr 0.1, step schedule after 0.1 epochs of warm-up (lenet's recipe with --lr: the model file records no compile settings)", 0, ""},
		{"an optimizer meshtrain does not know", custom, nil, "sgd", 0.05, 0.9, "step",
			"optimizer: sgd momentum 0.9 lr 0.05, step schedule after 0.1 epochs of warm-up; loss categorical_crossentropy (lenet's recipe: the model file's optimizer Shampoo is not one meshtrain knows)", 1, ""},
		{"mean squared error", "compile_rmsprop_mse_tfjs_model.json", nil, "", 0, 0, "", "", 0,
			"its compile settings: \"trainingConfig\": loss: mean_squared_error: meshtrain trains classifiers with cross-entropy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := slices.IndexFunc(commands, func(c *cli.Command) bool { return c.Name == "launch" })
			cmd := *commands[i]
			var line string
			var notes []string
			cmd.Action = func(c *cli.Context) error {
				cfg, err := configFromFlags(c)
				if err != nil {
					return err
				}
				m, err := readModelFile(c)
				if err != nil {
					return err
				}
				line, notes, err = applyCompile(c, &cfg, m)
				if err != nil {
					return err
				}
				if cfg.Optimizer != tc.optimizer || cfg.LR != tc.lr || cfg.Momentum != tc.mom || cfg.Schedule != tc.schedule {
					t.Errorf("optimizer %s lr %v momentum %v schedule %s, want %s %v %v %s", cfg.Optimizer, cfg.LR, cfg.Momentum, cfg.Schedule, tc.optimizer, tc.lr, tc.mom, tc.schedule)
				}
				return nil
			}
			app := &cli.App{Commands: []*cli.Command{&cmd}}
			file := tc.file
			if !filepath.IsAbs(file) {
				file = kerasFixture(file)
			}
			err := app.Run(append([]string{"meshtrain", "launch", "--model-file", file}, tc.flags...))
			if tc.err != "" {
				var ue usageError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a usage error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(line, tc.line) || len(notes) != tc.notes {
				t.Errorf("line %q, notes %q\nwant %q…, %d notes", line, notes, tc.line, tc.notes)
			}
		})
	}
}
