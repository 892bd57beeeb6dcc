package mirrored

// The Job's side of the Combiner seam (replica.Combiner): which one a
// run uses, and what the replicas compare of it.

// combiner is j's Combiner, Mean when none is set.
func (j *Job) combiner() Combiner {
	if j.Combiner == nil {
		return Mean{}
	}
	return j.Combiner
}

// combinerSettings is the Combiner the replicas must share: nothing for
// the default, so that runs and checkpoints from before the seam compare
// equal.
func (j *Job) combinerSettings() []setting {
	if c := j.combiner(); c.Name() != MeanName {
		return []setting{{Name: "combiner", Value: c.Name(), Resume: true}}
	}
	return nil
}
