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
// launch, worker, compare, eval, export), right after --model, and not
// on sweep.
func TestModelFileFlag(t *testing.T) {
	for _, c := range newApp().Commands {
		names := flagNames(c.Flags)
		i := slices.Index(names, "model-file")
		switch c.Name {
		case "train", "launch", "worker", "compare":
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
// the name "keras"; the recipe is lenet's unless flags say otherwise.
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
	if err := app.Run([]string{"meshtrain", "launch", "--model-file", kerasFixture("mnist_cnn_keras3.json"), "--epochs", "3"}); err != nil {
		t.Fatal(err)
	}
}
