package statsync

import (
	"fmt"
	"sync"
	"time"
)

// InMemory returns the Reducers of n replicas in one process (tests, and
// replicas run on goroutines): replica r's SumStats waits up to timeout
// for the other replicas' and sums the n vectors in rank order. A
// replica that does not come in time fails the wait (naming it) and
// every later SumStats of the group.
func InMemory(n int, timeout time.Duration) []Reducer {
	g := &memGroup{timeout: timeout, cur: newMemRound(n)}
	rs := make([]Reducer, n)
	for r := range rs {
		rs[r] = &memReducer{g: g, rank: r}
	}
	return rs
}

type memGroup struct {
	timeout time.Duration
	mu      sync.Mutex
	cur     *memRound
	failed  error
}

// memRound is one SumStats of every replica: their vectors by rank, and
// once all came (done closed), the sum or the failure.
type memRound struct {
	stats [][]float64
	came  int
	done  chan struct{}
	sum   []float64
	err   error
}

func newMemRound(n int) *memRound {
	return &memRound{stats: make([][]float64, n), done: make(chan struct{})}
}

type memReducer struct {
	g    *memGroup
	rank int
}

func (m *memReducer) SumStats(stats []float64) error {
	g := m.g
	g.mu.Lock()
	if g.failed != nil {
		g.mu.Unlock()
		return g.failed
	}
	rd := g.cur
	rd.stats[m.rank] = stats
	rd.came++
	if rd.came == len(rd.stats) {
		rd.sum = make([]float64, len(stats))
		for r, s := range rd.stats {
			if len(s) != len(stats) {
				rd.err = fmt.Errorf("statsync: replica %d sums %d statistics, replica %d %d: the replicas' models differ", r, len(s), m.rank, len(stats))
				break
			}
			for i, v := range s {
				rd.sum[i] += v
			}
		}
		g.cur = newMemRound(len(rd.stats))
		close(rd.done)
	}
	g.mu.Unlock()
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case <-rd.done:
	case <-t.C:
		g.mu.Lock()
		defer g.mu.Unlock()
		if rd.came == len(rd.stats) { // came as the timer fired
			break
		}
		var missing []int
		for r, s := range rd.stats {
			if s == nil {
				missing = append(missing, r)
			}
		}
		g.failed = fmt.Errorf("statsync: replica %d waited %v for the statistics of replicas %v: they did not come", m.rank, g.timeout, missing)
		return g.failed
	}
	if rd.err != nil {
		return rd.err
	}
	copy(stats, rd.sum)
	return nil
}
