package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/tensorboard"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
)

// Evaluator defaults.
const (
	// DefaultEvaluatorTimeout is how long the evaluator waits for a new
	// checkpoint before it stops.
	DefaultEvaluatorTimeout = 10 * time.Minute
	// evaluatorPoll is how often it lists the checkpoint directory.
	evaluatorPoll = 500 * time.Millisecond
)

// EvaluatorConfig is TensorFlow's "evaluator" task: a side process that
// follows the chief's checkpoint directory and evaluates each new
// checkpoint on the test set, without joining the training collectives.
type EvaluatorConfig struct {
	// CheckpointDir is the chief's (shared with it).
	CheckpointDir string
	// LogDir, if set, receives TensorBoard scalars under
	// LogDir/evaluator/validation: epoch_loss and epoch_accuracy at each
	// checkpoint's global step, as Keras's validation run has them.
	LogDir string
	// Model is the run's --model, checked only to refuse sparse runs at
	// once (the checkpoint says which model it holds).
	Model string
	// Data, DataFormat, DataDir, MNIST and TestExamples choose the test
	// set, as in evaluate.Config.
	Data, DataFormat, DataDir string
	// DataRead is how user data are read (as mirrored.Config.DataRead,
	// SplitSeed the run's seed).
	DataRead     data.ReadOptions
	MNIST        *data.ImageSet
	TestExamples int
	// AllowUnverified is as mirrored.Config.AllowUnverified.
	AllowUnverified bool
	// Timeout is the longest wait for a new checkpoint (default
	// DefaultEvaluatorTimeout).
	Timeout time.Duration
	// Out receives one line per evaluated checkpoint.
	Out    io.Writer
	Logger *zap.Logger
}

// RunEvaluator evaluates the newest checkpoint in CheckpointDir whenever
// there is a newer one (like TensorFlow's evaluator, it skips checkpoints
// that were superseded while it was busy), until it has evaluated the
// run's last checkpoint (at EvalResult.RunSteps), or no new checkpoint came
// within Timeout: then it stops with a warning naming the last step it saw
// (the chief may have stopped early at a target), or with an error if it
// never saw one. It returns the evaluations in order.
func RunEvaluator(ctx context.Context, cfg EvaluatorConfig) ([]evaluate.Result, error) {
	if cfg.CheckpointDir == "" {
		return nil, errors.New("evaluator: --checkpoint-dir is needed: the chief's checkpoint directory, which the evaluator follows")
	}
	if cfg.Model == mirrored.SparseModel {
		return nil, fmt.Errorf("evaluator: --model %s: the evaluator evaluates MNIST models only (a sparse run evaluates on its test files every epoch); remove the evaluator from TF_CONFIG", mirrored.SparseModel)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultEvaluatorTimeout
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	mn := cfg.MNIST
	if mn == nil {
		var err error
		opts := data.ImageOptions{Format: cfg.DataFormat, MNIST: data.MNISTOptions{Dir: cfg.DataDir, AllowUnverified: cfg.AllowUnverified, Logger: log.Named("data")}, Read: cfg.DataRead}
		if mn, err = data.OpenImages(ctx, cfg.Data, opts); err != nil {
			return nil, fmt.Errorf("evaluator: %w", err)
		}
	}
	var tb *tensorboard.Writer
	if cfg.LogDir != "" {
		var err error
		if tb, err = tensorboard.Create(filepath.Join(cfg.LogDir, "evaluator", "validation"), time.Now()); err != nil {
			return nil, fmt.Errorf("evaluator: %w", err)
		}
		defer tb.Close()
	}
	f := follower{cfg: cfg, mn: mn, tb: tb, log: log, last: -1}
	return f.run(ctx)
}

// follower is a running evaluator.
type follower struct {
	cfg  EvaluatorConfig
	mn   *data.ImageSet
	tb   *tensorboard.Writer
	log  *zap.Logger
	last int // the step of the last checkpoint evaluated; -1: none
	done []evaluate.Result
}

func (f *follower) run(ctx context.Context) ([]evaluate.Result, error) {
	deadline := time.Now().Add(f.cfg.Timeout)
	for {
		res, err := f.evaluateNewest(ctx)
		if err != nil {
			return f.done, err
		}
		if res != nil {
			deadline = time.Now().Add(f.cfg.Timeout)
			if res.RunSteps > 0 && res.Step >= res.RunSteps {
				return f.done, nil // the chief's last
			}
		}
		if time.Now().After(deadline) {
			return f.done, f.timedOut()
		}
		select {
		case <-ctx.Done():
			return f.done, ctx.Err()
		case <-time.After(evaluatorPoll):
		}
	}
}

// evaluateNewest evaluates the newest checkpoint if it is newer than the
// last one evaluated; nil if there is none.
func (f *follower) evaluateNewest(ctx context.Context) (*evaluate.Result, error) {
	path, err := checkpoint.Latest(f.cfg.CheckpointDir)
	if err != nil {
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	if path == "" || stepOf(path) <= f.last {
		return nil, nil
	}
	res, err := evaluate.Checkpoint(ctx, evaluate.Config{Checkpoint: path, MNIST: f.mn, TestExamples: f.cfg.TestExamples, Logger: f.log})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // the chief removed it (--keep-checkpoints) meanwhile: a newer one is there
	}
	if err != nil {
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	f.last = res.Step
	f.done = append(f.done, *res)
	fmt.Fprintf(f.cfg.Out, "evaluator: step %d (epoch %d): test loss %.4f, accuracy %.2f%% on %d examples (%s)\n",
		res.Step, res.Epoch, res.Loss, 100*res.Accuracy, res.Examples, filepath.Base(path))
	if f.tb != nil {
		now := time.Now()
		if err := errors.Join(f.tb.Scalar("epoch_loss", int64(res.Step), float32(res.Loss), now),
			f.tb.Scalar("epoch_accuracy", int64(res.Step), float32(res.Accuracy), now), f.tb.Flush()); err != nil {
			return nil, fmt.Errorf("evaluator: writing TensorBoard scalars: %w", err)
		}
	}
	return res, nil
}

// timedOut says why the evaluator stops without the run's last checkpoint.
func (f *follower) timedOut() error {
	if len(f.done) == 0 {
		return fmt.Errorf("evaluator: no checkpoint appeared in %s within %v (--evaluator-timeout): is it the chief's --checkpoint-dir, and is the chief running?", f.cfg.CheckpointDir, f.cfg.Timeout)
	}
	last := f.done[len(f.done)-1]
	f.log.Warn(fmt.Sprintf("no new checkpoint within %v (--evaluator-timeout) after step %d of %d: stopping (did the chief stop early at a target, or fail?)", f.cfg.Timeout, last.Step, last.RunSteps))
	return nil
}

// stepOf is the step in a checkpoint file's name (checkpoint.FileName).
func stepOf(path string) int {
	var step int
	if _, err := fmt.Sscanf(filepath.Base(path), "ckpt-%d.safetensors", &step); err != nil {
		return -1
	}
	return step
}
