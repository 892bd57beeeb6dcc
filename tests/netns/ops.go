package netns

import (
	"context"
	"strconv"
	"strings"

	"github.com/meshtrain/meshtrain/internal/stats"
)

// OpResult is one size of an operation other than the all-reduce (the
// sparse all-gather of a step's gradient, a gossip round), timed Reps
// times.
type OpResult struct {
	Op string `json:"op"` // gather or gossip
	N  int    `json:"n"`
	// Bytes is gossip's vector, or the gather's encoded payload per rank.
	Bytes   int64 `json:"bytes"`
	Touched int   `json:"touched,omitempty"` // gather: features per rank
	// Seconds is each repetition's time on the slowest rank.
	Seconds []float64 `json:"seconds"`
	// CPUSeconds is the CPU time of all ranks per repetition.
	CPUSeconds float64 `json:"cpu_s"`
	// Averaged is, for gossip, the share of the ranks' timed exchanges
	// that averaged (the others were declined: the peer was busy with its
	// own).
	Averaged float64 `json:"averaged,omitempty"`
}

// Median is the median repetition's time.
func (r OpResult) Median() float64 {
	return stats.Median(r.Seconds)
}

// MeasureGather times the sparse gradient exchange of a step on the hosts
// (TLS): for each count in touched, every rank encodes that many random
// features, all-gathers the encodings in one round and decodes them.
func MeasureGather(ctx context.Context, h *Hosts, netbench string, touched []int, reps int) ([]OpResult, error) {
	return runNetbench[OpResult](ctx, h, 1, netbench, "gather", len(touched), "-touched", joinInts(touched), "-reps", strconv.Itoa(reps))
}

// MeasureGossip times one pairwise gossip round (TLS) of each vector size
// in bytes: every rank averages with the next one in turn.
func MeasureGossip(ctx context.Context, h *Hosts, netbench string, sizes []int64, reps int) ([]OpResult, error) {
	sz := make([]int, len(sizes))
	for i, s := range sizes {
		sz[i] = int(s)
	}
	return runNetbench[OpResult](ctx, h, 1, netbench, "gossip", len(sizes), "-sizes", joinInts(sz), "-reps", strconv.Itoa(reps))
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
