package evaluate

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
)

// testImages opens the image set cfg names and returns its test images
// (the first TestExamples). With ck, a split is made with its seed (as
// training made it, unless cfg.DataRead says another) and a table's
// columns encoded as it records.
func testImages(ctx context.Context, cfg Config, log *zap.Logger, ck *checkpoint.Checkpoint) (*data.Images, error) {
	set := cfg.MNIST
	if set == nil {
		read := cfg.DataRead
		if ck != nil && read.SplitSeed == 0 {
			read.SplitSeed = uint64(ck.Seed)
		}
		if ck != nil && ck.Features != "" && read.Features == nil {
			read.Features = new(data.Features)
			if err := json.Unmarshal([]byte(ck.Features), read.Features); err != nil {
				return nil, fmt.Errorf("checkpoint %s: metadata input_features: %w", cfg.Checkpoint, err)
			}
		}
		opts := data.ImageOptions{Format: cfg.DataFormat, MNIST: data.MNISTOptions{Dir: cfg.DataDir, AllowUnverified: cfg.AllowUnverified, Logger: log.Named("data")}, Read: read}
		var err error
		if set, err = data.OpenImages(ctx, cfg.Data, opts); err != nil {
			return nil, err
		}
	}
	test := set.Test.Head(cfg.TestExamples)
	if err := replica.CheckImages(test); err != nil {
		return nil, err
	}
	return test, nil
}

// weights evaluates the model cfg.Architecture defines with the weights
// cfg.Weights gives it: a model file's, with no checkpoint.
func weights(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Architecture == nil || cfg.Weights == nil {
		return nil, errors.New("no checkpoint and no model file with weights to evaluate")
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	model, err := cfg.Architecture.Build(0, nn.DefaultShards)
	if err != nil {
		return nil, err
	}
	if err := cfg.Weights(model); err != nil {
		return nil, err
	}
	test, err := testImages(ctx, cfg, log, nil)
	if err != nil {
		return nil, err
	}
	if norm := data.InputNorm(test, replica.Normalizes(model)); norm != test.Norm.Resolve() { // the rule training applies
		t := *test
		t.Norm, test = norm, &t
	}
	if d := test.Dim(); d != model.InputDim() {
		return nil, fmt.Errorf("the model takes %d inputs, the test images have %d values (%d×%d×%d)", model.InputDim(), d, test.Rows, test.Cols, test.C())
	}
	x, y := replica.Examples(test, 0, test.N)
	for i, c := range y {
		if int(c) >= model.Classes() {
			return nil, fmt.Errorf("test example %d is of class %d: the model scores %d classes", i, c, model.Classes())
		}
	}
	lossSum, correct, err := model.Evaluate(x, y, test.N)
	if err != nil {
		return nil, err
	}
	if err := predictions(cfg, model, x, test.N); err != nil {
		return nil, err
	}
	return &Result{Model: cfg.Architecture.Name, Examples: test.N, Correct: correct,
		Accuracy: float64(correct) / float64(test.N), Loss: lossSum / float64(test.N)}, nil
}

// predictions writes the model's outputs for x to cfg.Predictions, if set.
func predictions(cfg Config, model nn.Model, x []float32, n int) error {
	if cfg.Predictions == "" {
		return nil
	}
	p, ok := model.(nn.Predictor)
	if !ok {
		return fmt.Errorf("--predictions: model %s hands out no outputs", model.Name())
	}
	out := make([]float32, n*p.Outputs())
	if err := p.Predict(x, n, out); err != nil {
		return err
	}
	return WritePredictions(cfg.Predictions, out, n, p.Outputs())
}

// WritePredictions writes n×k float32 outputs as a NumPy .npy file
// (format 1.0, '<f4', C order, shape (n, k)): what numpy.load reads as
// model.predict's array. It is written whole or not at all.
func WritePredictions(path string, out []float32, n, k int) error {
	if len(out) != n*k {
		return fmt.Errorf("%d outputs for %d×%d", len(out), n, k)
	}
	header := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, k)
	// The magic, version, header length and header take a multiple of 64
	// bytes, the header ending in a newline (NEP 1's .npy format).
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return fmt.Errorf("--predictions: %w", err)
	}
	w := bufio.NewWriter(f)
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(header)))
	w.WriteString(header)
	var b [4]byte
	for _, v := range out {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		w.Write(b[:])
	}
	if err := w.Flush(); err != nil {
		f.Abort()
		return fmt.Errorf("--predictions %s: %w", path, err)
	}
	return f.Commit()
}

// Inputs says how the inputs of a checkpoint's model were normalised in
// training ("(x/255 - 0.1307)/0.3081"): what an exported model must be
// fed for eval's predictions. A checkpoint of formats 1 and 2 records
// none; they were all MNIST's, normalised as data.MNISTNorm.
func Inputs(path string) (string, error) {
	ck, err := checkpoint.Read(path)
	if err != nil {
		return "", err
	}
	if ck.InputStd == 0 {
		return data.MNISTNorm.String(), nil
	}
	return data.Normalization{Scale: ck.InputScale, Mean: ck.InputMean, Std: ck.InputStd}.String(), nil
}

// Load reads a checkpoint as evaluation does (verified, its model built
// from the architecture it records, or want's, or its built-in name) and
// returns the model with its parameters and buffers, and its
// architecture: what an export writes.
func Load(path string, want *nn.Architecture) (nn.Model, nn.Architecture, error) {
	ck, err := checkpoint.Read(path)
	if err != nil {
		return nil, nn.Architecture{}, err
	}
	if ck.Model == replica.SparseModel {
		return nil, nn.Architecture{}, fmt.Errorf("checkpoint %s is of a %s run, not of a model of layers", path, replica.SparseModel)
	}
	model, err := checkpointModel(ck, path, want)
	if err != nil {
		return nil, nn.Architecture{}, err
	}
	a, ok := model.(interface{ Architecture() nn.Architecture })
	if !ok {
		return nil, nn.Architecture{}, fmt.Errorf("checkpoint %s: model %s has no architecture", path, ck.Model)
	}
	return model, a.Architecture(), nil
}
