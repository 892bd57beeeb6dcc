package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// idSet is a dense dataset whose example i has the single feature i and
// label i, so a batch tells exactly which examples it holds.
func idSet(t testing.TB, n int) Dataset {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	ds, err := NewDenseSet(x, slices.Clone(x), 1)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// drain reads p to its end and returns the example ids of each batch.
func drain(t testing.TB, p *Pipeline) [][]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out [][]int
	for {
		b, err := p.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Labels) != b.Size {
			t.Fatalf("batch of size %d has %d labels", b.Size, len(b.Labels))
		}
		ids := make([]int, b.Size)
		for i, l := range b.Labels[:b.Size] {
			ids[i] = int(l)
		}
		out = append(out, ids)
	}
}

func newPipe(t testing.TB, ds Dataset, cfg Config) *Pipeline {
	t.Helper()
	p, err := NewPipeline(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestEveryExampleOncePerEpoch: across all ranks every example appears
// exactly once per epoch, and every rank runs the same number of steps.
func TestEveryExampleOncePerEpoch(t *testing.T) {
	cases := []struct{ n, world, batch int }{
		{10, 1, 3}, {10, 3, 3}, {11, 4, 2}, {7, 7, 1}, {5, 8, 2}, {1000, 3, 64}, {64, 2, 32},
	}
	for _, c := range cases {
		for _, prefetch := range []int{0, 2} {
			t.Run(fmt.Sprintf("n%d_w%d_b%d_p%d", c.n, c.world, c.batch, prefetch), func(t *testing.T) {
				const epochs = 3
				seen := make([][]int, epochs) // seen[e][id]
				for e := range seen {
					seen[e] = make([]int, c.n)
				}
				steps := Steps(c.n, c.world, c.batch, false)
				for r := range c.world {
					p := newPipe(t, idSet(t, c.n), Config{Rank: r, World: c.world, Policy: ShardData, ShuffleBuffer: 4, Seed: 7, Epochs: epochs, BatchSize: c.batch, Prefetch: prefetch})
					if p.StepsPerEpoch() != steps {
						t.Fatalf("rank %d: StepsPerEpoch %d, want %d", r, p.StepsPerEpoch(), steps)
					}
					batches := drain(t, p)
					if len(batches) != epochs*steps {
						t.Fatalf("rank %d: %d batches, want %d epochs x %d steps", r, len(batches), epochs, steps)
					}
					for k, ids := range batches {
						for _, id := range ids {
							seen[k/steps][id]++
						}
					}
				}
				for e := range seen {
					for id, k := range seen[e] {
						if k != 1 {
							t.Fatalf("epoch %d: example %d seen %d times", e, id, k)
						}
					}
				}
			})
		}
	}
}

// TestDropRemainderSteps: with drop remainder every rank runs the same
// number of full batches, and no example repeats within an epoch.
func TestDropRemainderSteps(t *testing.T) {
	for _, c := range []struct{ n, world, batch, steps int }{
		{10, 3, 2, 1}, {11, 4, 2, 1}, {12, 2, 3, 2}, {100, 3, 10, 3}, {5, 2, 4, 0}, {0, 2, 1, 0},
	} {
		t.Run(fmt.Sprintf("n%d_w%d_b%d", c.n, c.world, c.batch), func(t *testing.T) {
			if s := Steps(c.n, c.world, c.batch, true); s != c.steps {
				t.Fatalf("Steps = %d, want %d", s, c.steps)
			}
			for r := range c.world {
				cfg := TrainConfig(r, c.world, c.batch, 3, 2)
				batches := drain(t, newPipe(t, idSet(t, c.n), cfg))
				if len(batches) != 2*c.steps {
					t.Fatalf("rank %d: %d batches, want %d", r, len(batches), 2*c.steps)
				}
				for k, ids := range batches {
					if len(ids) != c.batch {
						t.Fatalf("rank %d batch %d has %d examples, want %d", r, k, len(ids), c.batch)
					}
					for _, id := range ids {
						if id%c.world != r {
							t.Fatalf("rank %d got example %d of rank %d's shard", r, id, id%c.world)
						}
					}
				}
			}
		})
	}
}

func TestShuffleDeterminism(t *testing.T) {
	order := func(seed uint64, buffer int) [][]int {
		cfg := Config{ShuffleBuffer: buffer, Seed: seed, Epochs: 3, BatchSize: 100}
		return drain(t, newPipe(t, idSet(t, 100), cfg))
	}
	for _, buffer := range []int{10, FullShuffle} {
		a, b, c := order(1, buffer), order(1, buffer), order(2, buffer)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("buffer %d: same seed, different order", buffer)
		}
		if fmt.Sprint(a) == fmt.Sprint(c) {
			t.Fatalf("buffer %d: seeds 1 and 2 give the same order", buffer)
		}
		if slices.Equal(a[0], a[1]) || slices.Equal(a[1], a[2]) {
			t.Fatalf("buffer %d: two epochs in the same order", buffer)
		}
		for e, ids := range a {
			s := slices.Sorted(slices.Values(ids))
			for i, id := range s {
				if id != i {
					t.Fatalf("buffer %d epoch %d is not a permutation: %v", buffer, e, ids)
				}
			}
		}
	}
	// Resuming at epoch 2 reproduces epoch 2.
	full := order(5, FullShuffle)
	resumed := drain(t, newPipe(t, idSet(t, 100), Config{ShuffleBuffer: FullShuffle, Seed: 5, StartEpoch: 2, BatchSize: 100}))
	if !slices.Equal(full[2], resumed[0]) {
		t.Fatal("StartEpoch 2 does not reproduce epoch 2")
	}
	// No shuffle keeps the shard order.
	plain := drain(t, newPipe(t, idSet(t, 10), Config{Rank: 1, World: 3, Policy: ShardData, BatchSize: 10}))
	if fmt.Sprint(plain) != "[[1 4 7]]" {
		t.Fatalf("unshuffled shard 1 of 3 = %v, want [[1 4 7]]", plain)
	}
}

// TestShuffleBufferLocality: a buffer of k keeps each output within k-1
// places of where the buffer could have reached (tf.data semantics): the
// i-th output is one of the first i+k inputs.
func TestShuffleBufferLocality(t *testing.T) {
	src := make([]int32, 1000)
	for i := range src {
		src[i] = int32(i)
	}
	for _, k := range []int{2, 5, 50} {
		dst := make([]int32, len(src))
		shuffleInto(dst, src, nil, k, newRNG(1, streamExamples, 0, 0))
		for i, v := range dst {
			if int(v) >= i+k {
				t.Fatalf("k=%d: output %d is input %d, beyond the buffer", k, i, v)
			}
		}
		if slices.Equal(dst, src) {
			t.Fatalf("k=%d: not shuffled", k)
		}
	}
}

func TestRepeatAndBatchEdges(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		cfg     Config
		batches string // fmt of the ids
	}{
		{"empty", 0, Config{BatchSize: 4}, "[]"},
		{"empty forever", 0, Config{BatchSize: 4, Epochs: Forever}, "[]"},
		{"batch larger than data", 3, Config{BatchSize: 8}, "[[0 1 2]]"},
		{"batch larger than data, drop", 3, Config{BatchSize: 8, DropRemainder: true}, "[]"},
		{"batch larger than data, drop, forever", 3, Config{BatchSize: 8, DropRemainder: true, Epochs: Forever}, "[]"},
		{"remainder kept", 5, Config{BatchSize: 2}, "[[0 1] [2 3] [4]]"},
		{"remainder dropped", 5, Config{BatchSize: 2, DropRemainder: true}, "[[0 1] [2 3]]"},
		{"exact", 4, Config{BatchSize: 2, DropRemainder: true}, "[[0 1] [2 3]]"},
		{"repeat 3, batches stay in epochs", 3, Config{BatchSize: 2, Epochs: 3}, "[[0 1] [2] [0 1] [2] [0 1] [2]]"},
		{"off: every rank reads all", 3, Config{Rank: 1, World: 2, Policy: ShardOff, BatchSize: 3}, "[[0 1 2]]"},
		{"auto means data in memory", 5, Config{Rank: 1, World: 2, Policy: ShardAuto, BatchSize: 3}, "[[1 3]]"},
		{"padding batch on the short rank", 5, Config{Rank: 1, World: 2, Policy: ShardData, BatchSize: 2}, "[[1 3] []]"},
		{"one rank", 3, Config{Policy: ShardFile, BatchSize: 3}, "[[0 1 2]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fmt.Sprint(drain(t, newPipe(t, idSet(t, c.n), c.cfg)))
			if got != c.batches {
				t.Fatalf("batches %s, want %s", got, c.batches)
			}
		})
	}
	// Forever really repeats.
	p := newPipe(t, idSet(t, 3), Config{BatchSize: 2, Epochs: Forever, Prefetch: 1})
	ctx := context.Background()
	for k := range 100 {
		b, err := p.Next(ctx)
		if err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		if b.Epoch != k/2 || b.Step != k%2 {
			t.Fatalf("batch %d is epoch %d step %d, want %d, %d", k, b.Epoch, b.Step, k/2, k%2)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{BatchSize: 0}, "batch size 0"},
		{Config{BatchSize: 1, Rank: 2, World: 2}, "rank 2 of 2 workers"},
		{Config{BatchSize: 1, Rank: -1}, "rank -1"},
		{Config{BatchSize: 1, ShuffleBuffer: -1}, "shuffle buffer -1"},
		{Config{BatchSize: 1, Epochs: -2}, "epochs -2"},
		{Config{BatchSize: 1, Prefetch: -1}, "prefetch -1"},
		{Config{BatchSize: 1, World: 2, Policy: ShardFile}, "1 input files for 2 workers"},
		{Config{BatchSize: 1, Policy: ShardPolicy(9)}, "invalid shard policy 9"},
	}
	for _, c := range cases {
		_, err := NewPipeline(context.Background(), idSet(t, 4), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
}

func TestParseShardPolicy(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ShardPolicy
		err  bool
	}{{"off", ShardOff, false}, {"FILE", ShardFile, false}, {"Data", ShardData, false}, {"auto", ShardAuto, false}, {"hint", 0, true}, {"", 0, true}} {
		p, err := ParseShardPolicy(c.in)
		if (err != nil) != c.err || (!c.err && (p != c.want || p.String() != strings.ToLower(c.in))) {
			t.Errorf("ParseShardPolicy(%q) = %v, %v", c.in, p, err)
		}
		if c.err && !strings.Contains(err.Error(), "want off, file, data or auto") {
			t.Errorf("error %q does not list the policies", err)
		}
	}
}

// TestPrefetchMatchesInline: prefetching changes timing, not content.
func TestPrefetchMatchesInline(t *testing.T) {
	cfg := TrainConfig(1, 3, 7, 11, 4)
	a := drain(t, newPipe(t, idSet(t, 200), cfg))
	cfg.Prefetch = 0
	b := drain(t, newPipe(t, idSet(t, 200), cfg))
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("prefetch changed the batches")
	}
}

// waitGoroutines waits until at most n goroutines run, failing after a
// deadline with the stacks of the survivors.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines still running after 5s, want <= %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestPrefetchStopsWithoutLeak: cancelling the context or closing the
// pipeline stops the prefetch goroutine, whether it is blocked on a full
// queue or mid-stream, and Next then reports why. runtime.NumGoroutine is
// enough here (no goleak dependency): the test controls every goroutine it
// starts and waits for the count to return under a deadline.
func TestPrefetchStopsWithoutLeak(t *testing.T) {
	for _, how := range []string{"cancel", "close", "cancel before reading", "close after EOF"} {
		t.Run(how, func(t *testing.T) {
			base := runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n, epochs := 50, Forever
			if how == "close after EOF" {
				epochs = 1
			}
			p, err := NewPipeline(ctx, idSet(t, n), Config{BatchSize: 4, Epochs: epochs, Prefetch: 3, ShuffleBuffer: FullShuffle})
			if err != nil {
				t.Fatal(err)
			}
			reads := 5
			if how == "cancel before reading" {
				reads = 0
			}
			for range reads {
				if _, err := p.Next(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			switch how {
			case "cancel", "cancel before reading":
				waitQueueFull(t, p)
				cancel()
				waitGoroutines(t, base)
				for {
					_, err := p.Next(context.Background())
					if err == nil {
						continue // batches queued before the cancel
					}
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("after cancel Next = %v, want context.Canceled", err)
					}
					break
				}
			case "close":
				waitQueueFull(t, p)
				closeWithin(t, p)
				if _, err := p.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
					t.Fatalf("after Close Next = %v", err)
				}
			case "close after EOF":
				drain(t, p)
			}
			closeWithin(t, p)
			waitGoroutines(t, base)
		})
	}
}

// closeWithin closes p, failing if Close does not return within 5s.
func closeWithin(t *testing.T, p *Pipeline) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s: the prefetch goroutine did not stop")
	}
}

// waitQueueFull waits until the prefetch queue is full, so that the
// producer is blocked handing over a batch: the hardest place to stop it.
func waitQueueFull(t *testing.T, p *Pipeline) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.out) < cap(p.out) {
		if time.Now().After(deadline) {
			t.Fatalf("prefetch queue holds %d of %d batches after 5s", len(p.out), cap(p.out))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNextDeadline: a Next waiting on a slow producer honours its own ctx.
func TestNextDeadline(t *testing.T) {
	open := func(ctx context.Context, path string) (Source, error) { return blockingSource{}, nil }
	p, err := NewFilePipeline(context.Background(), []string{"slow"}, open, Config{BatchSize: 1, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := p.Next(ctx); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "prefetch") {
		t.Fatalf("Next = %v, want a deadline error naming the prefetch goroutine", err)
	}
}

// blockingSource never yields until its ctx ends.
type blockingSource struct{}

func (blockingSource) Next(ctx context.Context) (Example, error) {
	<-ctx.Done()
	return Example{}, ctx.Err()
}

// TestBatchOwnership: with prefetch, the batch Next returned is not
// written to until the following Next, although the producer runs ahead
// (-race would also flag a concurrent write).
func TestBatchOwnership(t *testing.T) {
	p := newPipe(t, idSet(t, 64), Config{BatchSize: 4, Epochs: Forever, Prefetch: 2, ShuffleBuffer: FullShuffle})
	ctx := context.Background()
	prev, err := p.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		want := slices.Clone(prev.Labels)
		for range 100 { // give the producer time to run ahead and fill the queue
			runtime.Gosched()
		}
		if !slices.Equal(prev.Labels, want) {
			t.Fatal("the held batch changed before the next call to Next")
		}
		if prev, err = p.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSparseDataset(t *testing.T) {
	ds, err := NewSparseSet([]int{0, 2, 2, 3}, []int32{1, 5, 7}, []float32{0.5, 1, 2}, []float32{1, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	p := newPipe(t, ds, Config{BatchSize: 3})
	b, err := p.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(b.Size, b.Dim, b.RowPtr, b.Indices, b.Values, b.Labels, len(b.X))
	if want := "3 0 [0 2 2 3] [1 5 7] [0.5 1 2] [1 0 1] 0"; got != want {
		t.Fatalf("sparse batch %s, want %s", got, want)
	}
	for _, c := range []struct {
		rowPtr []int
		idx    []int32
		want   string
	}{
		{[]int{0, 2, 1, 3}, []int32{1, 5, 7}, "row pointers decrease at row 1"},
		{[]int{0, 2, 2, 3}, []int32{5, 1, 7}, "row 0: indices not sorted and unique (1 after 5)"},
		{[]int{0, 2, 3}, []int32{1, 5, 7}, "3 row pointers, 3 labels"},
	} {
		if _, err := NewSparseSet(c.rowPtr, c.idx, []float32{1, 2, 3}, []float32{1, 0, 1}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSparseSet(%v, %v): error %v, want %q", c.rowPtr, c.idx, err, c.want)
		}
	}
}

func TestImagesDataset(t *testing.T) {
	im := &Images{N: 2, Rows: 1, Cols: 3, Pixels: []uint8{0, 255, 128, 1, 2, 3}, Labels: []uint8{7, 3}}
	ds := im.Dataset()
	b := new(Batch)
	b.reset(ds.Dim(), 2, false)
	ds.Append(b, 1)
	ds.Append(b, 0)
	norm := func(p float64) float32 { return float32((p/255 - MNISTMean) / MNISTStd) }
	want := []float32{norm(1), norm(2), norm(3), norm(0), norm(255), norm(128)}
	if b.Size != 2 || b.Dim != 3 || !slices.Equal(b.Labels, []float32{3, 7}) {
		t.Fatalf("batch size %d dim %d labels %v", b.Size, b.Dim, b.Labels)
	}
	for i := range want {
		if math.Abs(float64(b.X[i]-want[i])) > 1e-6 {
			t.Fatalf("X = %v, want %v", b.X, want)
		}
	}
	if math.Abs(float64(b.X[3])+0.4242) > 1e-3 || math.Abs(float64(b.X[4])-2.8215) > 1e-3 {
		t.Fatalf("pixel 0 -> %v, 255 -> %v; want -0.4242, 2.8215", b.X[3], b.X[4])
	}
	if got := b.IntLabels(nil); !slices.Equal(got, []int32{3, 7}) {
		t.Fatalf("IntLabels = %v", got)
	}
}

// TestNoAllocs: in steady state, a step of the in-memory pipeline
// (including epoch boundaries, which reshuffle) allocates nothing.
func TestNoAllocs(t *testing.T) {
	im := &Images{N: 100, Rows: 28, Cols: 28, Pixels: make([]uint8, 100*784), Labels: make([]uint8, 100)}
	p := newPipe(t, im.Dataset(), Config{BatchSize: 32, Epochs: Forever, ShuffleBuffer: FullShuffle, DropRemainder: true})
	ctx := context.Background()
	if _, err := p.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { p.Next(ctx) }); a != 0 {
		t.Fatalf("%v allocations per Next, want 0", a)
	}
}

// TestDropRemainderRotates: with drop remainder and shuffling, the
// examples left out differ between epochs, so over a few epochs every
// example of the shard is used.
func TestDropRemainderRotates(t *testing.T) {
	batches := drain(t, newPipe(t, idSet(t, 10), TrainConfig(0, 3, 2, 1, 20))) // shard {0 3 6 9}, 1 step of 2
	used := map[int]bool{}
	for _, ids := range batches {
		for _, id := range ids {
			used[id] = true
		}
	}
	if len(batches) != 20 || len(used) != 4 {
		t.Fatalf("%d batches used examples %v; want 20 batches using all of 0, 3, 6, 9", len(batches), used)
	}
}
