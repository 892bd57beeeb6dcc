package mirrored

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/sparse"
)

// kindLog records the kinds of the frames a transport sends.
type kindLog struct {
	collective.Transport
	mu    sync.Mutex
	kinds map[collective.Kind]int
}

func (k *kindLog) Send(ctx context.Context, to int, h collective.Header, payload []byte) error {
	k.mu.Lock()
	k.kinds[h.Kind]++
	k.mu.Unlock()
	return k.Transport.Send(ctx, to, h, payload)
}

// TestSparseGatherChoice: --sparse-gather ring runs the ring all-gather
// (a ring pass of the lengths first: frames of kind allgather-lengths) and
// direct the one-round one (none), with
// the same result bit for bit. (Ring once silently ran direct.)
func TestSparseGatherChoice(t *testing.T) {
	const n, dim = 3, 300
	train := sparseSet(t, 8, 240, dim, 5)
	hashes := map[string]string{}
	for _, gather := range []string{GatherDirect, GatherRing} {
		job := sparseTestJob(train, nil, dim, 10, 1, "adagrad", sparse.ExchangeSparse)
		job.Sparse.Gather = gather
		logs := make([]*kindLog, n)
		net := collective.NewMemNetwork(n)
		sums, errs := make([]*Summary, n), make([]error, n)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var wg sync.WaitGroup
		for r := range n {
			logs[r] = &kindLog{Transport: net.Transport(r), kinds: map[collective.Kind]int{}}
			c, err := collective.New(logs[r], collective.Options{Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sums[r], errs[r] = Run(ctx, job, NewGroup(c))
			}()
		}
		wg.Wait()
		cancel()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("%s rank %d: %v", gather, r, errs[r])
			}
		}
		ring := logs[0].kinds[collective.KindGatherLens]
		steps := sums[0].Run.Steps
		switch {
		case gather == GatherRing && ring < steps*(n-1):
			t.Errorf("ring gather: %d allgather-lengths frames from rank 0 over %d steps, want ≥ %d", ring, steps, steps*(n-1))
		case gather == GatherDirect && ring != 0:
			t.Errorf("direct gather: %d allgather-lengths frames from rank 0, want none", ring)
		}
		hashes[gather] = sums[0].Run.ParamsSHA256
	}
	if hashes[GatherDirect] != hashes[GatherRing] {
		t.Errorf("direct and ring gathers end with different weights: %v", hashes)
	}
}
