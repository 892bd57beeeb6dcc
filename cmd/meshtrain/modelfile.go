package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
	"github.com/meshtrain/meshtrain/nn/kerasio"
)

// A model file is its own flag, --model-file FILE, rather than a value of
// --model (keras:FILE): --model's value is compared between peers and
// recorded in summaries and checkpoints, where a path (which differs from
// host to host, and says nothing of what the file holds) does not belong;
// the peers compare the model's architecture instead. --model keeps its
// closed list of names; the file is an input, checked as the others are
// (a regular file), whose form is told from its contents, so it needs no
// prefix; and a shell completes a path after --model-file but not after
// "keras:" (a word break in bash).

// modelKeras is Config.Model, the name settings, summaries and
// checkpoints give a model read from a file. Not the model's own name
// (Keras numbers them: sequential, sequential_1 …, so two sessions'
// files of one model differ in it): peers compare the architecture.
const modelKeras = "keras"

// modelFileFlag is --model-file, on train, launch, worker, compare and
// eval.
func modelFileFlag(eval bool) cli.Flag {
	usage := "train the model a Keras file defines instead of --model: model.to_json() of tf.keras 2.x or Keras 3, or a TensorFlow.js model.json " +
		"(layers InputLayer, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Reshape, Dense, Dropout, Activation, ReLU, Softmax; the loss follows the last activation); " +
		"the optimizer, learning rate and loss its compile settings record (compile_config, training_config, trainingConfig), else lenet's recipe, unless the flags say otherwise; the peers compare its architecture; " +
		"a TF.js model.json whose weightsManifest lists weight files starts training from those weights (see --ignore-weights)"
	if eval {
		usage = "the Keras file (as train's --model-file) the checkpoint must hold the model of (the checkpoint records its architecture, so eval needs no file); " +
			"without --checkpoint, a TF.js model.json whose weightsManifest lists weight files, to score with those weights"
	}
	return &cli.StringFlag{Name: "model-file", Category: catTraining, Usage: usage}
}

// withModelFile inserts --model-file and --ignore-weights after --model
// in flags.
func withModelFile(flags []cli.Flag) []cli.Flag {
	i := slices.IndexFunc(flags, func(f cli.Flag) bool { return f.Names()[0] == "model" })
	return slices.Insert(slices.Clone(flags), i+1, modelFileFlag(false), ignoreWeightsFlag())
}

// ignoreWeightsFlag is --ignore-weights: a model.json whose
// weightsManifest lists weight files starts training from them
// (fine-tuning) unless it is set.
func ignoreWeightsFlag() cli.Flag {
	return &cli.BoolFlag{Name: "ignore-weights", Category: catTraining,
		Usage: "with a TF.js model.json whose weightsManifest lists weight files: train from fresh initial values (--seed) instead of starting from those weights"}
}

// modelWeights reads the weights a TF.js model.json's manifest lists
// for m (nil when it lists none): a weight file missing, short or long,
// a weight the model lacks or lacks, a shape other than the model's, is
// a usage error naming the weight and the file.
// Train's commands say how to train without them (hint).
func modelWeights(path string, m *keras.Model, hint bool) ([][]kerasio.Weight, error) {
	if m.Form != keras.FormTFJS {
		return nil, nil
	}
	w, err := kerasio.ReadTFJSWeights(path, m)
	if err != nil {
		if hint {
			err = fmt.Errorf("%w (to train the architecture alone, from fresh values: --ignore-weights)", err)
		}
		return nil, usageError{fmt.Errorf("--model-file: weights: %w", err)}
	}
	return w, nil
}

// readModelFile reads --model-file: nil if it is not given. A file that
// cannot be read or trained is a usage error (exit 2), naming the file and
// the layer.
func readModelFile(c *cli.Context) (*keras.Model, error) {
	path := c.String("model-file")
	if path == "" {
		return nil, nil
	}
	if c.IsSet("model") {
		return nil, usageError{fmt.Errorf("--model %s and --model-file %s: give one (the file defines the model)", c.String("model"), path)}
	}
	m, err := keras.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--model-file: %w", err)}
	}
	return m, nil
}

// modelFromFile sets job's model to --model-file's, if given: its builder
// (Job.NewModel) and name; it returns the file's model (nil without the
// flag). Without --allow-unverified or --data the data set is MNIST, so
// the file's input shape and classes are checked against it here, before
// any work; with either, when the data is loaded.
func modelFromFile(c *cli.Context, job *mirrored.Job) (*keras.Model, error) {
	m, err := readModelFile(c)
	if err != nil || m == nil {
		return nil, err
	}
	if !job.AllowUnverified && job.Data == "" {
		if err := m.CheckData(nn.MNISTSpec); err != nil {
			return nil, usageError{fmt.Errorf("--model-file %s: %w (MNIST)", c.String("model-file"), err)}
		}
	}
	job.Model, job.NewModel = modelKeras, m.NewModel
	log := logger(c, c.Command.Name)
	log.Info("model file", zap.String("path", c.String("model-file")), zap.String("form", m.Form),
		zap.String("class", m.Class), zap.String("name", m.Arch.Name), zap.Int("params", m.Params))
	line, notes, err := applyCompile(c, &job.Config, m)
	if err != nil {
		return nil, err
	}
	for _, msg := range append([]string{line}, notes...) {
		if c.Command.Name == "worker" {
			log.Info(msg)
		} else {
			fmt.Fprintln(screen.Stdout(), msg)
		}
	}
	if !c.Bool("ignore-weights") {
		w, err := modelWeights(c.String("model-file"), m, true)
		if err != nil {
			return nil, err
		}
		if w != nil {
			job.NewModel = func(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
				model, err := m.NewModel(spec, seed, shards)
				if err != nil {
					return nil, err
				}
				return model, kerasio.Import(m.Arch, model, w)
			}
			msg := fmt.Sprintf("starting from the weights of %s (%d parameters; --ignore-weights to train from fresh values)", c.String("model-file"), m.Params)
			if c.Command.Name == "worker" {
				log.Info(msg)
			} else {
				fmt.Fprintln(screen.Stdout(), msg)
			}
		}
	}
	logger(c, c.Command.Name).Debug("model file's layers\n" + m.Table())
	return m, nil
}

// absModelFile makes --model-file absolute, so that the workers launch
// starts find it whatever their directory.
func absModelFile(c *cli.Context) error {
	path := c.String("model-file")
	if path == "" || filepath.IsAbs(path) {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return errors.Join(fmt.Errorf("--model-file %s", path), err)
	}
	return c.Set("model-file", abs)
}
