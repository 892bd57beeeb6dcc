package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/meshtrain/meshtrain/mirrored/settings"
	"github.com/meshtrain/meshtrain/nn"
)

// StepGrouper is a replica whose Gradient itself talks to the group:
// under synchronized batch normalization (DenseConfig.SyncBatchNorm) the
// forward and backward passes sum their statistics across the replicas.
// The synchronous step hands it the step's context and group first
// (UseStepGroup); a loop that does not (gossip's) leaves its Gradient
// failing, saying so.
type StepGrouper interface {
	UseGroup(ctx context.Context, g Group)
}

// UseStepGroup hands rep the step's ctx and g if rep is a StepGrouper.
func UseStepGroup(rep Replica, ctx context.Context, g Group) {
	if sg, ok := rep.(StepGrouper); ok {
		sg.UseGroup(ctx, g)
	}
}

// UseGroup implements StepGrouper: a Dense replica with synchronized
// batch normalization sums its statistics over g, within ctx.
func (r *Dense) UseGroup(ctx context.Context, g Group) {
	if r.stats != nil {
		r.stats.ctx, r.stats.g = ctx, g
	}
}

// SyncBatchNormSettings is the setting "sync_batchnorm": the replicas
// compare it at start-up (one normalising over the global batch, another
// over its own, would diverge), and when on, checkpoints record it as
// they record a 16-bit wire; off, it is left out of them, so the
// default's checkpoints are those from before it.
func SyncBatchNormSettings(on bool) []settings.Setting {
	return []settings.Setting{{Name: "sync_batchnorm", Value: strconv.FormatBool(on), Resume: on}}
}

// groupStats is a Dense replica's nn.StatsReducer: the statistics of a
// synchronized batch normalization, all-gathered over the step's group
// and summed in rank order, so that every replica gets the same bits
// (PyTorch's SyncBatchNorm all-gathers its statistics too). A vector is
// a few floats per channel, so the all-gather's N−1 messages cost less
// than a ring's rounds would, on any Group, wrapped ones included.
type groupStats struct {
	ctx   context.Context
	g     Group
	local []byte
}

var _ nn.StatsReducer = (*groupStats)(nil)

func (s *groupStats) SumStats(stats []float64) error {
	if s.g == nil {
		return errors.New("synchronized batch normalization sums its statistics inside the synchronous step, which has not handed this replica its group: train with the ring (not gossip)")
	}
	if s.g.Size() < 2 {
		return s.ctx.Err()
	}
	s.local = s.local[:0]
	for _, v := range stats {
		s.local = binary.LittleEndian.AppendUint64(s.local, math.Float64bits(v))
	}
	all, err := s.g.AllGather(s.ctx, s.local)
	if err != nil {
		return fmt.Errorf("all-gathering %d statistics from the %d replicas: %w", len(stats), s.g.Size(), err)
	}
	for rank, b := range all {
		if len(b) != len(s.local) {
			return fmt.Errorf("rank %d sent %d bytes of batch-normalization statistics, rank %d %d: the replicas' models differ", rank, len(b), s.g.Rank(), len(s.local))
		}
	}
	clear(stats)
	for _, b := range all {
		for i := range stats {
			stats[i] += math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return nil
}

// syncBatchNorm makes the model normalise over the global batch (see
// DenseConfig.SyncBatchNorm).
func (r *Dense) syncBatchNorm() error {
	bs, ok := r.model.(nn.BatchNormSyncer)
	if !ok {
		return fmt.Errorf("model %s cannot synchronize batch normalization: it has none (a built-in model); drop --sync-batchnorm", r.model.Name())
	}
	r.stats = &groupStats{}
	if err := bs.SyncBatchNorm(r.stats); err != nil {
		return err
	}
	// No bucketed exchange (newOverlap): it would run on its own
	// goroutine during the backward pass, which sums its statistics
	// meanwhile, and a Comm runs one collective at a time in call order,
	// which two goroutines would make differ between the replicas.
	return nil
}
