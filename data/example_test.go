package data_test

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/meshtrain/meshtrain/data"
)

// Two workers split 10 examples by DATA sharding, shuffled per epoch, in
// batches of 2 with drop remainder: both run Steps(10, 2, 2, true) = 2
// steps per epoch; the fifth example of each shard waits for a later epoch.
func ExampleNewPipeline() {
	x := make([]float32, 10)
	for i := range x {
		x[i] = float32(i)
	}
	ds, _ := data.NewDenseSet(x, x, 1) // example i: feature i, label i
	ctx := context.Background()
	for rank := range 2 {
		cfg := data.TrainConfig(rank, 2, 2, 42, 2)
		p, err := data.NewPipeline(ctx, ds, cfg)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("rank %d, %d steps per epoch:", rank, p.StepsPerEpoch())
		for {
			b, err := p.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			fmt.Printf(" e%d%v", b.Epoch, b.Labels)
		}
		fmt.Println()
		p.Close()
	}
	fmt.Println(data.Steps(10, 2, 2, true))
	// Output:
	// rank 0, 2 steps per epoch: e0[2 4] e0[0 6] e1[2 4] e1[6 0]
	// rank 1, 2 steps per epoch: e0[5 7] e0[9 1] e1[1 9] e1[7 3]
	// 2
}
