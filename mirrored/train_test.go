package mirrored

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/nn"
)

// quick is a short run on a synthetic stand-in for MNIST (6,400 training
// examples, 100 steps of 64, and 2,000 test examples): the unit tests need
// no download. The real data set is trained on in tests/.
func quick(t *testing.T, model string) Config {
	c := DefaultConfig()
	c.Model = model
	c.Epochs = 1
	c.MNIST = synthMNIST(6400, 2000, 9)
	c.Logger = zaptest.NewLogger(t)
	return c
}

// TestTrainDeterministic: the same seed gives bitwise-identical parameters
// (and so the same hash), whatever GOMAXPROCS; another seed does not.
func TestTrainDeterministic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(seed int64, procs int) string {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		cfg := quick(t, nn.LeNet5)
		cfg.TrainExamples = 1280
		cfg.TestExamples = 100
		cfg.Seed = seed
		sum, err := Train(ctx, Job{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return sum.Run.ParamsSHA256
	}
	a, b := run(7, 2), run(7, 1)
	if a != b {
		t.Fatalf("seed 7 twice (GOMAXPROCS 2 and 1): %s and %s", a, b)
	}
	if c := run(8, 2); c == a {
		t.Fatal("seeds 7 and 8 end with the same parameters")
	}
}

func TestTargetStopsEarly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := quick(t, nn.Softmax)
	cfg.Epochs = 5
	cfg.TrainExamples = 3200
	cfg.TargetAccuracy = 0.5
	sum, err := Train(ctx, Job{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	res := sum.Run
	if !res.TargetReached || len(res.EpochResults) != 1 || res.TimeToTarget != res.EpochResults[0].TrainSeconds || res.TimeToTarget <= 0 {
		t.Fatalf("target 50%%: reached %v after %d epochs, %vs", res.TargetReached, len(res.EpochResults), res.TimeToTarget)
	}
	cfg.TargetAccuracy = 0
	cfg.TargetLoss = 10 // any first epoch is below this
	if sum, err = Train(ctx, Job{Config: cfg}); err != nil || !sum.Run.TargetReached || len(sum.Run.EpochResults) != 1 {
		t.Fatalf("target loss 10: %+v, %v", sum, err)
	}
}

// TestDivergenceNamesStep: a learning rate far too large makes the loss
// overflow; training stops with an error naming the epoch and step.
func TestDivergenceNamesStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := quick(t, nn.LeNet5)
	cfg.LR = 1e9
	cfg.WarmupEpochs = 0
	_, err := Train(ctx, Job{Config: cfg})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "epoch 1 step") || nf.Step < 1 {
		t.Fatalf("lr 1e9: err = %v, want a NonFiniteError naming the step", err)
	}
	if !math.IsNaN(nf.Loss) && !math.IsInf(nf.Loss, 0) {
		t.Fatalf("loss %v is finite", nf.Loss)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Model = "vgg" }, `model "vgg"`},
		{func(c *Config) { c.Optimizer = "rmsprop" }, `optimizer "rmsprop"`},
		{func(c *Config) { c.Schedule = "exp" }, `schedule "exp"`},
		{func(c *Config) { c.BatchSize = 0 }, "batch size 0"},
		{func(c *Config) { c.BatchSize = -3 }, "batch size -3"},
		{func(c *Config) { c.LR = 0 }, "learning rate 0"},
		{func(c *Config) { c.LR = -0.1 }, "learning rate -0.1"},
		{func(c *Config) { c.Epochs = 0 }, "epochs 0"},
		{func(c *Config) { c.TargetAccuracy = 97 }, "target accuracy 97"},
		{func(c *Config) { c.LRDecayEpochs = 0 }, "decay every 0 epochs"},
	} {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want it to mention %q", err, tc.want)
		}
		if _, err := Train(context.Background(), Job{Config: c}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Train: err = %v, want it to mention %q", err, tc.want)
		}
	}
	if err := (LocalGroup{}).Broadcast(context.Background(), nil, 1); err == nil {
		t.Error("Local broadcast from root 1: no error")
	}
}

func TestParamsHash(t *testing.T) {
	// SHA-256 of the 8 bytes 00 00 80 3f 00 00 00 c0 (1.0 and -2.0 as little-endian float32).
	const want = "ee4ac73c2bd27756ab82780f27c73a7bc4d3f0bb6acb37e008bc27eccd7e588b"
	if got := ParamsHash([]float32{1, -2}); got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
	big := make([]float32, 5000) // more than one internal block
	big[4999] = 1
	if ParamsHash(big) == ParamsHash(make([]float32, 5000)) {
		t.Fatal("the last value does not change the hash")
	}
	// Both ways of reading the vector: internal/paramhash's test.
}
