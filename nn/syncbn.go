package nn

import (
	"errors"
	"math"
	"strings"

	"github.com/meshtrain/meshtrain/nn/statsync"
)

// StatsReducer sums synchronized batch normalization's statistics across
// the replicas of a data-parallel run (see BatchNormSyncer): the engine's
// group behind a seam nn defines, since nn knows nothing of collectives.
type StatsReducer = statsync.Reducer

// BatchNormSyncer is a model whose BatchNormalization layers can
// normalise over the global batch, as PyTorch's SyncBatchNorm and
// Horovod's SyncBatchNormalization do. Sequential and Graph are.
type BatchNormSyncer interface {
	// SyncBatchNorm makes every later training pass (ForwardBackward)
	// normalise each BatchNormalization over the batches of all the
	// model's shards and of every replica r reaches: the per-channel
	// example count, sum and sum of squares are summed inside the forward
	// pass, and the sums of dy and dy·x̂ inside the backward pass (what
	// makes the gradient that of the global batch's normalisation; γ's
	// and β's gradients stay this replica's part, which the gradient
	// exchange sums). The moving statistics follow the global batch's
	// mean and biased variance. Every replica must then call
	// ForwardBackward at every step, with no examples (n = 0: no loss, a
	// zero gradient) when it has none. It fails for a model with no
	// BatchNormalization. A failed reduction is ForwardBackward's error.
	SyncBatchNorm(r StatsReducer) error
}

var (
	_ BatchNormSyncer = (*Graph)(nil)
	_ BatchNormSyncer = (*Sequential)(nil)
)

// SyncBatchNorm implements BatchNormSyncer.
func (g *Graph) SyncBatchNorm(r StatsReducer) error {
	p, err := g.bufs.syncBatchNorm(g.name, r)
	if err == nil {
		g.sync = p
	}
	return err
}

// SyncBatchNorm implements BatchNormSyncer.
func (m *Sequential) SyncBatchNorm(r StatsReducer) error {
	p, err := m.bufs.syncBatchNorm(m.name, r)
	if err != nil {
		return err
	}
	m.sync = p
	for _, s := range m.shards {
		s.syncing = true
	}
	return nil
}

// bnSync is one shard's copy of a synchronized batch normalization: where
// its statistics meet the other shards' and replicas'.
type bnSync struct {
	point *statsync.Point
	part  int       // the shard
	what  string    // the layer, for errors
	buf   []float64 // this shard's statistics
}

// syncBatchNorm points every shard's copy of the model's batch
// normalizations at one meeting of the shards, reducing with r.
func (s *bufferSet) syncBatchNorm(name string, r StatsReducer) (*statsync.Point, error) {
	if r == nil {
		return nil, errors.New("nn: " + name + ": synchronized batch normalization without a reducer")
	}
	var p *statsync.Point
	for i, group := range s.groups {
		if _, ok := group[0].(*batchNorm); !ok {
			continue
		}
		if p == nil {
			p = statsync.New(len(group), r)
		}
		what := "batch normalization " + strings.TrimSuffix(s.prefixes[i], ".")
		for j, b := range group {
			l := b.(*batchNorm)
			l.sy = &bnSync{point: p, part: j, what: what, buf: make([]float64, 1+2*l.C)}
		}
	}
	if p == nil {
		return nil, errors.New("nn: " + name + ": synchronized batch normalization on a model with no BatchNormalization: there are no statistics to synchronize")
	}
	return p, nil
}

// syncTrain is a synchronized training pass's Forward: the shard's count,
// and per channel Σ(x−K) and Σ(x−K)² about the moving mean K, summed
// over the shards and replicas; then the global mean and biased variance
// normalise. K is the same on every shard (one buffer) and replica (whose
// buffers are the same bits, which the replicas compare), and near the
// batch's mean, so the float64 sums lose little to cancellation; one
// meeting, where a mean first would take two.
func (l *batchNorm) syncTrain(y, x []float32, n int) {
	sy, C := l.sy, l.C
	buf := sy.buf
	buf[0] = float64(n * l.Plane)
	for c := 0; c < C; c++ {
		k := float64(l.mean[c])
		var s1, s2 float64
		for e := 0; e < n; e++ {
			o := (e*C + c) * l.Plane
			s1 += bnSum(x[o : o+l.Plane])
			s2 += bnSqDev(x[o:o+l.Plane], k)
		}
		buf[1+c], buf[1+C+c] = s1-buf[0]*k, s2
	}
	sum, err := sy.point.Meet(sy.part, buf, sy.what)
	l.cnt = 0
	if err != nil || sum[0] == 0 {
		return // the pass fails (Err), or no replica has examples
	}
	m := sum[0]
	l.cnt = int(m)
	for c := 0; c < C; c++ {
		d := sum[1+c] / m
		mean, vr := float64(l.mean[c])+d, max(sum[1+C+c]/m-d*d, 0)
		l.bmean[c], l.bvar[c] = mean, vr
		inv := 1 / math.Sqrt(vr+l.Eps)
		l.invstd[c] = inv
		a, b, mean32 := float32(l.g(c)*inv), float32(l.b(c)), float32(mean)
		for e := 0; e < n; e++ {
			o := (e*C + c) * l.Plane
			bnAffine(y[o:o+l.Plane], x[o:o+l.Plane], mean32, a, b)
		}
	}
}

// syncBackward is a synchronized training pass's Backward: γ's and β's
// gradients from this shard's examples, and the input's through the
// global batch's statistics, with Σdy and Σdy·(x−μ) summed over the
// shards and replicas.
func (l *batchNorm) syncBackward(dx, dy, x []float32, n int) {
	sy, C := l.sy, l.C
	buf := sy.buf[:2*C]
	for c := 0; c < C; c++ {
		var sdy, sdyx float64
		for e := 0; e < n; e++ {
			o := (e*C + c) * l.Plane
			s, sx := bnBwdSums(dy[o:o+l.Plane], x[o:o+l.Plane], l.bmean[c])
			sdy += s
			sdyx += sx
		}
		if l.dgamma != nil {
			l.dgamma[c] += float32(sdyx * l.invstd[c])
		}
		if l.dbeta != nil {
			l.dbeta[c] += float32(sdy)
		}
		buf[c], buf[C+c] = sdy, sdyx
	}
	sum, err := sy.point.Meet(sy.part, buf, sy.what)
	if err != nil || l.cnt == 0 || dx == nil {
		return
	}
	m := float64(l.cnt)
	for c := 0; c < C; c++ {
		inv := l.invstd[c]
		k := l.g(c) * inv
		bx, cx := -k*inv*inv*sum[C+c]/m, -k*sum[c]/m
		a, b, cc, mean32 := float32(k), float32(bx), float32(cx), float32(l.bmean[c])
		for e := 0; e < n; e++ {
			o := (e*C + c) * l.Plane
			bnBwdDx(dx[o:o+l.Plane], dy[o:o+l.Plane], x[o:o+l.Plane], mean32, a, b, cc)
		}
	}
}

// syncIdle is a shard's part in a synchronized training pass when it has
// no examples: it meets the others at every batch normalization, forward
// in layer order and backward in reverse, with nothing to add; done(i),
// if set, is told that layer i's backward pass is over for i ≥ from (see
// shard.run).
func syncIdle(layers []layer, done func(i int), from int) {
	for _, l := range layers {
		if b, ok := l.(*batchNorm); ok && b.sy != nil {
			b.syncTrain(nil, nil, 0)
		}
	}
	for i := len(layers) - 1; i >= 0; i-- {
		if b, ok := layers[i].(*batchNorm); ok && b.sy != nil {
			b.syncBackward(nil, nil, nil, 0)
		}
		if done != nil && i >= from {
			done(i)
		}
	}
}
