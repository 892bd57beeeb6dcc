package replica

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// gathered is a Group of len(all) replicas whose AllGather hands back
// all, this rank's slot its own bytes.
type gathered struct {
	LocalGroup
	rank int
	all  [][]byte
}

func (g gathered) Rank() int { return g.rank }
func (g gathered) Size() int { return len(g.all) }

func (g gathered) AllGather(_ context.Context, local []byte) ([][]byte, error) {
	out := append([][]byte(nil), g.all...)
	out[g.rank] = local
	return out, nil
}

func float64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// TestGroupStats: the statistics are summed in rank order, so every
// rank gets the same bits whichever it is (1e16 + 1 − 1e16 is 0 in rank
// order, 1 in others); a replica sending another length is named;
// outside the synchronous step the reducer says so.
func TestGroupStats(t *testing.T) {
	values := [][]float64{{1e16, 2}, {1, 3}, {-1e16, 4}}
	all := [][]byte{float64s(values[0]...), float64s(values[1]...), float64s(values[2]...)}
	for rank := range all {
		s := &groupStats{ctx: context.Background(), g: gathered{rank: rank, all: all}}
		stats := append([]float64(nil), values[rank]...)
		if err := s.SumStats(stats); err != nil {
			t.Fatal(err)
		}
		if stats[0] != 0 || stats[1] != 9 {
			t.Errorf("rank %d: %v, want [0 9] (summed in rank order)", rank, stats)
		}
	}
	s := &groupStats{ctx: context.Background(), g: gathered{rank: 0, all: [][]byte{nil, float64s(1)}}}
	if err := s.SumStats([]float64{1, 2}); err == nil || !strings.Contains(err.Error(), "rank 1 sent 8 bytes") {
		t.Errorf("a shorter vector from rank 1: %v", err)
	}
	if err := (&groupStats{}).SumStats([]float64{1}); err == nil || !strings.Contains(err.Error(), "inside the synchronous step") {
		t.Errorf("no group: %v", err)
	}
}
