package mirrored

import "github.com/meshtrain/meshtrain/mirrored/replica"

// The Job's side of the Combiner seam (replica.Combiner): which one a
// run uses, and what the replicas compare of it.

// combiner is j's Combiner, Mean when none is set.
func (j *Job) combiner() Combiner {
	if j.Combiner == nil {
		return Mean{}
	}
	return j.Combiner
}

// combinerSettings is the Combiner the replicas must share (see
// replica.CombinerSettings), and whether the passes sum statistics too.
func (j *Job) combinerSettings() []setting {
	return append(replica.CombinerSettings(j.combiner()), replica.SyncBatchNormSettings(j.SyncBatchNorm)...)
}
