package mirrored

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/sparse"
)

// Sparse all-gather algorithms (SparseConfig.Gather).
const (
	// GatherDirect sends each replica's gradient straight to every other
	// replica as one point-to-point message and receives theirs: one
	// one-way latency per step whatever the number of replicas, the same
	// bytes per replica as a ring ((N-1) × own gradient).
	GatherDirect = "direct"
	// GatherRing is Group.AllGather (collective.AllGatherV): a ring pass of
	// the lengths, then a ring pass of the data, 2(N-1) latencies per step.
	GatherRing = "ring"
)

// directGatherer is implemented by Groups that can exchange one small
// message with every other replica in a single round. tag identifies the
// step, so that replicas out of step fail with a mismatch instead of
// merging the wrong gradients.
type directGatherer interface {
	gatherDirect(ctx context.Context, tag uint32, local []byte, out [][]byte) ([][]byte, error)
}

var (
	_ directGatherer = (*commGroup)(nil)
	_ directGatherer = LocalGroup{}
)

// inlineSendBytes is the largest message gatherDirect sends before
// receiving, on the caller's goroutine: the links' readers queue up to
// several frames, so small sends complete without the peer reading, and
// skipping a goroutine per step matters at thousands of steps per second.
const inlineSendBytes = 256 << 10

func (g *commGroup) gatherDirect(ctx context.Context, tag uint32, local []byte, out [][]byte) ([][]byte, error) {
	c := g.c
	n, rank := c.Size(), c.Rank()
	out = append(out[:0], make([][]byte, n)...)
	out[rank] = local
	if n == 1 {
		return out, ctx.Err()
	}
	// Point-to-point receives ignore aborts (they serve gossip); a peer's
	// failure must still stop this wait at once.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.Transport().Failed(), cancel)
	defer stop()

	var sendErr error
	var wg sync.WaitGroup
	sendAll := func() {
		for k := 1; k < n; k++ {
			to := (rank + k) % n
			if err := c.Send(ctx, to, tag, local); err != nil {
				sendErr = err
				cancel()
				return
			}
		}
	}
	if len(local) <= inlineSendBytes {
		sendAll()
	} else {
		wg.Add(1)
		go func() { defer wg.Done(); sendAll() }()
	}
	var recvErr error
	if sendErr == nil {
		// Receive in the order the others send to us (rank-k sends to us
		// k-th), so that every peer is read as soon as it can be.
		for k := 1; k < n; k++ {
			from := (rank - k + n) % n
			b, err := c.Recv(ctx, from, tag)
			if err != nil {
				recvErr = err
				cancel()
				break
			}
			out[from] = b
		}
	}
	wg.Wait()
	if sendErr != nil && errors.Is(recvErr, context.Canceled) {
		recvErr = nil // our own cancel after the send failed
	}
	if err := errors.Join(sendErr, recvErr); err != nil {
		if f := c.Transport().Failure(); f != nil {
			err = fmt.Errorf("%w (after %w)", err, f)
		}
		return nil, err
	}
	return out, nil
}

func (LocalGroup) gatherDirect(ctx context.Context, _ uint32, local []byte, out [][]byte) ([][]byte, error) {
	return append(out[:0], local), ctx.Err()
}

// exchanger combines the replicas' gradient sums each step, sparse or dense
// (see SparseJob), and keeps the figures that decide the next step's mode.
type exchanger struct {
	g            Group
	direct       directGatherer // nil: use g.AllGather
	mode         sparse.Exchange
	dim, world   int
	rank         int
	log          *zap.Logger
	frame        []byte
	gathered     [][]byte
	parts        []sparse.Vector
	dense        []float32 // dim + 2: the gradient sum, then examples and nnz
	coal         sparse.Coalescer
	last         sparse.Exchange // mode of the previous step
	nnzMean      float64         // mean gradient pairs per replica, previous step
	bytesPerPair float64         // measured wire bytes per pair, last sparse step
	steps        [3]int          // steps run in each mode, indexed by sparse.Exchange
	seq          uint32
}

func newExchanger(g Group, mode sparse.Exchange, gather string, dim int, log *zap.Logger) (*exchanger, error) {
	x := &exchanger{g: g, mode: mode, dim: dim, world: g.Size(), rank: g.Rank(), log: log,
		bytesPerPair: sparse.RawPairBytes, last: -1}
	switch gather {
	case GatherDirect, "":
		d, ok := g.(directGatherer)
		if !ok {
			return nil, fmt.Errorf("sparse gather %q: this group has no point-to-point messages; use %q", GatherDirect, GatherRing)
		}
		x.direct = d
	case GatherRing:
	default:
		return nil, fmt.Errorf("sparse gather %q: want %s or %s", gather, GatherDirect, GatherRing)
	}
	x.parts = make([]sparse.Vector, x.world)
	return x, nil
}

// choose resolves the mode of the next step from figures every replica
// holds identically (the previous step's exchange), so all replicas pick
// the same mode without another round trip. The first step of an auto run
// is sparse.
func (x *exchanger) choose() sparse.Exchange {
	if x.mode != sparse.ExchangeAuto {
		return x.mode
	}
	if x.last < 0 {
		return sparse.ExchangeSparse
	}
	return sparse.ChooseExchange(sparse.ExchangeAuto, int(math.Ceil(x.nnzMean)), x.dim, x.world, x.bytesPerPair)
}

// exchange combines this replica's gradient sum over its examples with
// everyone else's and writes the mean gradient of the union batch into
// merged. It returns the number of examples behind it (0: nobody had any,
// and merged is empty) and the mode used.
func (x *exchanger) exchange(ctx context.Context, step int, local sparse.Vector, examples int, merged *sparse.Vector) (int, sparse.Exchange, error) {
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
// [wire vector], and merges the parts in rank order.
func (x *exchanger) exchangeSparse(ctx context.Context, local sparse.Vector, examples int, merged *sparse.Vector) (int, error) {
	x.frame = binary.AppendUvarint(x.frame[:0], uint64(examples))
	x.frame = sparse.AppendVector(x.frame, local)
	x.seq++
	var err error
	if x.direct != nil {
		x.gathered, err = x.direct.gatherDirect(ctx, x.seq, x.frame, x.gathered)
	} else {
		x.gathered, err = x.g.AllGather(ctx, x.frame)
	}
	if err != nil {
		return 0, fmt.Errorf("sparse all-gather of the gradients: %w", err)
	}
	if len(x.gathered) != x.world {
		return 0, fmt.Errorf("sparse all-gather returned %d parts for %d replicas", len(x.gathered), x.world)
	}
	total, pairs, bytes := 0, 0, 0
	for r, b := range x.gathered {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > math.MaxInt32 {
			return 0, fmt.Errorf("gradient from rank %d: bad example count header", r)
		}
		if r == x.rank {
			pairs += local.Len() // our own bytes decode to exactly local
		} else {
			if err := sparse.DecodeVector(&x.parts[r], b[k:], x.dim); err != nil {
				return 0, fmt.Errorf("gradient from rank %d: %w", r, err)
			}
			pairs += x.parts[r].Len()
		}
		total += int(n)
		bytes += len(b)
	}
	x.nnzMean = float64(pairs) / float64(x.world)
	if pairs > 0 {
		x.bytesPerPair = float64(bytes) / float64(pairs)
	}
	if total == 0 {
		merged.Indices, merged.Values = merged.Indices[:0], merged.Values[:0]
		return 0, nil
	}
	x.parts[x.rank] = local
	err = x.coal.MergeGradients(merged, x.parts, x.dim, total)
	x.parts[x.rank] = sparse.Vector{} // do not keep a view of the caller's buffer
	return total, err
}

// exchangeDense all-reduces the full gradient sum (with the example and
// pair counts in two extra slots) and turns it back into a sparse update:
// O(D) per step, the cost this mode exists to show.
func (x *exchanger) exchangeDense(ctx context.Context, local sparse.Vector, examples int, merged *sparse.Vector) (int, error) {
	if x.dense == nil {
		x.dense = make([]float32, x.dim+2)
	} else {
		clear(x.dense)
	}
	local.AddScaledTo(x.dense[:x.dim], 1)
	x.dense[x.dim], x.dense[x.dim+1] = float32(examples), float32(local.Len())
	if err := x.g.AllReduceSum(ctx, x.dense); err != nil {
		return 0, fmt.Errorf("dense all-reduce of the gradients: %w", err)
	}
	total := int(x.dense[x.dim])
	x.nnzMean = float64(x.dense[x.dim+1]) / float64(x.world)
	if total == 0 {
		merged.Indices, merged.Values = merged.Indices[:0], merged.Values[:0]
		return 0, nil
	}
	return total, sparse.DenseToGradient(merged, x.dense[:x.dim], total)
}
