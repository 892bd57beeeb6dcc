package mirrored

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// TestHierarchicalTrain: four replicas of an in-memory cluster told they
// run on two hosts (two each) take the hierarchical all-reduce for every
// gradient, as Auto chooses, and end with identical parameters, within
// rounding of the flat ring's (another order of sums).
func TestHierarchicalTrain(t *testing.T) {
	mn := synthMNIST(400, 100, 3)
	job := testJob(t, nn.Softmax, mn, 8, 1)
	job.NoShuffle = true
	// train returns the replicas' summaries, the chief's final parameters
	// (its last checkpoint) and the frames sent by kind.
	train := func(hosts []string) ([]*Summary, []float32, map[collective.Kind]int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		net := collective.NewMemNetwork(4)
		dir := t.TempDir()
		sums, errs := make([]*Summary, 4), make([]error, 4)
		counters := make([]*kindLog, 4)
		var wg sync.WaitGroup
		for r := range 4 {
			counters[r] = &kindLog{Transport: net.Transport(r), kinds: map[collective.Kind]int{}}
			// SmallBytes -1: the softmax's 31 KB gradient takes the large
			// buffers' algorithm.
			c, err := collective.New(counters[r], collective.Options{Timeout: 30 * time.Second, Hosts: hosts, SmallBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			if r == 0 {
				if got := c.AlgoFor(4 * 7850); hosts != nil && got != collective.Hierarchical {
					t.Fatalf("hosts %q: the gradient's all-reduce is %s, want hierarchical", hosts, got)
				}
			}
			j := job
			j.CheckpointDir = dir
			wg.Add(1)
			go func() {
				defer wg.Done()
				sums[r], errs[r] = Run(ctx, j, NewGroup(c))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("hosts %q: %v", hosts, err)
		}
		path, err := checkpoint.Latest(dir)
		if err != nil || path == "" {
			t.Fatalf("hosts %q: no final checkpoint: %v", hosts, err)
		}
		ck, err := checkpoint.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[collective.Kind]int{}
		for _, k := range counters {
			for kind, n := range k.kinds {
				kinds[kind] += n
			}
		}
		return sums, ck.Params, kinds
	}
	sums, hier, kinds := train([]string{"a", "a", "b", "b"})
	if kinds[collective.KindAllReduceHier] == 0 || kinds[collective.KindAllReduceRing] != 0 {
		t.Fatalf("frames sent by kind %v: want hierarchical all-reduces and no ring", kinds)
	}
	for r := range sums {
		if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
			t.Fatalf("rank %d ended with parameters %s, rank 0 with %s", r, sums[r].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
		}
	}
	_, flat, kinds := train(nil)
	if kinds[collective.KindAllReduceHier] != 0 || kinds[collective.KindAllReduceRing] == 0 {
		t.Fatalf("without hosts, frames sent by kind %v: want the ring", kinds)
	}
	for i := range flat {
		if d := math.Abs(float64(hier[i] - flat[i])); d > 1e-5 {
			t.Fatalf("parameter %d: %v hierarchical, %v with the flat ring", i, hier[i], flat[i])
		}
	}
}
