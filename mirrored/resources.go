package mirrored

import (
	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// sampler is a run's ResourceSampler; nil when the Job has none.
type sampler struct{ s ResourceSampler }

// startSampler starts job's ResourceSampler over g's links, if it has one.
func startSampler(job *Job, g Group) *sampler {
	if job.Resources == nil {
		return nil
	}
	return &sampler{job.Resources(groupLinks(g))}
}

func (s *sampler) pending(step int) []ResourceSample {
	if s == nil {
		return nil
	}
	return s.s.Pending(step)
}

func (s *sampler) finish() []ResourceSample {
	if s == nil {
		return nil
	}
	return s.s.Finish()
}

// groupLinks returns g's per-link byte counter, nil if g does not count.
func groupLinks(g Group) func() []collective.LinkTraffic {
	c, ok := replica.Comm(g)
	if !ok {
		return nil
	}
	if lt, ok := c.Transport().(interface {
		Links() []collective.LinkTraffic
	}); ok {
		return lt.Links
	}
	return nil
}

// emitResources passes the samples taken since the last step to the
// observers, at the steps done when each was taken.
func emitResources(obs *observers, s *sampler, step, steps int) error {
	for _, smp := range s.pending(step) {
		if err := obs.emit(Event{Kind: EventResources, Step: smp.Step, Steps: steps, Resources: &smp}); err != nil {
			return err
		}
	}
	return nil
}
