package mirrored_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/internal/synth"
	"github.com/meshtrain/meshtrain/nn"
)

// Train is one replica: softmax regression on a learnable stand-in for
// MNIST (use DataDir, or leave MNIST nil, for the real one).
func ExampleTrain() {
	cfg := mirrored.DefaultConfigFor(nn.Softmax)
	cfg.Epochs, cfg.MNIST = 2, synth.MNIST(600, 200, rand.New(rand.NewPCG(1, 2)))
	sum, err := mirrored.Train(context.Background(), mirrored.Job{Config: cfg})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, %d parameters, %d steps, test accuracy ≥ 95%%: %v\n",
		sum.Run.Model, sum.Run.Params, sum.Run.Steps, sum.Run.FinalAccuracy >= 0.95)
	// Output: softmax, 7850 parameters, 18 steps, test accuracy ≥ 95%: true
}

// Run trains the same job on every replica of a group; here three
// replicas on the in-memory network (collective.NewMemNetwork), which end
// with bitwise-identical parameters. Over libp2p, p2p.Join gives each
// process its collective.Comm instead.
func ExampleRun() {
	cfg := mirrored.DefaultConfigFor(nn.Softmax)
	cfg.Epochs, cfg.MNIST = 2, synth.MNIST(600, 200, rand.New(rand.NewPCG(1, 2)))
	job := mirrored.Job{Config: cfg, HashEvery: 10}

	const n = 3
	net := collective.NewMemNetwork(n)
	sums := make([]*mirrored.Summary, n)
	var wg sync.WaitGroup
	for r := range n {
		c, err := collective.New(net.Transport(r), collective.Options{Timeout: 10 * time.Second})
		if err != nil {
			fmt.Println(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum, err := mirrored.Run(context.Background(), job, mirrored.NewGroup(c))
			if err != nil {
				fmt.Println(err)
				return
			}
			sums[r] = sum
		}()
	}
	wg.Wait()
	if sums[0] == nil || sums[1] == nil || sums[2] == nil {
		return
	}
	fmt.Printf("%d replicas × batch %d, %d steps per epoch, identical: %v\n", sums[0].Run.Replicas, sums[0].Run.BatchSize,
		sums[0].Run.StepsPerEpoch, sums[0].Run.ParamsSHA256 == sums[1].Run.ParamsSHA256 && sums[1].Run.ParamsSHA256 == sums[2].Run.ParamsSHA256)
	// Output: 3 replicas × batch 64, 3 steps per epoch, identical: true
}
