package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// memFiles is a set of in-memory "files" of examples with ids as labels
// (dense: one feature equal to the id; sparse: index id), recording opens
// and closes.
type memFiles struct {
	files  map[string][]Example
	opens  int
	closes int
}

// newMemFiles makes len(sizes) files; file f holds sizes[f] consecutive ids.
func newMemFiles(sizes []int, sparse bool) (*memFiles, []string) {
	m := &memFiles{files: map[string][]Example{}}
	var names []string
	id := 0
	for f, n := range sizes {
		name := "part-" + strconv.Itoa(f)
		names = append(names, name)
		m.files[name] = []Example{}
		for range n {
			ex := Example{Label: float32(id), Features: []float32{float32(id)}}
			if sparse {
				ex = Example{Label: float32(id), Indices: []int32{int32(id)}, Values: []float32{1}}
			}
			m.files[name] = append(m.files[name], ex)
			id++
		}
	}
	return m, names
}

type closingSource struct {
	SliceSource
	m *memFiles
}

func (c *closingSource) Close() error { c.m.closes++; return nil }

func (m *memFiles) open(ctx context.Context, path string) (Source, error) {
	ex, ok := m.files[path]
	if !ok {
		return nil, fmt.Errorf("no such file")
	}
	m.opens++
	return &closingSource{SliceSource{Examples: ex}, m}, nil
}

func newFilePipe(t *testing.T, names []string, open Opener, cfg Config) *Pipeline {
	t.Helper()
	p, err := NewFilePipeline(context.Background(), names, open, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestFileShardingOncePerEpoch: under FILE and DATA sharding of files,
// every example is read by exactly one rank per epoch, with and without
// shuffling, dense and sparse.
func TestFileShardingOncePerEpoch(t *testing.T) {
	cases := []struct {
		policy ShardPolicy
		world  int
		sizes  []int
	}{
		{ShardFile, 2, []int{3, 4, 5, 6}},
		{ShardFile, 3, []int{10, 0, 7, 1}},
		{ShardData, 3, []int{5, 5}},
		{ShardData, 4, []int{1, 2, 3}},
		{ShardAuto, 2, []int{4, 4, 4}},
		{ShardAuto, 4, []int{4, 4, 4}},
	}
	for _, c := range cases {
		for _, buffer := range []int{0, 3, FullShuffle} {
			for _, sparse := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v_w%d_%v_buf%d_sparse%v", c.policy, c.world, c.sizes, buffer, sparse), func(t *testing.T) {
					total := 0
					for _, n := range c.sizes {
						total += n
					}
					const epochs = 2
					seen := make([][]int, epochs)
					for e := range seen {
						seen[e] = make([]int, total)
					}
					for r := range c.world {
						m, names := newMemFiles(c.sizes, sparse)
						p := newFilePipe(t, names, m.open, Config{Rank: r, World: c.world, Policy: c.policy, ShuffleBuffer: buffer, Seed: 9, Epochs: epochs, BatchSize: 2, Prefetch: 1})
						ctx := context.Background()
						for {
							b, err := p.Next(ctx)
							if errors.Is(err, io.EOF) {
								break
							}
							if err != nil {
								t.Fatal(err)
							}
							checkBatchRows(t, b, sparse)
							for _, l := range b.Labels[:b.Size] {
								seen[b.Epoch][int(l)]++
							}
						}
						p.Close()
						if m.opens != m.closes {
							t.Fatalf("rank %d opened %d sources, closed %d", r, m.opens, m.closes)
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
}

// checkBatchRows checks each row's features encode its label (the id), so
// shuffling moved whole examples.
func checkBatchRows(t *testing.T, b *Batch, sparse bool) {
	t.Helper()
	for r := range b.Size {
		var id float32
		if sparse {
			if b.Dim != 0 || len(b.RowPtr) != b.Size+1 || b.RowPtr[r+1]-b.RowPtr[r] != 1 {
				t.Fatalf("bad CSR batch: dim %d rowptr %v size %d", b.Dim, b.RowPtr, b.Size)
			}
			id = float32(b.Indices[b.RowPtr[r]])
		} else {
			if b.Dim != 1 || len(b.X) != b.Size {
				t.Fatalf("bad dense batch: dim %d, %d values, size %d", b.Dim, len(b.X), b.Size)
			}
			id = b.X[r]
		}
		if id != b.Labels[r] {
			t.Fatalf("row %d: features of example %v with label %v", r, id, b.Labels[r])
		}
	}
}

func TestFilePipelineShuffle(t *testing.T) {
	run := func(seed uint64) []string {
		m, names := newMemFiles([]int{20, 20, 20}, false)
		p := newFilePipe(t, names, m.open, Config{ShuffleBuffer: 10, Seed: seed, Epochs: 3, BatchSize: 60})
		var out []string
		for _, ids := range drain(t, p) {
			out = append(out, fmt.Sprint(ids))
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different order")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 1 and 2 give the same order")
	}
	if len(a) != 3 || a[0] == a[1] || a[1] == a[2] {
		t.Fatalf("epochs not reshuffled: %v", a)
	}
}

// TestFileStepsPerEpoch: with StepsPerEpoch every rank yields exactly that
// many batches per epoch, padding with empty batches or cutting the rest.
func TestFileStepsPerEpoch(t *testing.T) {
	sizes := []int{7, 2} // FILE over 2 ranks: shards of 7 and 2 examples
	for r, want := range []int{7, 2} {
		m, names := newMemFiles(sizes, false)
		n, err := ShardCount(context.Background(), names, m.open, Config{Rank: r, World: 2, Policy: ShardFile, BatchSize: 1})
		if err != nil || n != want {
			t.Fatalf("ShardCount rank %d = %d, %v; want %d", r, n, err, want)
		}
		if m.opens != m.closes {
			t.Fatalf("ShardCount opened %d, closed %d", m.opens, m.closes)
		}
	}
	m, names := newMemFiles([]int{3, 4}, false)
	if n, err := ShardCount(context.Background(), names, m.open, Config{Rank: 2, World: 3, Policy: ShardData, BatchSize: 1}); err != nil || n != 2 {
		t.Fatalf("ShardCount DATA rank 2 of 3 over 7 = %d, %v; want 2", n, err)
	}
	for _, drop := range []bool{false, true} {
		batch := 3 // keep remainder: ceil(7/3) = 3 steps
		if drop {
			batch = 2 // drop remainder: floor(2/2) = 1 step
		}
		steps := AgreedSteps(2, 7, batch, drop)
		for r := range 2 {
			m, names := newMemFiles(sizes, false)
			p := newFilePipe(t, names, m.open, Config{Rank: r, World: 2, Policy: ShardFile, Epochs: 2, BatchSize: batch, DropRemainder: drop, StepsPerEpoch: steps})
			if p.StepsPerEpoch() != steps {
				t.Fatalf("StepsPerEpoch = %d, want %d", p.StepsPerEpoch(), steps)
			}
			got := drain(t, p)
			if len(got) != 2*steps {
				t.Fatalf("drop %v rank %d: %d batches, want %d: %v", drop, r, len(got), 2*steps, got)
			}
			want := map[string]string{
				"false0": "[[0 1 2] [3 4 5] [6] [0 1 2] [3 4 5] [6]]",
				"false1": "[[7 8] [] [] [7 8] [] []]",
				"true0":  "[[0 1] [0 1]]",
				"true1":  "[[7 8] [7 8]]",
			}[fmt.Sprint(drop)+strconv.Itoa(r)]
			if fmt.Sprint(got) != want {
				t.Fatalf("drop %v rank %d: %v, want %s", drop, r, got, want)
			}
			if m.opens != m.closes {
				t.Fatalf("opened %d, closed %d", m.opens, m.closes)
			}
		}
	}
}

func TestFilePipelineEdges(t *testing.T) {
	cases := []struct {
		name  string
		sizes []int
		cfg   Config
		want  string
	}{
		{"no files", nil, Config{BatchSize: 2, Epochs: Forever}, "[]"},
		{"empty files", []int{0, 0}, Config{BatchSize: 2, Epochs: Forever}, "[]"},
		{"batch larger than data", []int{2, 1}, Config{BatchSize: 5}, "[[0 1 2]]"},
		{"batch larger than data, drop", []int{2, 1}, Config{BatchSize: 5, DropRemainder: true, Epochs: Forever}, "[]"},
		{"remainder across files", []int{2, 3}, Config{BatchSize: 2}, "[[0 1] [2 3] [4]]"},
		{"remainder dropped", []int{2, 3}, Config{BatchSize: 2, DropRemainder: true, Epochs: 2}, "[[0 1] [2 3] [0 1] [2 3]]"},
		{"data sharding across files", []int{2, 3}, Config{Rank: 1, World: 2, Policy: ShardData, BatchSize: 5}, "[[1 3]]"},
		{"auto with too few files is data", []int{2, 3}, Config{Rank: 2, World: 3, Policy: ShardAuto, BatchSize: 5}, "[[2]]"},
		{"off", []int{2, 3}, Config{Rank: 1, World: 2, Policy: ShardOff, BatchSize: 5}, "[[0 1 2 3 4]]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, names := newMemFiles(c.sizes, false)
			got := fmt.Sprint(drain(t, newFilePipe(t, names, m.open, c.cfg)))
			if got != c.want {
				t.Fatalf("batches %s, want %s", got, c.want)
			}
		})
	}
}

type failingSource struct{ n int }

func (f *failingSource) Next(ctx context.Context) (Example, error) {
	if f.n == 2 {
		return Example{}, errors.New("crc mismatch")
	}
	f.n++
	return Example{Features: []float32{1}}, nil
}

func TestFilePipelineErrors(t *testing.T) {
	m, names := newMemFiles([]int{1, 1}, false)
	if _, err := NewFilePipeline(context.Background(), names, m.open, Config{World: 3, Policy: ShardFile, BatchSize: 1}); err == nil ||
		!strings.Contains(err.Error(), "2 input files for 3 workers") {
		t.Fatalf("FILE with too few files: %v", err)
	}
	cases := []struct {
		name string
		open Opener
		want string
	}{
		{"open fails", func(ctx context.Context, p string) (Source, error) { return nil, errors.New("permission denied") },
			"opening a.rec: permission denied"},
		{"source fails", func(ctx context.Context, p string) (Source, error) { return &failingSource{}, nil },
			"a.rec: example 2: crc mismatch"},
		{"mixed widths", func(ctx context.Context, p string) (Source, error) {
			return &SliceSource{Examples: []Example{{Features: []float32{1, 2}}, {Features: []float32{1}}}}, nil
		}, "a.rec: example 1 has 1 dense features, earlier examples 2"},
		{"dense after sparse", func(ctx context.Context, p string) (Source, error) {
			return &SliceSource{Examples: []Example{{Indices: []int32{1}, Values: []float32{1}}, {Features: []float32{1}}}}, nil
		}, "a.rec: example 1 has 1 dense features, earlier examples 0"},
		{"unsorted sparse", func(ctx context.Context, p string) (Source, error) {
			return &SliceSource{Examples: []Example{{Indices: []int32{3, 1}, Values: []float32{1, 1}}}}, nil
		}, "a.rec: example 0: sparse example: index 1 at position 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newFilePipe(t, []string{"a.rec"}, c.open, Config{BatchSize: 4, Prefetch: 1})
			_, err := p.Next(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if _, err2 := p.Next(context.Background()); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("second Next = %v, want the same error", err2)
			}
		})
	}
}

func TestCollect(t *testing.T) {
	ctx := context.Background()
	ds, err := Collect(ctx, &SliceSource{Examples: []Example{{Features: []float32{1, 2}, Label: 1}, {Features: []float32{3, 4}}}})
	if err != nil || ds.Len() != 2 || ds.Dim() != 2 {
		t.Fatalf("dense Collect: %v, %v", ds, err)
	}
	ds, err = Collect(ctx, &SliceSource{Examples: []Example{{Indices: []int32{1, 4}, Values: []float32{1, 2}, Label: 1}, {}}})
	if err != nil || ds.Len() != 2 || ds.Dim() != 0 {
		t.Fatalf("sparse Collect: %v, %v", ds, err)
	}
	b := new(Batch)
	b.reset(0, 2, true)
	ds.Append(b, 0)
	ds.Append(b, 1)
	if fmt.Sprint(b.RowPtr, b.Indices, b.Labels) != "[0 2 2] [1 4] [1 0]" {
		t.Fatalf("collected CSR %v %v %v", b.RowPtr, b.Indices, b.Labels)
	}
	if _, err := Collect(ctx, &SliceSource{Examples: []Example{{Features: []float32{1}}, {Features: []float32{1, 2}}}}); err == nil ||
		!strings.Contains(err.Error(), "example 1 has 2 dense features") {
		t.Fatalf("mixed Collect: %v", err)
	}
}
