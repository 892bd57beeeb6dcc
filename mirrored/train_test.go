package mirrored

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/tensorboard"
)

var (
	mnistOnce sync.Once
	mnist     *data.MNIST
	mnistErr  error
)

// loadMNIST loads the real MNIST once per test binary (found in the usual
// places or fetched; see data.LoadMNIST).
func loadMNIST(t *testing.T) *data.MNIST {
	t.Helper()
	mnistOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		mnist, mnistErr = data.LoadMNIST(ctx, data.MNISTOptions{})
	})
	if mnistErr != nil {
		t.Fatalf("MNIST: %v", mnistErr)
	}
	return mnist
}

// quick is a short run on a slice of MNIST: 6,400 training examples (100
// steps of 64) and 2,000 test examples.
func quick(t *testing.T, model string) Config {
	c := DefaultConfig()
	c.Model = model
	c.Epochs = 1
	c.MNIST = loadMNIST(t)
	c.TrainExamples, c.TestExamples = 6400, 2000
	c.Logger = zaptest.NewLogger(t)
	return c
}

// TestTrainSlice trains each model for one epoch of 100 steps on a slice
// and checks it learned: from chance (10%) to a test accuracy and loss a
// working model reaches that fast (measured for seed 1: LeNet 91.2%, mean
// training loss 1.02 from 2.3 at the start, test loss 0.29; softmax 84.3%,
// 0.79 and 0.78).
func TestTrainSlice(t *testing.T) {
	for _, tc := range []struct {
		model                     string
		minAcc, maxLoss, maxTestL float64
	}{{nn.LeNet5, 0.87, 1.3, 0.45}, {nn.Softmax, 0.80, 1.1, 1.0}} {
		t.Run(tc.model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := quick(t, tc.model)
			cfg.LogDir = t.TempDir()
			res, err := Train(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ep := res.EpochResults[0]
			if ep.TestAccuracy < tc.minAcc || ep.Loss > tc.maxLoss || ep.TestLoss > tc.maxTestL || ep.ExamplesPerSec <= 0 {
				t.Fatalf("after one epoch: %+v", ep)
			}
			if res.Steps != 100 || res.StepsPerEpoch != 100 || res.TrainExamples != 6400 || res.TestExamples != 2000 ||
				len(res.ParamsSHA256) != 64 || res.FinalAccuracy != ep.TestAccuracy {
				t.Fatalf("result %+v", res)
			}
			files, _ := filepath.Glob(filepath.Join(tensorboard.WorkerDir(cfg.LogDir, 0), "events.out.tfevents.*"))
			if len(files) != 1 {
				t.Fatalf("event files %v", files)
			}
			events, err := tensorboard.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float32{}
			for _, ev := range events[1:] {
				if ev.Step != 100 {
					t.Errorf("event at step %d, want 100", ev.Step)
				}
				for _, v := range ev.Values {
					got[v.Tag] = v.Value
				}
			}
			if got["test_accuracy"] != float32(ep.TestAccuracy) || got["loss"] != float32(ep.Loss) || got["examples_per_sec"] != float32(ep.ExamplesPerSec) {
				t.Fatalf("event values %v, epoch %+v", got, ep)
			}
		})
	}
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
		res, err := Train(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.ParamsSHA256
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
	res, err := Train(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TargetReached || len(res.EpochResults) != 1 || res.TimeToTarget != res.EpochResults[0].TrainSeconds || res.TimeToTarget <= 0 {
		t.Fatalf("target 50%%: reached %v after %d epochs, %vs", res.TargetReached, len(res.EpochResults), res.TimeToTarget)
	}
	cfg.TargetAccuracy = 0
	cfg.TargetLoss = 10 // any first epoch is below this
	if res, err = Train(ctx, cfg); err != nil || !res.TargetReached || len(res.EpochResults) != 1 {
		t.Fatalf("target loss 10: %+v, %v", res, err)
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
	_, err := Train(ctx, cfg)
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
		if _, err := Train(context.Background(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
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
}

// TestLongAccuracy is the accuracy bar, opt-in (MESHTRAIN_LONG=1):
// the default recipe reaches 97.5% after one epoch and 99.0% within 10 for
// LeNet-5, and softmax regression 92.0% within 10.
func TestLongAccuracy(t *testing.T) {
	if os.Getenv("MESHTRAIN_LONG") == "" {
		t.Skip("set MESHTRAIN_LONG=1 to run the 10-epoch accuracy runs")
	}
	for _, tc := range []struct {
		model  string
		target float64
	}{{nn.LeNet5, 0.99}, {nn.Softmax, 0.92}} {
		t.Run(tc.model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Model = tc.model
			cfg.MNIST = loadMNIST(t)
			cfg.TargetAccuracy = tc.target
			cfg.Progress = testWriter{t}
			res, err := Train(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !res.TargetReached {
				t.Fatalf("%s: %.2f%% after %d epochs, want %.1f%%", tc.model, 100*res.FinalAccuracy, len(res.EpochResults), 100*tc.target)
			}
			if tc.model == nn.LeNet5 && res.EpochResults[0].TestAccuracy < 0.975 {
				t.Fatalf("lenet: %.2f%% after one epoch, want 97.5%%", 100*res.EpochResults[0].TestAccuracy)
			}
			t.Logf("%s: time to accuracy %v, %.0f examples/s in epoch 1", tc.model, res.TimeToAccuracy, res.EpochResults[0].ExamplesPerSec)
		})
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
