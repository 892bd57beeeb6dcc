package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/sparse"
)

// gatherStub is a Group whose AllGather returns fixed parts (rank 0's own
// frame is kept), to feed the exchange what a faulty peer might send.
type gatherStub struct {
	LocalGroup
	size  int
	other []byte
}

func (g gatherStub) Size() int { return g.size }
func (g gatherStub) AllGather(_ context.Context, local []byte) ([][]byte, error) {
	return [][]byte{local, g.other}, nil
}

func (g gatherStub) GatherRing(ctx context.Context, local []byte) ([][]byte, error) {
	return g.AllGather(ctx, local)
}

// TestSparseExchangeRejectsBadParts: a malformed gradient from a peer is
// an error naming that peer, never a silent merge.
func TestSparseExchangeRejectsBadParts(t *testing.T) {
	const dim = 100
	good := func(examples uint64, v sparse.Vector) []byte {
		return sparse.AppendVector(binary.AppendUvarint(nil, examples), v)
	}
	nan := good(3, sparse.Vector{Indices: []int32{4}, Values: []float32{1}})
	binary.LittleEndian.PutUint32(nan[len(nan)-4:], math.Float32bits(float32(math.NaN())))
	for _, tc := range []struct {
		name  string
		other []byte
		want  string
	}{
		{"empty frame", nil, "bad example count"},
		{"index out of range", good(2, sparse.Vector{Indices: []int32{3, 200}, Values: []float32{1, 2}}), "leaves [0, 100)"},
		{"NaN value", nan, "not finite"},
		{"trailing bytes", append(good(1, sparse.Vector{Indices: []int32{1}, Values: []float32{1}}), 0), "trailing bytes"},
		{"truncated", good(1, sparse.Vector{Indices: []int32{1}, Values: []float32{1}})[:4], "only 2 bytes follow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := NewExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			var merged sparse.Vector
			local := sparse.Vector{Indices: []int32{1, 2}, Values: []float32{0.5, -1}}
			_, _, err = x.Exchange(context.Background(), gatherStub{size: 2, other: tc.other}, 1, local, 4, &merged)
			if err == nil || !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming rank 1 and %q", err, tc.want)
			}
		})
	}
	// And a good part merges: (0.5 + 0) / 7 at 1, (-1 + 3) / 7 at 2, 1/7 at 9.
	x, err := NewExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	stub := gatherStub{size: 2, other: good(3, sparse.Vector{Indices: []int32{2, 9}, Values: []float32{3, 1}})}
	var merged sparse.Vector
	n, mode, err := x.Exchange(context.Background(), stub, 1, sparse.Vector{Indices: []int32{1, 2}, Values: []float32{0.5, -1}}, 4, &merged)
	if err != nil || n != 7 || mode != sparse.ExchangeSparse {
		t.Fatalf("exchange: %d examples, mode %v, %v", n, mode, err)
	}
	want := sparse.Vector{Indices: []int32{1, 2, 9}, Values: []float32{float32(0.5 / 7.0), float32(2 / 7.0), float32(1 / 7.0)}}
	if !slices.Equal(merged.Indices, want.Indices) || !slices.Equal(merged.Values, want.Values) {
		t.Fatalf("merged %+v, want %+v", merged, want)
	}
}

// reduceStub is a two-replica Group whose all-reduce adds the other
// replica's dense gradient sum (other, example count 3) to the buffer; with
// fail set it fails half-way, as a broken link would, leaving garbage in
// the buffer.
type reduceStub struct {
	gatherStub
	other sparse.Vector
	fail  bool
}

func (g *reduceStub) AllReduceSum(_ context.Context, buf []float32) error {
	if g.fail {
		for i := range buf[:len(buf)/2] {
			buf[i] = 42
		}
		return errors.New("link cut")
	}
	dim := len(buf) - 2
	g.other.AddScaledTo(buf[:dim], 1)
	buf[dim] += 3
	buf[dim+1] += float32(g.other.Len())
	return nil
}

// TestDenseExchangeReusesBuffer: the dense exchange's buffer is never
// cleared whole after a good step (DrainDense zeroes what it found), so
// each step's merged gradient must hold only that step's features; after a
// step that failed half-way, the next one clears it whole and is exact.
func TestDenseExchangeReusesBuffer(t *testing.T) {
	const dim = 100
	g := &reduceStub{gatherStub: gatherStub{size: 2}}
	x, err := NewExchanger(0, 2, sparse.ExchangeDense, "", dim, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(x.dense) != dim+2 {
		t.Fatalf("dense buffer of %d floats at start-up, want %d (its page faults belong there)", len(x.dense), dim+2)
	}
	steps := []struct {
		local, other sparse.Vector
		fail         bool
		want         sparse.Vector // the mean over 4 + 3 examples
	}{
		{sparse.Vector{Indices: []int32{1, 50}, Values: []float32{0.5, 7}}, sparse.Vector{Indices: []int32{50, 99}, Values: []float32{-7, 1}}, false,
			sparse.Vector{Indices: []int32{1, 99}, Values: []float32{float32(0.5 / 7.0), float32(1 / 7.0)}}},
		{sparse.Vector{Indices: []int32{2}, Values: []float32{1}}, sparse.Vector{Indices: []int32{3}, Values: []float32{2}}, false,
			sparse.Vector{Indices: []int32{2, 3}, Values: []float32{float32(1 / 7.0), float32(2 / 7.0)}}},
		{sparse.Vector{Indices: []int32{4}, Values: []float32{1}}, sparse.Vector{}, true, sparse.Vector{}},
		{sparse.Vector{Indices: []int32{60}, Values: []float32{-1}}, sparse.Vector{Indices: []int32{5}, Values: []float32{7}}, false,
			sparse.Vector{Indices: []int32{5, 60}, Values: []float32{1, float32(-1 / 7.0)}}},
	}
	for i, st := range steps {
		g.other, g.fail = st.other, st.fail
		var merged sparse.Vector
		n, _, err := x.Exchange(context.Background(), g, i+1, st.local, 4, &merged)
		if st.fail {
			if err == nil || !strings.Contains(err.Error(), "dense all-reduce") {
				t.Fatalf("step %d: %v, want the all-reduce's error", i+1, err)
			}
			continue
		}
		if err != nil || n != 7 {
			t.Fatalf("step %d: %d examples, %v", i+1, n, err)
		}
		if !slices.Equal(merged.Indices, st.want.Indices) || !slices.Equal(merged.Values, st.want.Values) {
			t.Fatalf("step %d: merged %+v, want %+v", i+1, merged, st.want)
		}
	}
}

// TestSparseExchangeAlone: one replica's shortcut gives exactly what
// MergeGradients of its one part gives.
func TestSparseExchangeAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var local sparse.Vector
	for i := int32(0); i < 1000; i += 1 + int32(rng.IntN(5)) {
		local.Indices = append(local.Indices, i)
		local.Values = append(local.Values, float32(rng.NormFloat64()))
	}
	x, err := NewExchanger(0, 1, sparse.ExchangeAuto, "", 1000, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var got, want sparse.Vector
	n, mode, err := x.Exchange(context.Background(), LocalGroup{}, 1, local, 7, &got)
	if err != nil || n != 7 || mode != sparse.ExchangeSparse {
		t.Fatalf("%d examples, mode %v, %v", n, mode, err)
	}
	var c sparse.Coalescer
	if err := c.MergeGradients(&want, []sparse.Vector{local}, 1000, 7); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Indices, want.Indices) || !slices.Equal(got.Values, want.Values) {
		t.Fatal("one replica's merged gradient differs from MergeGradients'")
	}
}

// TestSparseExchangeChecksGroup: the exchanger is built for one rank of
// a world and combines over the Group each step is given; a Group of
// another size or rank is an error naming both, not a wrong merge.
func TestSparseExchangeChecksGroup(t *testing.T) {
	x, err := NewExchanger(0, 2, sparse.ExchangeSparse, GatherDirect, 10, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var merged sparse.Vector
	local := sparse.Vector{Indices: []int32{1}, Values: []float32{1}}
	_, _, err = x.Exchange(context.Background(), LocalGroup{}, 1, local, 1, &merged)
	if err == nil || !strings.Contains(err.Error(), "exchange over rank 0 of 1, but the replica was built as rank 0 of 2") {
		t.Fatalf("exchange over a one-replica group: %v", err)
	}
	// The right group still works afterwards.
	n, _, err := x.Exchange(context.Background(), gatherStub{size: 2, other: sparse.AppendVector(binary.AppendUvarint(nil, 0), sparse.Vector{})}, 2, local, 1, &merged)
	if err != nil || n != 1 || !slices.Equal(merged.Indices, []int32{1}) {
		t.Fatalf("exchange over its group: %d examples, %+v, %v", n, merged, err)
	}
}

// FuzzSparseExchangeFrame: whatever bytes a peer sends as its gradient
// frame, the exchange either fails naming the peer or merges a valid
// gradient (indices in range, strictly increasing, finite values); it
// never panics.
func FuzzSparseExchangeFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(sparse.AppendVector(binary.AppendUvarint(nil, 3), sparse.Vector{Indices: []int32{2, 9}, Values: []float32{3, 1}}))
	f.Add(sparse.AppendVector(binary.AppendUvarint(nil, 0), sparse.Vector{}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		const dim = 64
		x, err := NewExchanger(0, 2, sparse.ExchangeSparse, GatherRing, dim, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		var merged sparse.Vector
		local := sparse.Vector{Indices: []int32{1, 63}, Values: []float32{0.5, -1}}
		n, _, err := x.Exchange(context.Background(), gatherStub{size: 2, other: frame}, 1, local, 2, &merged)
		if err != nil {
			if !strings.Contains(err.Error(), "rank 1") {
				t.Fatalf("error %v does not name the peer", err)
			}
			return
		}
		if n < 2 {
			t.Fatalf("%d examples merged, at least our own 2 expected", n)
		}
		if err := merged.Validate(dim); err != nil {
			t.Fatalf("merged an invalid gradient: %v", err)
		}
	})
}
