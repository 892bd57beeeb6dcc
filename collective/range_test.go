package collective

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAllReduceRangeBitsOfTheWhole reduces a buffer in pieces, as a
// backward pass hands over its gradient (the last layers first), and wants
// the bits of one all-reduce of the whole: the ring's order of combination
// depends on where an element lies, which pieces must keep.
func TestAllReduceRangeBitsOfTheWhole(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		algo   Algo
		length int
		cuts   []int // piece boundaries, reduced from the end of the buffer down
		hosts  []string
	}{
		{"ring n2", 2, Ring, 1001, []int{700, 300}, nil},
		{"ring n3 a piece in one segment", 3, Ring, 3000, []int{2500, 2400, 100}, nil},
		{"ring n4 pieces across segments", 4, Ring, 10007, []int{9000, 5001, 5000, 17, 1}, nil},
		{"ring n5 empty piece", 5, Ring, 999, []int{600, 600, 10}, nil},
		{"ring n7 one element pieces", 7, Ring, 50, []int{49, 48, 47, 20}, nil},
		{"tree n3", 3, Tree, 5000, []int{4000, 123}, nil},
		{"tree n4", 4, Tree, 5000, []int{2500}, nil},
		{"star n4", 4, Star, 5000, []int{4999, 1000}, nil},
		{"star n5", 5, Star, 777, []int{500, 1}, nil},
		{"auto picks for the whole (ring) though pieces are small", 4, Auto, 200000, []int{199990, 100000, 64}, nil},
		{"auto small buffer", 3, Auto, 1000, []int{500}, nil},
		{"hierarchical 2+3 hosts", 5, Hierarchical, 20011, []int{15000, 10006, 10005, 3}, []string{"a", "a", "b", "b", "b"}},
		{"auto picks hierarchical for the whole", 4, Auto, 200000, []int{199990, 100000, 64}, []string{"a", "a", "b", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(tc.length)))
			inputs := normalInputs(rng, tc.n, tc.length)
			for r := range inputs { // values far apart in size, so that the order of a sum shows in its bits
				for i := range inputs[r] {
					inputs[r][i] *= float32(math.Pow(10, float64(rng.IntN(7)-3)))
				}
			}
			opts := Options{Algo: tc.algo, ChunkBytes: 1024, Hosts: tc.hosts}
			whole := make([][]float32, tc.n)
			for r := range whole {
				whole[r] = slices.Clone(inputs[r])
			}
			comms, _ := newMemComms(t, tc.n, opts)
			noErrors(t, onAll(comms, func(c *Comm) error {
				return c.AllReduceFloat32(context.Background(), whole[c.Rank()], Sum)
			}))
			pieces := make([][]float32, tc.n)
			for r := range pieces {
				pieces[r] = slices.Clone(inputs[r])
			}
			comms, _ = newMemComms(t, tc.n, opts)
			noErrors(t, onAll(comms, func(c *Comm) error {
				buf, hi := pieces[c.Rank()], tc.length
				for _, lo := range append(tc.cuts, 0) {
					if err := c.AllReduceFloat32Range(context.Background(), buf, lo, hi, Sum); err != nil {
						return err
					}
					hi = lo
				}
				return nil
			}))
			for r := range pieces {
				for i := range pieces[r] {
					if math.Float32bits(pieces[r][i]) != math.Float32bits(whole[0][i]) {
						t.Fatalf("rank %d element %d: %v in pieces, %v whole", r, i, pieces[r][i], whole[0][i])
					}
				}
			}
		})
	}
}

// TestAllReduceRangeDiffersFromASlice shows why the range call exists: the
// ring over a slice of the buffer puts its elements in other segments and
// sums some in another order.
func TestAllReduceRangeDiffersFromASlice(t *testing.T) {
	const n, length, lo = 4, 4000, 1000
	rng := rand.New(rand.NewPCG(5, 5))
	inputs := normalInputs(rng, n, length)
	for r := range inputs {
		for i := range inputs[r] {
			inputs[r][i] *= float32(math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	run := func(f func(c *Comm, buf []float32) error) []float32 {
		bufs := make([][]float32, n)
		for r := range bufs {
			bufs[r] = slices.Clone(inputs[r])
		}
		comms, _ := newMemComms(t, n, Options{Algo: Ring, ChunkBytes: 1024})
		noErrors(t, onAll(comms, func(c *Comm) error { return f(c, bufs[c.Rank()]) }))
		return bufs[0][lo:]
	}
	ranged := run(func(c *Comm, buf []float32) error {
		return c.AllReduceFloat32Range(context.Background(), buf, lo, length, Sum)
	})
	whole := run(func(c *Comm, buf []float32) error { return c.AllReduceFloat32(context.Background(), buf, Sum) })
	sliced := run(func(c *Comm, buf []float32) error { return c.AllReduceFloat32(context.Background(), buf[lo:], Sum) })
	if !slices.Equal(ranged, whole) {
		t.Fatal("the range differs from the whole")
	}
	if slices.Equal(sliced, whole) {
		t.Fatal("a slice's all-reduce gave the whole's bits: this test's inputs do not show the order")
	}
}

func TestAllReduceRangeErrors(t *testing.T) {
	comms, _ := newMemComms(t, 1, Options{})
	for _, r := range [][2]int{{-1, 3}, {0, 11}, {5, 4}} {
		err := comms[0].AllReduceFloat32Range(context.Background(), make([]float32, 10), r[0], r[1], Sum)
		if err == nil || !strings.Contains(err.Error(), "within the buffer") {
			t.Fatalf("range %v: %v", r, err)
		}
	}
	// Ranks that cut the buffer differently are told so, naming both.
	comms, _ = newMemComms(t, 3, Options{Algo: Ring, Timeout: 10 * time.Second})
	errs := onAll(comms, func(c *Comm) error {
		buf := make([]float32, 300)
		if c.Rank() == 2 {
			return c.AllReduceFloat32(context.Background(), buf, Sum)
		}
		return c.AllReduceFloat32Range(context.Background(), buf, 100, 300, Sum)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "mismatch") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
