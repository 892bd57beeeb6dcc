package mirrored

import (
	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// ResourceSample is a peer's resource use over one interval ending
// Seconds after the run started, what dstat, top and iftop showed the
// course reports by hand. CPU is in cores (CPU-seconds per second); the
// rates in bytes per second.
type ResourceSample struct {
	Seconds  float64 `json:"t"`
	Interval float64 `json:"interval"`
	Step     int     `json:"step"` // steps done at the end of the interval
	// CPUUser and CPUSystem are the process's (peers in one process share
	// it).
	CPUUser   float64 `json:"cpu_user"`
	CPUSystem float64 `json:"cpu_system"`
	RSSBytes  int64   `json:"rss_bytes"`
	// DiskRead and DiskWrite are what reached storage (the page cache's
	// hits are not reads).
	DiskRead  float64 `json:"disk_read_per_sec"`
	DiskWrite float64 `json:"disk_write_per_sec"`
	// Sent and Received are over all links, Links per peer rank.
	Sent     float64    `json:"sent_per_sec"`
	Received float64    `json:"received_per_sec"`
	Links    []LinkRate `json:"links,omitempty"`
}

// LinkRate is one link's traffic in a ResourceSample.
type LinkRate struct {
	Peer     int     `json:"peer"`
	Sent     float64 `json:"sent_per_sec"`
	Received float64 `json:"received_per_sec"`
}

// ResourceSampler measures this process's resources while a replica
// trains (observe.Resources samples the OS): a Job's Resources starts one
// per run; the loop tells it the steps done at every step and passes what
// is new to the observers (EventResources), and keeps its history in
// PeerStats.Resources.
type ResourceSampler interface {
	// Pending returns the samples taken since the last call, after noting
	// that step steps are done.
	Pending(step int) []ResourceSample
	// Finish stops sampling and returns the whole history; it may be
	// called again.
	Finish() []ResourceSample
}

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
