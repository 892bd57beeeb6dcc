// Command usermodel trains a model defined here, outside meshtrain's
// packages, with meshtrain's strategy: a small convolutional network
// composed of nn's layers, handed to mirrored.Run through Job.NewModel,
// on three replicas that keep in step over the in-memory network (over
// libp2p, each process would get its collective.Comm from p2p.Join
// instead). It prints each replica's result and whether they ended
// bitwise identical.
//
//	go run ./mirrored/example/usermodel            # a learnable stand-in for MNIST
//	go run ./mirrored/example/usermodel -mnist     # the real MNIST (fetched once)
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
)

// newModel is the user's model: conv 3×3 8 → ReLU → max-pool 2 → dense 32
// → ReLU → dropout → dense to the classes → softmax, for the data set's
// image size and classes.
func newModel(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
	return nn.NewSequential("small-cnn", nn.Shape{H: spec.Rows, W: spec.Cols, C: 1}, seed, shards,
		nn.Conv2D{Filters: 8, Kernel: 3}, nn.Activation{Fn: "relu"}, nn.MaxPooling2D{Size: 2},
		nn.Flatten{}, nn.Dense{Units: 32}, nn.Activation{Fn: "relu"}, nn.Dropout{Rate: 0.1},
		nn.Dense{Units: spec.Classes}, nn.Activation{Fn: "softmax"})
}

func main() {
	real := flag.Bool("mnist", false, "train on the real MNIST (found or fetched as meshtrain data mnist does)")
	replicas := flag.Int("n", 3, "replicas")
	epochs := flag.Int("epochs", 2, "epochs")
	flag.Parse()
	if err := run(*real, *replicas, *epochs); err != nil {
		fmt.Fprintln(os.Stderr, "usermodel:", err)
		os.Exit(1)
	}
}

func run(real bool, n, epochs int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := mirrored.DefaultConfig()
	cfg.Model, cfg.Epochs = "", epochs
	if real {
		mn, err := data.OpenImages(ctx, "", data.ImageOptions{}) // no path: MNIST, found or fetched
		if err != nil {
			return err
		}
		cfg.MNIST, cfg.TrainExamples, cfg.TestExamples = mn, 12000, 2000
	} else {
		cfg.MNIST = bands(2400, 600)
	}
	job := mirrored.Job{Config: cfg, NewModel: newModel, HashEvery: 20}

	net := collective.NewMemNetwork(n)
	sums, errs := make([]*mirrored.Summary, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: time.Minute})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r], errs[r] = mirrored.Run(ctx, job, mirrored.NewGroup(c))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("replica %d: %w", r, err)
		}
	}
	for r, s := range sums {
		fmt.Printf("replica %d: %s, %d parameters, %d steps, test accuracy %.2f%%, params sha256 %.16s…\n",
			r, s.Run.Model, s.Run.Params, s.Run.Steps, 100*s.Run.FinalAccuracy, s.Run.ParamsSHA256)
	}
	same := true
	for _, s := range sums[1:] {
		same = same && s.Run.ParamsSHA256 == sums[0].Run.ParamsSHA256
	}
	fmt.Printf("replicas identical: %v\n", same)
	if !same {
		return fmt.Errorf("the replicas ended with different parameters")
	}
	return nil
}

// bands is a learnable stand-in for MNIST: 28×28 images of 10 classes,
// class c lighting up the c-th band of rows.
func bands(ntrain, ntest int) *data.MNIST {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func(n int) *data.Images {
		im := &data.Images{N: n, Rows: 28, Cols: 28, Pixels: make([]uint8, n*784), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(10)
			im.Labels[i] = uint8(c)
			for j := range 784 {
				im.Pixels[i*784+j] = uint8(rng.IntN(60))
				if j/78 == c {
					im.Pixels[i*784+j] = uint8(150 + rng.IntN(100))
				}
			}
		}
		return im
	}
	return &data.MNIST{Train: gen(ntrain), Test: gen(ntest), Classes: 10}
}
