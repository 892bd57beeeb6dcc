package mirrored

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/paramhash"
	"github.com/meshtrain/meshtrain/nn"
	"go.uber.org/zap"
)

// Config is one training run. The zero value is not valid; start from
// DefaultConfig, the recipe that reaches 99% on MNIST with LeNet-5.
type Config struct {
	Model     string // nn model name: "lenet" or "softmax"
	Epochs    int    // passes over the training set, > 0
	BatchSize int    // examples per replica per step, > 0

	Optimizer   string  // nn optimizer name: sgd, momentum, nesterov, adam
	LR          float64 // base learning rate, > 0
	Momentum    float64 // for sgd/momentum/nesterov, in [0, 1)
	WeightDecay float64 // L2 penalty, ≥ 0

	Schedule      string  // nn schedule kind: constant, step, cosine
	LRGamma       float64 // step: factor per decay
	LRDecayEpochs float64 // step: epochs between decays (may be fractional)
	WarmupEpochs  float64 // linear warm-up length in epochs (may be fractional)
	MinLR         float64 // cosine: final rate

	Seed int64 // initialisation and shuffling

	// TargetAccuracy (a fraction in (0, 1]) and TargetLoss (> 0) stop
	// training at the end of the first epoch whose test accuracy is at
	// least, or whose mean training loss is at most, the target; 0 turns
	// a target off. Checked per epoch because the full test set is
	// evaluated per epoch and every replica must stop at the same step.
	TargetAccuracy float64
	TargetLoss     float64

	// Data is the image set's file or directory (a .npz, a directory of
	// .npy or IDX files) in DataFormat, or "" to tell it from the
	// contents: see data.OpenImages. Empty Data means MNIST, looked for
	// in DataDir (and fetched into it; see data.LoadMNIST). MNIST, if
	// set, is the image set used instead of opening one.
	Data, DataFormat string
	DataDir          string
	// DataRead is how Data is read (SplitSeed 0: Seed; Shard per replica).
	DataRead data.ReadOptions
	MNIST    *data.ImageSet
	// AllowUnverified accepts IDX files in DataDir that are not the
	// published MNIST: another data set in its format, whose image size
	// and class count shape the model (data.MNISTOptions.AllowUnverified).
	AllowUnverified bool
	// TrainExamples and TestExamples, if > 0, use only the first that
	// many examples of each set (for quick runs and tests).
	TrainExamples, TestExamples int

	// Shards is how many parts each replica splits its batch into for its
	// cores (see nn.DefaultShards); 0 means nn.DefaultShards.
	Shards int
	// GradientBucket is, in bytes, how much of the gradient a synchronous
	// step starts to all-reduce while the backward pass computes the rest
	// (DDP's bucket_cap_mb, Horovod's fusion threshold): each time at least
	// that much more is final, it goes to the exchange. 0 means
	// DefaultGradientBucket; negative exchanges the whole gradient after
	// the backward pass. The arithmetic, and so every bit, is the same
	// either way; replicas must agree on it (a setting they compare).
	// It applies to nn models that announce their gradient
	// (nn.GradNotifier, as every nn.Sequential does) under the ring.
	GradientBucket int
	// SyncBatchNorm normalises over the global batch (replica.DenseConfig's).
	SyncBatchNorm bool

	// Progress, if set, receives the data's fetch meter (MNIST fetched on
	// first use); the run's own progress is an observer's
	// (observe.Progress, in Job.Observers).
	Progress io.Writer
	Logger   *zap.Logger
}

// DefaultConfig is LeNet-5 with the anchors' recipe: SGD with momentum
// 0.9, learning rate 0.05 halved every epoch, batch 64, 10 epochs; with
// two changes that make the first epoch reliable across seeds (better on
// seeds 1-5 than the anchors' once-per-epoch halving: BENCHMARKS.md,
// "Figures behind the code": LeNet's first epoch): the halving is spread
// over the epoch in four steps of ×2^-¼, and the first tenth of an epoch
// warms the rate up linearly. The other models have recipes of their own
// (see DefaultConfigFor).
func DefaultConfig() Config {
	return Config{
		Model: nn.LeNet5, Epochs: 10, BatchSize: 64,
		Optimizer: nn.SGD, LR: 0.05, Momentum: 0.9,
		Schedule: nn.ScheduleStep, LRGamma: math.Pow(0.5, 0.25), LRDecayEpochs: 0.25, WarmupEpochs: 0.1,
		Seed: 1,
	}
}

// Validate reports the first problem with c, naming the setting and what
// would be accepted.
func (c *Config) Validate() error {
	if !slices.Contains(nn.ModelNames, c.Model) {
		return fmt.Errorf("model %q: want one of %v", c.Model, slices.Concat(nn.ModelNames, []string{SparseModel}))
	}
	if !slices.Contains(nn.OptimizerNames, c.Optimizer) {
		return fmt.Errorf("optimizer %q: want one of %v", c.Optimizer, nn.OptimizerNames)
	}
	if !slices.Contains(nn.ScheduleNames, c.Schedule) {
		return fmt.Errorf("learning-rate schedule %q: want one of %v", c.Schedule, nn.ScheduleNames)
	}
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("learning rate %v: want a finite value > 0", c.LR)
	case c.Schedule == nn.ScheduleStep && !(c.LRDecayEpochs > 0):
		return fmt.Errorf("learning-rate decay every %v epochs: want > 0", c.LRDecayEpochs)
	case !(c.WarmupEpochs >= 0):
		return fmt.Errorf("warm-up of %v epochs: want ≥ 0", c.WarmupEpochs)
	}
	return c.validateCommon()
}

// validateCommon checks the settings every model shares.
func (c *Config) validateCommon() error {
	switch {
	case c.Epochs <= 0:
		return fmt.Errorf("epochs %d: want at least 1", c.Epochs)
	case c.BatchSize <= 0:
		return fmt.Errorf("batch size %d: want at least 1", c.BatchSize)
	case !(c.TargetAccuracy >= 0 && c.TargetAccuracy <= 1):
		return fmt.Errorf("target accuracy %v: want a fraction in (0, 1], or 0 for none", c.TargetAccuracy)
	case !(c.TargetLoss >= 0) || math.IsInf(c.TargetLoss, 0):
		return fmt.Errorf("target loss %v: want a finite value > 0, or 0 for none", c.TargetLoss)
	case c.TrainExamples < 0 || c.TestExamples < 0:
		return fmt.Errorf("example limits %d/%d: want ≥ 0 (0: the whole set)", c.TrainExamples, c.TestExamples)
	case c.Shards < 0:
		return fmt.Errorf("%d compute shards: want ≥ 0 (0: the default)", c.Shards)
	}
	return nil
}

// accuracyMarks are the accuracies whose time-to is recorded.
var accuracyMarks = []float64{0.975, 0.985, 0.99}

// ParamsHash is the SHA-256 of params as little-endian float32 bytes, hex
// (package paramhash).
func ParamsHash(params []float32) string { return paramhash.Hex(params) }

// paramsSum is the SHA-256 of params as little-endian float32 bytes.
var paramsSum = paramhash.Sum

// NonFiniteError reports a NaN or Inf training loss.
type NonFiniteError struct {
	Epoch, Step, GlobalStep int
	Loss                    float64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("training loss is %v at epoch %d step %d (global step %d): the run diverged; lower the learning rate (--lr) or add warm-up", e.Loss, e.Epoch, e.Step, e.GlobalStep)
}

// logger is the run's logger: Logger, or a no-op one when unset.
func (c *Config) logger() *zap.Logger {
	if c.Logger == nil {
		return zap.NewNop()
	}
	return c.Logger
}
