package evaluate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
)

// Config is an evaluation of a saved model on an image set's test
// images (MNIST's by default).
type Config struct {
	Checkpoint string // safetensors file written by a Job
	// Data, DataFormat and DataDir choose the image set as in Config.
	Data, DataFormat, DataDir string
	// DataRead is how user data are read (as Config.DataRead); its
	// SplitSeed 0 means the checkpoint's seed, which split the data in
	// training, and a table's columns are encoded as the checkpoint
	// records.
	DataRead data.ReadOptions
	// AllowUnverified is as Config.AllowUnverified.
	AllowUnverified bool
	MNIST           *data.ImageSet
	// TestExamples, if > 0, evaluates only the first that many.
	TestExamples int
	// Architecture, if set, is the model the checkpoint must hold (its
	// definition, as read from a Keras file): the checkpoint is refused
	// if it records another. Otherwise the model is the one the
	// checkpoint records, by name or by architecture.
	Architecture *nn.Architecture
	// Weights, with no Checkpoint, sets the weights of the model
	// Architecture builds (a TF.js model.json's, see Weights).
	Weights func(nn.Model) error
	// Predictions, if set, is a .npy file to write the outputs of every
	// test example to (see WritePredictions).
	Predictions string
	Logger      *zap.Logger
}

// Result is a checkpoint's test loss and accuracy.
type Result struct {
	Checkpoint string  `json:"checkpoint"`
	Model      string  `json:"model"`
	Step       int     `json:"step"`
	Epoch      int     `json:"epoch"` // epochs completed when it was saved
	Examples   int     `json:"examples"`
	Correct    int     `json:"correct"`
	Accuracy   float64 `json:"test_accuracy"`
	Loss       float64 `json:"test_loss"` // mean
	// RunSteps is the steps the run that saved it takes in all (its
	// epochs × steps per epoch; 0 if the checkpoint does not say): a
	// checkpoint at RunSteps is the run's last, unless a target ended the
	// run sooner.
	RunSteps int `json:"run_steps,omitempty"`
	// Warning says the checkpoint could not be verified (no digest).
	Warning string `json:"warning,omitempty"`
	// ClassNames names the classes by id, as the checkpoint records them
	// (an image folder's class folders, a table's label values); nil
	// when the data set numbered its classes only.
	ClassNames []string `json:"class_names,omitempty"`
}

// Checkpoint loads a checkpoint into its model and evaluates it on
// the test set. The checkpoint is verified as a resume verifies it
// (checkpoint.Read): a damaged one, or one holding a non-finite value, is
// an error, not an accuracy. The model is built for the data the
// checkpoint records (MNIST's for formats 1 and 2), and the test images
// must be of that size.
func Checkpoint(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.TestExamples < 0 {
		return nil, fmt.Errorf("test examples %d: want ≥ 0 (0: all)", cfg.TestExamples)
	}
	if cfg.Checkpoint == "" {
		return weights(ctx, cfg)
	}
	ck, err := checkpoint.Read(cfg.Checkpoint)
	if err != nil {
		return nil, err
	}
	if ck.Model == replica.SparseModel {
		return nil, fmt.Errorf("checkpoint %s is of a %s run: only MNIST models' checkpoints can be evaluated here (a sparse run evaluates on its test files every epoch)", cfg.Checkpoint, replica.SparseModel)
	}
	model, err := checkpointModel(ck, cfg.Checkpoint, cfg.Architecture)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	var warning string
	if w := checkpoint.UnverifiedWarning(ck, cfg.Checkpoint); len(w) > 0 {
		warning = w[0]
		log.Warn(warning)
	}
	test, err := testImages(ctx, cfg, log, ck)
	if err != nil {
		return nil, err
	}
	// The rule training applied (data.InputNorm), then the check that it
	// gives what the checkpoint records.
	if norm := data.InputNorm(test, replica.Normalizes(model)); norm != test.Norm.Resolve() {
		t := *test
		t.Norm, test = norm, &t
	}
	if err := sameNormalization(ck, cfg.Checkpoint, test.Norm); err != nil {
		return nil, err
	}
	if c := max(1, ck.Channels); ck.Classes > 0 && (test.C() != c || test.Rows != ck.Rows || test.Cols != ck.Cols) {
		return nil, fmt.Errorf("checkpoint %s: model %s was trained on %d×%d×%d inputs, the test set's are %d×%d×%d: evaluate it on the data set it was trained on",
			cfg.Checkpoint, ck.Model, ck.Rows, ck.Cols, c, test.Rows, test.Cols, test.C())
	}
	if d := test.Dim(); d != model.InputDim() {
		return nil, fmt.Errorf("checkpoint %s: model %s takes %d inputs, the test images have %d pixels (%d×%d×%d): evaluate it on the data set it was trained on",
			cfg.Checkpoint, ck.Model, model.InputDim(), d, test.Rows, test.Cols, test.C())
	}
	x, y := replica.Examples(test, 0, test.N)
	lossSum, correct, err := model.Evaluate(x, y, test.N)
	if err != nil {
		return nil, fmt.Errorf("evaluating %s: %w", cfg.Checkpoint, err)
	}
	if err := predictions(cfg, model, x, test.N); err != nil {
		return nil, err
	}
	epoch := max(0, ck.Epoch-1) // the pipeline position's epoch is not complete yet
	return &Result{
		Checkpoint: cfg.Checkpoint, Model: ck.Model, Step: ck.Step, Epoch: epoch,
		Examples: test.N, Correct: correct, Accuracy: float64(correct) / float64(test.N), Loss: lossSum / float64(test.N),
		Warning: warning, RunSteps: runSteps(ck), ClassNames: ck.ClassNames,
	}, nil
}

// sameNormalization checks that the test images are normalised as the
// inputs the checkpoint's model was trained on, when it records them: a
// model trained on x/255 scores MNIST's standardised pixels as noise.
func sameNormalization(ck *checkpoint.Checkpoint, path string, norm data.Normalization) error {
	if ck.InputStd == 0 { // not recorded: formats 1 and 2, which were all MNIST's
		return nil
	}
	trained := data.Normalization{Scale: ck.InputScale, Mean: ck.InputMean, Std: ck.InputStd}
	if norm = norm.Resolve(); trained != norm {
		return fmt.Errorf("checkpoint %s: its model was trained on inputs normalised as %s, the test images are normalised as %s: evaluate it on the data set it was trained on", path, trained, norm)
	}
	return nil
}

// checkpointModel builds ck's model for the data it records (from its
// architecture when it records one, or want's) and loads its parameters,
// checking a format 3 file's tensors against the model's.
func checkpointModel(ck *checkpoint.Checkpoint, path string, want *nn.Architecture) (nn.Model, error) {
	spec := nn.MNISTSpec
	if ck.Classes > 0 {
		spec = nn.Spec{Rows: ck.Rows, Cols: ck.Cols, Classes: ck.Classes, Channels: ck.Channels}
	}
	arch, err := checkpointArchitecture(ck, path, want)
	if err != nil {
		return nil, err
	}
	var model nn.Model
	if arch != nil {
		model, err = arch.Build(0, nn.DefaultShards)
		if err == nil && model.Classes() != spec.Classes {
			err = fmt.Errorf("the model scores %d classes, the checkpoint's data set had %d", model.Classes(), spec.Classes)
		}
	} else {
		model, err = nn.NewModelFor(ck.Model, spec, 0, nn.DefaultShards)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if len(ck.Params) != len(model.Params()) {
		return nil, fmt.Errorf("checkpoint %s holds %d parameters but model %s has %d", path, len(ck.Params), ck.Model, len(model.Params()))
	}
	if ck.Layout.Params != nil {
		want := model.Tensors()
		for i, s := range ck.Layout.Params {
			if i >= len(want) || s.Name != want[i].Name || !slices.Equal(s.Shape, want[i].Shape) {
				return nil, fmt.Errorf("checkpoint %s: tensor %d is %s %v, model %s has %v: not a checkpoint of this model", path, i, s.Name, s.Shape, ck.Model, want)
			}
		}
	}
	copy(model.Params(), ck.Params)
	if st, ok := model.(nn.Stateful); ok && len(st.Buffers()) > 0 {
		// The buffers close the state, after the optimizer's (OptState).
		buf := st.Buffers()
		if len(ck.OptState) < len(buf) {
			return nil, fmt.Errorf("checkpoint %s holds %d floats of state, model %s has %d of buffers (%s …): not a checkpoint of this model", path, len(ck.OptState), ck.Model, len(buf), st.BufferTensors()[0].Name)
		}
		copy(buf, ck.OptState[len(ck.OptState)-len(buf):])
	}
	return model, nil
}

// checkpointArchitecture is the architecture to build ck's model from:
// the one ck records, or want; nil for a built-in model named by ck.Model.
// A checkpoint that records another architecture than want is refused.
func checkpointArchitecture(ck *checkpoint.Checkpoint, path string, want *nn.Architecture) (*nn.Architecture, error) {
	if ck.Architecture == "" {
		if want != nil && slices.Contains(nn.ModelNames, ck.Model) {
			return nil, fmt.Errorf("checkpoint %s holds the built-in model %s, not the model file's: evaluate it without a model file", path, ck.Model)
		}
		return want, nil
	}
	a, err := nn.ParseArchitecture([]byte(ck.Architecture))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: metadata architecture: %w", path, err)
	}
	if want != nil {
		have, err1 := a.Digest()
		wanted, err2 := want.Digest()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		if have != wanted {
			return nil, fmt.Errorf("checkpoint %s holds a model of architecture %s (%d layers), the model file defines %s (%d layers): not a checkpoint of this model",
				path, have, len(a.Layers), wanted, len(want.Layers))
		}
	}
	return &a, nil
}

// runSteps is epochs × steps per epoch of the run that saved ck, from its
// recorded settings; 0 if they do not say.
func runSteps(ck *checkpoint.Checkpoint) int {
	var settings struct {
		Epochs string `json:"epochs"`
	}
	if json.Unmarshal([]byte(ck.Config), &settings) != nil {
		return 0
	}
	epochs, err := strconv.Atoi(settings.Epochs)
	if err != nil {
		return 0
	}
	return epochs * ck.StepsPerEpoch
}
