package netns

import (
	"context"
	"fmt"

	"github.com/meshtrain/meshtrain/internal/stats"
)

// AlgoPair is one pair of runs of the same all-reduce among perHost peers
// on each host: the flat ring, and what -algo auto chooses there (the
// hierarchical all-reduce, where hosts hold several peers), one after the
// other.
type AlgoPair struct {
	Ring, Auto AllReduceResult
	// RingFirst says which ran first: the pairs alternate, so that
	// neither always runs on the warmer (or busier) machine.
	RingFirst bool
	// Load is the load average after the pair.
	Load string
}

// MeasureAlgoPairs runs pairs AlgoPairs of a size-byte float32 all-reduce
// (sec links, reps timed repetitions a run) among perHost peers on every
// host, alternating which of the two runs first; extra goes to every
// netbench process (e.g. -intra-host tls).
func MeasureAlgoPairs(ctx context.Context, h *Hosts, perHost int, netbench, sec string, size int64, pairs, reps int, extra ...string) ([]AlgoPair, error) {
	out := make([]AlgoPair, pairs)
	for i := range out {
		p := &out[i]
		p.RingFirst = i%2 == 0
		order := []string{"ring", "auto"}
		if !p.RingFirst {
			order = []string{"auto", "ring"}
		}
		for _, algo := range order {
			r, err := MeasureAllReducePerHost(ctx, h, perHost, netbench, sec, []int64{size}, reps, append([]string{"-algo", algo}, extra...)...)
			if err != nil {
				return nil, fmt.Errorf("pair %d, -algo %s: %w", i+1, algo, err)
			}
			if algo == "ring" {
				p.Ring = r[0]
			} else {
				p.Auto = r[0]
			}
		}
		p.Load = LoadAverage()
	}
	return out, nil
}

// PairMedians is the median over the pairs of each run's median busbw:
// the ring's, Auto's, and their ratio (Auto ÷ ring).
func PairMedians(pairs []AlgoPair) (ring, auto, ratio float64) {
	var rs, as []float64
	for _, p := range pairs {
		rs, as = append(rs, p.Ring.Median()), append(as, p.Auto.Median())
	}
	ring, auto = stats.Median(rs), stats.Median(as)
	if ring > 0 {
		ratio = auto / ring
	}
	return ring, auto, ratio
}
