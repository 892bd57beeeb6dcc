package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// longTests enables the full matrix (16 MiB buffers for every world size).
var longTests = os.Getenv("MESHTRAIN_LONG") == "1"

// newMemComms returns n communicators on one in-memory network.
func newMemComms(t testing.TB, n int, opts Options) ([]*Comm, *MemNetwork) {
	t.Helper()
	net := NewMemNetwork(n)
	comms := make([]*Comm, n)
	for r := range comms {
		c, err := New(net.Transport(r), opts)
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = c
	}
	return comms, net
}

// onAll runs f on every rank at once and returns the per-rank errors.
func onAll(comms []*Comm, f func(c *Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t testing.TB, errs []error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func reference[T number](inputs [][]T, op Op) []T {
	out := slices.Clone(inputs[0])
	for _, in := range inputs[1:] {
		fold(op, out, in, false)
	}
	if op == Avg {
		divide(out, len(inputs))
	}
	return out
}

// TestAllReduceMatrix checks world sizes 1-8 × lengths × algorithms × ops
// against a naive reference. Inputs are small integers, so every summation
// order gives the exact same floats and the comparison is exact.
func TestAllReduceMatrix(t *testing.T) {
	const big = 16 << 20 / 4 // 16 MiB of float32
	for n := 1; n <= 8; n++ {
		lengths := []int{0, 1, n - 1, n + 1, 1000003}
		if longTests || n == 3 {
			lengths = append(lengths, big)
		}
		for _, length := range lengths {
			for _, algo := range []Algo{Ring, Tree, Star} {
				ops := []Op{Sum, Avg, Min, Max}
				if length > 1000 && !longTests {
					ops = []Op{Sum}
				}
				for _, op := range ops {
					name := fmt.Sprintf("n%d/len%d/%s/%s", n, length, algo, op)
					t.Run(name, func(t *testing.T) {
						if testing.Short() && length > 1000 {
							t.Skip("big buffers skipped in -short")
						}
						comms, _ := newMemComms(t, n, Options{Algo: algo, ChunkBytes: 64 << 10, Timeout: 30 * time.Second})
						rng := rand.New(rand.NewPCG(uint64(n), uint64(length)))
						inputs := make([][]float32, n)
						for r := range inputs {
							inputs[r] = make([]float32, length)
							for i := range inputs[r] {
								inputs[r][i] = float32(rng.IntN(200) - 100)
							}
						}
						want := reference(inputs, op)
						bufs := make([][]float32, n)
						for r := range bufs {
							bufs[r] = slices.Clone(inputs[r])
						}
						noErrors(t, onAll(comms, func(c *Comm) error {
							return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], op)
						}))
						for r := range bufs {
							if !slices.Equal(bufs[r], want) {
								t.Fatalf("rank %d differs from the reference", r)
							}
						}
					})
				}
			}
		}
	}
}

// TestAllReduceBitwiseIdentical uses random floats (where order matters)
// and checks all ranks agree bit for bit, across two runs, and are close to
// the reference.
func TestAllReduceBitwiseIdentical(t *testing.T) {
	for _, n := range []int{3, 4, 7} {
		for _, algo := range []Algo{Ring, Tree, Star} {
			var first []float32
			for run := 0; run < 2; run++ {
				comms, _ := newMemComms(t, n, Options{Algo: algo, ChunkBytes: 4096})
				rng := rand.New(rand.NewPCG(7, uint64(n)))
				bufs := make([][]float32, n)
				inputs := make([][]float64, n)
				for r := range bufs {
					bufs[r] = make([]float32, 10001)
					inputs[r] = make([]float64, len(bufs[r]))
					for i := range bufs[r] {
						bufs[r][i] = float32(rng.NormFloat64())
						inputs[r][i] = float64(bufs[r][i])
					}
				}
				noErrors(t, onAll(comms, func(c *Comm) error {
					return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], Sum)
				}))
				want := reference(inputs, Sum)
				for r := range bufs {
					for i := range bufs[r] {
						if math.Float32bits(bufs[r][i]) != math.Float32bits(bufs[0][i]) {
							t.Fatalf("n=%d %s: rank %d element %d = %v, rank 0 has %v", n, algo, r, i, bufs[r][i], bufs[0][i])
						}
						if math.Abs(float64(bufs[r][i])-want[i]) > 1e-4 {
							t.Fatalf("n=%d %s: element %d = %v, want %v", n, algo, i, bufs[r][i], want[i])
						}
					}
				}
				if run == 0 {
					first = slices.Clone(bufs[0])
				} else if !slices.Equal(first, bufs[0]) {
					t.Fatalf("n=%d %s: two runs differ", n, algo)
				}
			}
		}
	}
}

func TestAllReduceDTypes(t *testing.T) {
	for _, algo := range []Algo{Ring, Tree, Star} {
		comms, _ := newMemComms(t, 3, Options{Algo: algo})
		f64 := [][]float64{{1, -2, 3.5}, {4, 5, -6}, {7, 8, 9}}
		i64 := [][]int64{{1, math.MaxInt64 / 4, -7}, {2, 3, 4}, {10, -20, 30}}
		noErrors(t, onAll(comms, func(c *Comm) error {
			if err := c.AllReduceFloat64(context.Background(), f64[c.Rank()], Max); err != nil {
				return err
			}
			return allReduce(context.Background(), c, i64[c.Rank()], Avg, Int64)
		}))
		for r := range 3 {
			if !slices.Equal(f64[r], []float64{7, 8, 9}) || !slices.Equal(i64[r], []int64{4, (math.MaxInt64/4 - 17) / 3, 9}) {
				t.Fatalf("%s rank %d: float64 max %v, int64 avg %v", algo, r, f64[r], i64[r])
			}
		}
	}
}

func TestAutoAlgorithm(t *testing.T) {
	comms, _ := newMemComms(t, 2, Options{SmallBytes: 1024})
	if comms[0].AlgoFor(1024) != Tree || comms[0].AlgoFor(1025) != Ring {
		t.Fatalf("auto picks %v for 1024 and %v for 1025 bytes", comms[0].AlgoFor(1024), comms[0].AlgoFor(1025))
	}
	for _, tc := range []struct {
		n, starBytes, nbytes int
		want                 Algo
	}{
		{3, 512, 512, Star},
		{StarMaxRanks, 512, 513, Tree},
		{StarMaxRanks + 1, 512, 512, Tree},
		{4, -1, 1, Tree},
		{4, 512, 1025, Ring},
	} {
		comms, _ := newMemComms(t, tc.n, Options{SmallBytes: 1024, StarBytes: tc.starBytes})
		if got := comms[0].AlgoFor(tc.nbytes); got != tc.want {
			t.Errorf("n=%d StarBytes=%d: auto picks %v for %d bytes, want %v", tc.n, tc.starBytes, got, tc.nbytes, tc.want)
		}
	}
}

func TestBroadcastBarrierGather(t *testing.T) {
	for n := 1; n <= 5; n++ {
		comms, _ := newMemComms(t, n, Options{ChunkBytes: 8})
		bufs := make([][]byte, n)
		fbufs := make([][]float32, n)
		gathered := make([][][]byte, n)
		for r := range bufs {
			bufs[r] = make([]byte, 37)
			fbufs[r] = make([]float32, 5)
		}
		root := n - 1
		for i := range bufs[root] {
			bufs[root][i] = byte(i * 3)
		}
		fbufs[0] = []float32{1, 2, 3, 4, 5}
		noErrors(t, onAll(comms, func(c *Comm) error {
			ctx := context.Background()
			r := c.Rank()
			if err := c.broadcast(ctx, bufs[r], len(bufs[r]), Bytes, root); err != nil {
				return err
			}
			if err := c.BroadcastFloat32(ctx, fbufs[r], 0); err != nil {
				return err
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			var err error
			gathered[r], err = c.AllGatherV(ctx, []byte(strings.Repeat(fmt.Sprint(r), r*3)))
			return err
		}))
		for r := range n {
			if !slices.Equal(bufs[r], bufs[root]) || !slices.Equal(fbufs[r], []float32{1, 2, 3, 4, 5}) {
				t.Fatalf("n=%d rank %d: broadcast got %v / %v", n, r, bufs[r], fbufs[r])
			}
			for q := range n {
				if string(gathered[r][q]) != strings.Repeat(fmt.Sprint(q), q*3) {
					t.Fatalf("n=%d rank %d: gathered[%d] = %q", n, r, q, gathered[r][q])
				}
			}
		}
	}
}

func TestPointToPoint(t *testing.T) {
	comms, _ := newMemComms(t, 3, Options{Timeout: 5 * time.Second})
	big := make([]byte, DefaultMaxFrame+123) // spans two frames
	for i := range big {
		big[i] = byte(i)
	}
	got := make([][]byte, 3)
	noErrors(t, onAll(comms, func(c *Comm) error {
		ctx := context.Background()
		switch c.Rank() {
		case 0:
			return c.Send(ctx, 2, 9, big)
		case 2:
			var err error
			got[2], err = c.Recv(ctx, 0, 9)
			if err != nil {
				return err
			}
			got[2] = slices.Clone(got[2][:10]) // keep the test's memory small
			return nil
		}
		return nil
	}))
	if !slices.Equal(got[2], big[:10]) {
		t.Fatalf("p2p payload corrupted: %v", got[2])
	}
	// A pairwise exchange (both ranks send and receive at once, as gossip
	// does) runs beside a collective without disturbing it.
	ex := make([][]byte, 3)
	sums := [][]float32{{1}, {2}, {3}}
	noErrors(t, onAll(comms, func(c *Comm) error {
		ctx := context.Background()
		var err error
		if c.Rank() < 2 {
			done := make(chan error, 1)
			go func() {
				sent := make(chan error, 1)
				go func() { sent <- c.Send(ctx, 1-c.Rank(), 4, []byte{byte(c.Rank())}) }()
				var e error
				ex[c.Rank()], e = c.Recv(ctx, 1-c.Rank(), 4)
				done <- errors.Join(e, <-sent)
			}()
			err = c.AllReduceFloat32(ctx, sums[c.Rank()], Sum)
			return errors.Join(err, <-done)
		}
		return c.AllReduceFloat32(ctx, sums[c.Rank()], Sum)
	}))
	if !slices.Equal(ex[0], []byte{1}) || !slices.Equal(ex[1], []byte{0}) || sums[2][0] != 6 {
		t.Fatalf("exchange got %v %v, all-reduce %v", ex[0], ex[1], sums)
	}
	// A wrong tag is an error naming both tags.
	errs := onAll(comms[:2], func(c *Comm) error {
		if c.Rank() == 0 {
			return c.Send(context.Background(), 1, 5, []byte("x"))
		}
		_, err := c.Recv(context.Background(), 0, 6)
		return err
	})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "expects tag 6") || !strings.Contains(errs[1].Error(), "got tag 5") {
		t.Fatalf("tag mismatch error: %v", errs[1])
	}
}

// TestMismatchedLengths: a rank calling with a different length makes every
// rank fail with an error that names both ranks and both shapes.
func TestMismatchedLengths(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		for _, algo := range []Algo{Ring, Tree, Star} {
			comms, _ := newMemComms(t, n, Options{Algo: algo, Timeout: 10 * time.Second})
			start := time.Now()
			errs := onAll(comms, func(c *Comm) error {
				length := 100
				if c.Rank() == 1 {
					length = 101
				}
				return c.AllReduceFloat32(context.Background(), make([]float32, length), Sum)
			})
			if time.Since(start) > 5*time.Second {
				t.Fatalf("n=%d %s: mismatch took %v to surface", n, algo, time.Since(start))
			}
			for r, err := range errs {
				if err == nil {
					t.Fatalf("n=%d %s: rank %d saw no error", n, algo, r)
				}
				msg := err.Error()
				if !strings.Contains(msg, "mismatch") || !strings.Contains(msg, "float32×100") || !strings.Contains(msg, "float32×101") || !strings.Contains(msg, "rank 1") {
					t.Fatalf("n=%d %s: rank %d error does not name both shapes and ranks: %v", n, algo, r, err)
				}
			}
			// The communicator is now broken.
			if err := comms[0].Barrier(context.Background()); err == nil || !strings.Contains(err.Error(), "unusable") {
				t.Fatalf("barrier after a failure: %v", err)
			}
		}
	}
}

func TestMismatchedOrder(t *testing.T) {
	comms, _ := newMemComms(t, 2, Options{Timeout: 10 * time.Second})
	errs := onAll(comms, func(c *Comm) error {
		if c.Rank() == 0 {
			return c.Barrier(context.Background())
		}
		return c.BroadcastFloat32(context.Background(), make([]float32, 1), 0)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "barrier #1") || !strings.Contains(err.Error(), "broadcast #1") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestKilledPeer: a rank dying mid-collective gives every other rank an
// error naming it, long before the timeout.
func TestKilledPeer(t *testing.T) {
	for _, algo := range []Algo{Ring, Tree, Star} {
		comms, net := newMemComms(t, 4, Options{Algo: algo, Timeout: 20 * time.Second, ChunkBytes: 1024})
		start := time.Now()
		errs := onAll(comms, func(c *Comm) error {
			if c.Rank() == 2 {
				net.Kill(2) // dies before contributing
				return nil
			}
			return c.AllReduceFloat32(context.Background(), make([]float32, 100000), Sum)
		})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: took %v: %v", algo, d, errs)
		}
		for r, err := range errs {
			if r == 2 {
				continue
			}
			if err == nil || !strings.Contains(err.Error(), "rank 2") {
				t.Fatalf("%s: rank %d error does not name rank 2: %v", algo, r, err)
			}
		}
	}
}

// TestSilentPeerTimesOut: frames that vanish end in a timeout naming the
// rank waited on.
func TestSilentPeerTimesOut(t *testing.T) {
	comms, net := newMemComms(t, 2, Options{Algo: Ring, Timeout: 300 * time.Millisecond})
	net.Drop(0, 1)
	errs := onAll(comms, func(c *Comm) error {
		return c.AllReduceFloat32(context.Background(), make([]float32, 10), Sum)
	})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "waiting for rank 0: timed out") {
		t.Fatalf("rank 1: %v", errs[1])
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1") {
		t.Fatalf("rank 0: %v", errs[0])
	}
}

func TestCleanCloseIsNotAFailure(t *testing.T) {
	comms, net := newMemComms(t, 2, Options{})
	noErrors(t, onAll(comms, func(c *Comm) error { return c.Barrier(context.Background()) }))
	_ = net.Transport(0).Close()
	err := comms[1].Barrier(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rank 0 closed its communicator") {
		t.Fatalf("barrier with a closed peer: %v", err)
	}
}

func TestBadArguments(t *testing.T) {
	comms, _ := newMemComms(t, 2, Options{})
	ctx := context.Background()
	if err := comms[0].BroadcastFloat32(ctx, nil, 2); err == nil {
		t.Error("broadcast from rank 2 of 2 accepted")
	}
	if err := comms[0].Send(ctx, 0, 1, nil); err == nil {
		t.Error("send to self accepted")
	}
	if err := comms[0].AllReduceFloat32(ctx, nil, Op(9)); err == nil {
		t.Error("unknown op accepted")
	}
	if _, err := New(NewMemNetwork(1).Transport(0), Options{ChunkBytes: 12}); err == nil {
		t.Error("ChunkBytes 12 accepted")
	}
}

// TestStarRootRotates: consecutive star all-reduces have different roots,
// yet each gives the same bits on every rank and for every root (the root
// folds in rank order), for NaN-sensitive Min as well as Sum.
func TestStarRootRotates(t *testing.T) {
	const n = 4
	comms, _ := newMemComms(t, n, Options{Algo: Star, ChunkBytes: 1024})
	inputs := normalInputs(rand.New(rand.NewPCG(3, 4)), n, 1001)
	for r := range inputs {
		inputs[r][r] = float32(math.NaN())
	}
	for _, op := range []Op{Sum, Min} {
		var first []float32
		for round := range n { // roots 1, 2, 3, 0 (then 1, ... for Min)
			bufs := make([][]float32, n)
			for r := range bufs {
				bufs[r] = slices.Clone(inputs[r])
			}
			noErrors(t, onAll(comms, func(c *Comm) error {
				return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], op)
			}))
			for r := range bufs {
				for i := range bufs[r] {
					if math.Float32bits(bufs[r][i]) != math.Float32bits(bufs[0][i]) {
						t.Fatalf("%s round %d: rank %d element %d = %v, rank 0 has %v", op, round, r, i, bufs[r][i], bufs[0][i])
					}
				}
			}
			if first == nil {
				first = bufs[0]
			}
			for i := range first {
				if math.Float32bits(bufs[0][i]) != math.Float32bits(first[i]) {
					t.Fatalf("%s round %d: element %d = %v, round 0 gave %v", op, round, i, bufs[0][i], first[i])
				}
			}
		}
	}
}

// normalInputs returns n ranks' inputs of size standard normal values.
func normalInputs(rng *rand.Rand, n, size int) [][]float32 {
	inputs := make([][]float32, n)
	for r := range inputs {
		inputs[r] = make([]float32, size)
		for i := range inputs[r] {
			inputs[r][i] = float32(rng.NormFloat64())
		}
	}
	return inputs
}
