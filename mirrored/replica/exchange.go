package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/sparse"
)

// Sparse all-gather algorithms (SparseConfig.Gather).
const (
	// GatherDirect sends each replica's gradient straight to every other
	// replica and receives theirs (collective.Comm.AllGatherDirect): one
	// one-way latency per step whatever the number of replicas, the same
	// bytes per replica as a ring ((N-1) × own gradient).
	GatherDirect = "direct"
	// GatherRing is collective.Comm.AllGatherV: a ring pass of
	// the lengths, then a ring pass of the data, 2(N-1) latencies per step.
	GatherRing = "ring"
)

// RingGatherer is implemented by Groups that can all-gather byte strings
// around a ring (collective.Comm.AllGatherV) besides their own AllGather
// (the direct one); a wrapped Group implements it to allow GatherRing.
type RingGatherer interface {
	GatherRing(ctx context.Context, local []byte) ([][]byte, error)
}

var (
	_ RingGatherer = (*commGroup)(nil)
	_ RingGatherer = LocalGroup{}
)

func (g *commGroup) GatherRing(ctx context.Context, local []byte) ([][]byte, error) {
	return g.c.AllGatherV(ctx, local)
}

func (LocalGroup) GatherRing(ctx context.Context, local []byte) ([][]byte, error) {
	return [][]byte{local}, ctx.Err()
}

// Exchanger combines the replicas' gradient sums each step, sparse or dense
// (see mirrored's sparseBuilder), and keeps the figures that decide the next step's mode.
type Exchanger struct {
	g            Group // the step's, given to exchange
	ring         bool  // the sparse all-gather goes around a ring (GatherRing)
	mode         sparse.Exchange
	dim, world   int
	rank         int
	log          *zap.Logger
	frame        []byte
	gathered     [][]byte
	payloads     [][]byte      // the gathered frames after their example counts
	part         sparse.Vector // a decoded part (steps without examples)
	dense        []float32     // dim + 2: the gradient sum, then examples and nnz
	denseDirty   bool          // dense[:dim] may hold non-zero entries: clear it before use
	coal         sparse.Coalescer
	last         sparse.Exchange // mode of the previous step
	nnzMean      float64         // mean gradient pairs per replica, previous step
	bytesPerPair float64         // measured wire bytes per pair, last sparse step
	steps        [3]int          // steps run in each mode, indexed by sparse.Exchange
	wire         half.Format     // the dense exchange's format (UseDenseWire)
}

// UseDenseWire makes the dense exchange send the gradient sum in f
// (Comm.AllReduceFloat32Half; bf16 or fp16, the Group must be a
// HalfReducer), its example and pair counts still in float32, exact;
// auto then counts a dense step's bytes at 2 a value. The sparse
// all-gather is unchanged: its values are few and carry their indices.
func (r *Sparse) UseDenseWire(f half.Format) {
	if r.xch != nil {
		r.xch.wire = f
	}
}

// NewExchanger is the exchange of rank of world's gradient sums over dim
// features, in mode (sparse.ExchangeAuto: chosen each step) with the
// sparse all-gather gather (GatherDirect or GatherRing); log records the
// changes of mode.
func NewExchanger(rank, world int, mode sparse.Exchange, gather string, dim int, log *zap.Logger) (*Exchanger, error) {
	x := &Exchanger{mode: mode, dim: dim, world: world, rank: rank, log: log,
		bytesPerPair: sparse.RawPairBytes, last: -1}
	switch gather {
	case GatherDirect, "":
	case GatherRing:
		x.ring = true
	default:
		return nil, fmt.Errorf("sparse gather %q: want %s or %s", gather, GatherDirect, GatherRing)
	}
	if mode == sparse.ExchangeDense {
		// Now, with its pages faulted in, rather than in the first step;
		// under auto, when a step first goes dense.
		x.dense = faultedIn(dim + 2)
	}
	return x, nil
}

// gather is the sparse all-gather over the step's group: its own
// AllGather (direct), or around a ring.
func (x *Exchanger) gather(ctx context.Context, local []byte) ([][]byte, error) {
	if !x.ring {
		return x.g.AllGather(ctx, local)
	}
	gr, ok := x.g.(RingGatherer)
	if !ok {
		return nil, fmt.Errorf("sparse gather %s: this group (%T) has no ring all-gather: use %s", GatherRing, x.g, GatherDirect)
	}
	return gr.GatherRing(ctx, local)
}

// faultedIn returns a zeroed []float32 of length n with every page already
// faulted in: the first write to each 4 KB page of a fresh buffer costs
// time that belongs to start-up, not to the first step. (Huge-page advice,
// as the model's weights get, made the allocation slower, for no gain on a
// buffer that is only streamed.) Figures: BENCHMARKS.md, "Figures behind
// the code": faulting in the dense buffer.
func faultedIn(n int) []float32 {
	s := make([]float32, n)
	for i := 0; i < n; i += 1024 {
		s[i] = 0
	}
	return s
}

// allReduceDense sums x.dense over the group: whole in float32, or the
// gradient in x.wire and then the two counts in float32.
func (x *Exchanger) allReduceDense(ctx context.Context) error {
	if !x.wire.Half() {
		return x.g.AllReduceSum(ctx, x.dense)
	}
	hr, ok := x.g.(HalfReducer)
	if !ok {
		return fmt.Errorf("this group cannot send %s frames (%T): use --wire fp32", x.wire, x.g)
	}
	if err := hr.AllReduceSumHalf(ctx, x.dense, 0, x.dim, x.wire); err != nil {
		return err
	}
	return x.g.AllReduceSum(ctx, x.dense[x.dim:])
}

// choose resolves the mode of the next step from figures every replica
// holds identically (the previous step's exchange), so all replicas pick
// the same mode without another round trip. The first step of an auto run
// is sparse.
func (x *Exchanger) choose() sparse.Exchange {
	if x.mode != sparse.ExchangeAuto {
		return x.mode
	}
	if x.last < 0 {
		return sparse.ExchangeSparse
	}
	perPair := x.bytesPerPair
	if x.wire.Half() {
		perPair *= 2 // dense values cost half: as if sparse pairs cost double
	}
	return sparse.ChooseExchange(sparse.ExchangeAuto, int(math.Ceil(x.nnzMean)), x.dim, x.world, perPair)
}

// Exchange combines this replica's gradient sum over its examples with
// everyone else's over g (the step's group) and writes the mean gradient of the union batch into
// merged. It returns the number of examples behind it (0: nobody had any,
// and merged is empty) and the mode used.
func (x *Exchanger) Exchange(ctx context.Context, g Group, step int, local sparse.Vector, examples int, merged *sparse.Vector) (int, sparse.Exchange, error) {
	if g.Size() != x.world || g.Rank() != x.rank {
		return 0, 0, fmt.Errorf("exchange over rank %d of %d, but the replica was built as rank %d of %d", g.Rank(), g.Size(), x.rank, x.world)
	}
	x.g = g
	defer func() { x.g = nil }()
	mode := x.choose()
	if mode != x.last && x.last >= 0 {
		x.log.Info("exchange mode changed", zap.Int("step", step), zap.Stringer("from", x.last), zap.Stringer("to", mode),
			zap.Float64("nnz_per_replica", x.nnzMean), zap.Float64("bytes_per_pair", x.bytesPerPair),
			zap.Float64("sparse_bytes_est", sparse.SparseExchangeBytes(int(x.nnzMean), x.world, x.bytesPerPair)),
			zap.Float64("dense_bytes", sparse.DenseExchangeBytes(x.dim, x.world)))
	}
	x.last = mode
	x.steps[mode]++
	if mode == sparse.ExchangeDense {
		total, err := x.exchangeDense(ctx, local, examples, merged)
		return total, mode, err
	}
	total, err := x.exchangeSparse(ctx, local, examples, merged)
	return total, mode, err
}

// exchangeSparse all-gathers every replica's frame, [uvarint examples]
// [wire vector], and merges the parts in rank order
// (Coalescer.MergeEncoded).
func (x *Exchanger) exchangeSparse(ctx context.Context, local sparse.Vector, examples int, merged *sparse.Vector) (int, error) {
	if x.world == 1 {
		// Alone: no bytes to move; the mean is what MergeGradients of the
		// one part gives (float64 scale, one rounding), without its copies.
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		x.nnzMean = float64(local.Len())
		merged.Indices = append(merged.Indices[:0], local.Indices...)
		merged.Values = merged.Values[:0]
		if examples == 0 {
			merged.Indices = merged.Indices[:0]
			return 0, nil
		}
		scale := 1 / float64(examples)
		for _, v := range local.Values {
			merged.Values = append(merged.Values, float32(float64(v)*scale))
		}
		return examples, nil
	}
	x.frame = binary.AppendUvarint(x.frame[:0], uint64(examples))
	x.frame = sparse.AppendVector(x.frame, local)
	var err error
	if x.gathered, err = x.gather(ctx, x.frame); err != nil {
		return 0, fmt.Errorf("sparse all-gather of the gradients: %w", err)
	}
	if len(x.gathered) != x.world {
		return 0, fmt.Errorf("sparse all-gather returned %d parts for %d replicas", len(x.gathered), x.world)
	}
	total, bytes := 0, 0
	x.payloads = x.payloads[:0]
	for r, b := range x.gathered {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > math.MaxInt32 {
			return 0, fmt.Errorf("gradient from rank %d: bad example count header", r)
		}
		x.payloads = append(x.payloads, b[k:])
		total += int(n)
		bytes += len(b)
	}
	if total == 0 {
		// Nobody had examples: nothing to merge, but every part must
		// still be a valid (empty) vector.
		pairs := 0
		for r, p := range x.payloads {
			if r == x.rank {
				continue
			}
			if err := sparse.DecodeVector(&x.part, p, x.dim); err != nil {
				return 0, fmt.Errorf("gradient from rank %d: %w", r, err)
			}
			pairs += x.part.Len()
		}
		x.nnzMean = float64(pairs+local.Len()) / float64(x.world)
		merged.Indices, merged.Values = merged.Indices[:0], merged.Values[:0]
		return 0, nil
	}
	// Each peer's bytes are decoded straight into the merge; our own part
	// is local itself (our bytes decode to exactly it).
	pairs, err := x.coal.MergeEncoded(merged, x.payloads, x.rank, local, x.dim, total)
	if err != nil {
		return 0, err
	}
	x.nnzMean = float64(pairs) / float64(x.world)
	if pairs > 0 {
		x.bytesPerPair = float64(bytes) / float64(pairs)
	}
	return total, nil
}

// exchangeDense all-reduces the full gradient sum (with the example and
// pair counts in two extra slots) and turns it back into a sparse update:
// O(D) per step, the cost this mode exists to show, but one pass rather
// than two: sparse.DrainDense reads the sum once and zeroes only the
// entries it found, so the buffer is clear for the next step without a
// 135 MB clear. A step that ends any other way (an error, or no examples
// anywhere) leaves it dirty, and the next one clears it whole.
func (x *Exchanger) exchangeDense(ctx context.Context, local sparse.Vector, examples int, merged *sparse.Vector) (int, error) {
	if x.dense == nil {
		x.dense = faultedIn(x.dim + 2)
	} else if x.denseDirty {
		clear(x.dense)
	}
	x.denseDirty = true
	local.AddScaledTo(x.dense[:x.dim], 1)
	x.dense[x.dim], x.dense[x.dim+1] = float32(examples), float32(local.Len())
	if err := x.allReduceDense(ctx); err != nil {
		return 0, fmt.Errorf("dense all-reduce of the gradients: %w", err)
	}
	total := int(x.dense[x.dim])
	x.nnzMean = float64(x.dense[x.dim+1]) / float64(x.world)
	if total == 0 {
		merged.Indices, merged.Values = merged.Indices[:0], merged.Values[:0]
		return 0, nil
	}
	if err := sparse.DrainDense(merged, x.dense[:x.dim], total); err != nil {
		return 0, err
	}
	x.denseDirty = false
	return total, nil
}
