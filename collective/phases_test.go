package collective

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective/half"
)

// TestAllReducePhases: each rank's Options.Phases receives a ring
// all-reduce's reduce-scatter then all-gather (in half precision too),
// and each round of recursive doubling, back to back and inside the
// call; the star, a broadcast and an all-gather report none.
func TestAllReducePhases(t *testing.T) {
	const n = 3
	ring := []string{PhaseReduceScatter, PhaseAllGather}
	for _, tc := range []struct {
		name string
		algo Algo
		call func(context.Context, *Comm, []float32) error
		want [n][]string
	}{
		{"ring", Ring, func(ctx context.Context, c *Comm, b []float32) error { return c.AllReduceFloat32(ctx, b, Sum) },
			[n][]string{ring, ring, ring}},
		{"ring of a range", Ring, func(ctx context.Context, c *Comm, b []float32) error {
			return c.AllReduceFloat32Range(ctx, b, 100, 900, Sum)
		},
			[n][]string{ring, ring, ring}},
		{"ring in bf16", Ring, func(ctx context.Context, c *Comm, b []float32) error {
			return c.AllReduceFloat32Half(ctx, b, 0, len(b), half.BF16)
		}, [n][]string{ring, ring, ring}},
		// planRecDoubling(3, r): rank 0 hands its buffer to rank 1 and
		// takes the result back; ranks 1 and 2 exchange.
		{"tree", Tree, func(ctx context.Context, c *Comm, b []float32) error { return c.AllReduceFloat32(ctx, b, Sum) },
			[n][]string{{"tree: send to rank 1", "tree: result from rank 1"},
				{"tree: fold from rank 0", "tree: exchange with rank 2", "tree: send to rank 0"},
				{"tree: exchange with rank 1"}}},
		{"star", Star, func(ctx context.Context, c *Comm, b []float32) error { return c.AllReduceFloat32(ctx, b, Sum) }, [n][]string{}},
		{"broadcast", Ring, func(ctx context.Context, c *Comm, b []float32) error { return c.BroadcastFloat32(ctx, b, 0) }, [n][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := NewMemNetwork(n)
			var mu sync.Mutex
			got := make([][]Phase, n)
			comms := make([]*Comm, n)
			for r := range comms {
				c, err := New(net.Transport(r), Options{Algo: tc.algo, ChunkBytes: 512, Phases: func(p Phase) {
					mu.Lock()
					got[r] = append(got[r], p)
					mu.Unlock()
				}})
				if err != nil {
					t.Fatal(err)
				}
				comms[r] = c
			}
			var calls [n][2]time.Time
			noErrors(t, onAll(comms, func(c *Comm) error {
				calls[c.Rank()][0] = time.Now()
				err := tc.call(context.Background(), c, make([]float32, 1000))
				calls[c.Rank()][1] = time.Now()
				return err
			}))
			for r := range n {
				var names []string
				for i, p := range got[r] {
					names = append(names, p.Name)
					if p.Start.Before(calls[r][0]) || p.End.After(calls[r][1]) || p.End.Before(p.Start) {
						t.Errorf("rank %d: %s from %v to %v, outside the call (%v to %v)", r, p.Name, p.Start, p.End, calls[r][0], calls[r][1])
					}
					if i > 0 && p.Start.Before(got[r][i-1].End) {
						t.Errorf("rank %d: %s starts before %s ends", r, p.Name, got[r][i-1].Name)
					}
				}
				if !slices.Equal(names, tc.want[r]) {
					t.Errorf("rank %d: phases %q, want %q", r, names, tc.want[r])
				}
			}
		})
	}
}
