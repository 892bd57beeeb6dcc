// Package statsync is where synchronized batch normalization's partial
// statistics meet: the parts (batch shards) of one replica's pass at a
// Point, which sums them in part order and hands the sum to a Reducer
// that sums it across the replicas, as PyTorch's SyncBatchNorm and
// Horovod's SyncBatchNormalization all-reduce theirs inside the forward
// and backward passes.
//
// Every sum is in float64 and in a fixed order (parts in part order,
// then replicas in rank order), so every part of every replica gets the
// same bits and the replicas stay identical without a broadcast.
//
// Invariants: a Point serves one pass at a time; every part calls Meet
// the same number of times with vectors of the same length, in the same
// order (the layers in the pass's order). A failure is sticky until
// Reset: the meetings after it only sum the parts, so that no part waits
// for a reduction that cannot come, and the pass reports it (Err).
package statsync

import (
	"fmt"
	"sync"
)

// Reducer sums a vector of statistics across the replicas of a
// data-parallel run: on return every replica's stats hold the
// element-wise sum of every replica's, the same bits on each. Every
// replica calls it the same number of times with the same length. Its
// wait has a deadline, and its error names the replicas it waited for.
type Reducer interface {
	SumStats(stats []float64) error
}

// Point is the meeting of a replica's n batch parts. The last part to
// arrive sums the parts' vectors in part order and reduces the sum
// across the replicas (Reducer, nil for none); the others wait for it.
// Those waits are for goroutines of the same pass, so they are bounded
// by the Reducer's deadline.
type Point struct {
	r Reducer

	mu      sync.Mutex
	cond    sync.Cond
	parts   [][]float64
	arrived int
	round   uint64
	sum     []float64
	failed  error
}

// New returns the meeting point of n parts that reduces with r (nil: the
// parts' sum is the result, one replica).
func New(n int, r Reducer) *Point {
	if n < 1 {
		panic(fmt.Sprintf("statsync: a meeting of %d parts", n))
	}
	p := &Point{r: r, parts: make([][]float64, n)}
	p.cond.L = &p.mu
	return p
}

// Parts is the number of parts that meet.
func (p *Point) Parts() int { return len(p.parts) }

// Meet hands in part j's statistics and returns their sum over the parts
// and the replicas, valid until part j's next Meet; what names the
// statistics (a layer) for the error. local is read until every part has
// arrived.
func (p *Point) Meet(j int, local []float64, what string) ([]float64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts[j] = local
	p.arrived++
	if p.arrived < len(p.parts) {
		for round := p.round; round == p.round; {
			p.cond.Wait()
		}
		return p.sum, p.failed
	}
	p.sum = append(p.sum[:0], p.parts[0]...)
	for _, part := range p.parts[1:] {
		if len(part) != len(p.sum) {
			panic(fmt.Sprintf("statsync: %s: part of %d statistics, another of %d", what, len(part), len(p.sum)))
		}
		for i, v := range part {
			p.sum[i] += v
		}
	}
	if p.failed == nil && p.r != nil {
		if err := p.r.SumStats(p.sum); err != nil {
			p.failed = fmt.Errorf("summing the statistics of %s across the replicas: %w", what, err)
		}
	}
	p.arrived = 0
	p.round++
	p.cond.Broadcast()
	return p.sum, p.failed
}

// Err is the first failure since Reset; nil for a nil Point.
func (p *Point) Err() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// Reset forgets the last pass's failure: call it before a pass. A nil
// Point has none.
func (p *Point) Reset() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failed = nil
}
