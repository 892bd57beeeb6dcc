package mirrored

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// batchOf appends examples [lo, hi) of ds to a fresh batch.
func batchOf(ds data.Dataset, lo, hi int) *data.Batch {
	b := &data.Batch{Dim: ds.Dim()}
	for i := lo; i < hi; i++ {
		ds.Append(b, i)
	}
	return b
}

// stepCluster runs steps synchronous steps (syncStep, the loop's own) on
// n replicas of an in-memory group, replica r on the r-th contiguous part
// of each global batch, and returns the replicas' parameters. build makes
// replica r's Replica (on its Group).
func stepCluster(t *testing.T, n, steps, batch int, ds data.Dataset, build func(r int, g Group) replica.Replica) [][]float32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	net := collective.NewMemNetwork(n)
	params, errs := make([][]float32, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		var g Group = LocalGroup{}
		if n > 1 {
			c, err := collective.New(net.Transport(r), collective.Options{Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			g = NewGroup(c)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := build(r, g)
			for s := range steps {
				lo := s*batch*n + r*batch
				if _, err := syncStep(ctx, rep, g, batchOf(ds, lo, lo+batch), s, 0.05, s%2 == 0, nil, nil); err != nil {
					errs[r] = fmt.Errorf("step %d: %w", s, err)
					return
				}
			}
			params[r] = append([]float32(nil), rep.Params()...)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", r, err)
		}
	}
	return params
}

// closeTo fails unless a and b agree to within tol relative to the
// largest magnitude in b.
func closeTo(t *testing.T, what string, a, b []float32, tol float64) {
	t.Helper()
	scale, worst := 1e-12, 0.0
	for _, v := range b {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		worst = max(worst, math.Abs(float64(a[i]-b[i])))
	}
	if worst > tol*scale {
		t.Errorf("%s: largest difference %.3g of magnitude %.3g: want ≤ %.0e relative", what, worst, scale, tol)
	}
}

// TestStepShardedEqualsWhole is the test that matters, on the step
// itself: N replicas, each computing on its part of the global batch and
// combining through the group, end with the parameters of one replica
// computing on the whole batch (to rounding: the sums run in another
// order), for the dense and the sparse replica through the same step.
func TestStepShardedEqualsWhole(t *testing.T) {
	mn := synthMNIST(96, 8, 5)
	const steps, batch = 4, 8
	for _, model := range []string{nn.Softmax, nn.LeNet5} {
		t.Run(model, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Model, cfg.Optimizer = model, nn.Momentum
			ds := mn.Train.Dataset()
			build := func(world int) func(r int, g Group) replica.Replica {
				return func(r int, g Group) replica.Replica {
					rep, err := newDenseReplica(&cfg, nil, mn.Test, mn.NumClasses(), r, world, mn)
					if err != nil {
						t.Fatal(err)
					}
					return rep
				}
			}
			for _, n := range []int{2, 3} {
				sharded := stepCluster(t, n, steps, batch, ds, build(n))
				whole := stepCluster(t, 1, steps, n*batch, ds, build(1))[0]
				for r := 1; r < n; r++ {
					if ParamsHash(sharded[r]) != ParamsHash(sharded[0]) {
						t.Fatalf("%d replicas: replica %d differs from replica 0", n, r)
					}
				}
				closeTo(t, fmt.Sprintf("%d replicas against one on the whole batch", n), sharded[0], whole, 1e-4)
			}
		})
	}
	t.Run("sparse-lr", func(t *testing.T) {
		const dim = 300
		ds := sparseSet(t, 4, 200, dim, 5)
		job := sparseTestJob(ds, nil, dim, batch, 1, "adagrad", sparse.ExchangeSparse)
		build := func(r int, g Group) replica.Replica {
			rep, err := (*sparseBuilder)(&job).newReplica(nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := rep.UseExchanger(g.Rank(), g.Size(), sparse.ExchangeSparse, GatherDirect, dim, nil); err != nil {
				t.Fatal(err)
			}
			return rep
		}
		for _, n := range []int{2, 3} {
			sharded := stepCluster(t, n, steps, batch, ds, build)
			whole := stepCluster(t, 1, steps, n*batch, ds, build)[0]
			for r := 1; r < n; r++ {
				if ParamsHash(sharded[r]) != ParamsHash(sharded[0]) {
					t.Fatalf("%d replicas: replica %d differs from replica 0", n, r)
				}
			}
			closeTo(t, fmt.Sprintf("%d replicas against one on the whole batch", n), sharded[0], whole, 1e-5)
		}
	})
}
