package mirrored

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

// ResourceInterval is how often a run samples its process's resources.
const ResourceInterval = time.Second

// sampleEvery is ResourceInterval, shorter in tests.
var sampleEvery = ResourceInterval

// MaxResourceSamples bounds a run's resource history: when it is full,
// neighbouring samples are merged in pairs (the interval doubles), so an
// hour at one a second fits and a week keeps the same number of points.
const MaxResourceSamples = 3600

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

// sampler takes a ResourceSample every interval on its own goroutine
// until stopped; the loop tells it the steps done and collects what is
// new with pending.
type sampler struct {
	start    time.Time
	links    func() []collective.LinkTraffic // nil: not counted
	step     atomic.Int64
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	samples  []ResourceSample
	reported int // samples already passed on by pending
	once     sync.Once
}

// startSampler samples every interval from now; links, if not nil, counts
// the bytes per link.
func startSampler(interval time.Duration, links func() []collective.LinkTraffic) *sampler {
	s := &sampler{start: time.Now(), links: links, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run(interval)
	return s
}

func (s *sampler) run(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	prevAt, prev := time.Now(), rusage.Now()
	var prevLinks []collective.LinkTraffic
	if s.links != nil {
		prevLinks = s.links()
	}
	for {
		final := false
		select {
		case <-s.stop:
			// The last, partial interval: a run shorter than one still
			// has its sample.
			if time.Since(prevAt) < time.Millisecond {
				return
			}
			final = true
		case <-t.C:
		}
		at, u := time.Now(), rusage.Now()
		dt := at.Sub(prevAt).Seconds()
		smp := ResourceSample{Seconds: at.Sub(s.start).Seconds(), Interval: dt, Step: int(s.step.Load()),
			CPUUser: (u.User - prev.User).Seconds() / dt, CPUSystem: (u.System - prev.System).Seconds() / dt, RSSBytes: u.RSSBytes,
			DiskRead: float64(u.DiskRead-prev.DiskRead) / dt, DiskWrite: float64(u.DiskWritten-prev.DiskWritten) / dt}
		if s.links != nil {
			cur := s.links()
			for i, l := range cur {
				var p collective.LinkTraffic
				if i < len(prevLinks) {
					p = prevLinks[i]
				}
				lr := LinkRate{Peer: l.Peer, Sent: float64(l.Sent-p.Sent) / dt, Received: float64(l.Received-p.Received) / dt}
				smp.Links = append(smp.Links, lr)
				smp.Sent += lr.Sent
				smp.Received += lr.Received
			}
			prevLinks = cur
		}
		prevAt, prev = at, u
		s.add(smp)
		if final {
			return
		}
	}
}

// add appends a sample, halving the history when it is full.
func (s *sampler) add(smp ResourceSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, smp)
	if len(s.samples) < MaxResourceSamples {
		return
	}
	half := s.samples[:0]
	for i := 0; i+1 < len(s.samples); i += 2 {
		half = append(half, mergeSamples(s.samples[i], s.samples[i+1]))
	}
	s.samples = half
	// Samples merged before pending saw them are not passed on: the
	// history keeps them, TensorBoard misses at most one halving's worth.
	s.reported = len(s.samples)
}

// mergeSamples is a and b as one interval: rates weighted by time, the
// later resident set.
func mergeSamples(a, b ResourceSample) ResourceSample {
	t := a.Interval + b.Interval
	w := func(x, y float64) float64 { return (x*a.Interval + y*b.Interval) / t }
	m := ResourceSample{Seconds: b.Seconds, Interval: t, Step: b.Step, CPUUser: w(a.CPUUser, b.CPUUser), CPUSystem: w(a.CPUSystem, b.CPUSystem),
		RSSBytes: b.RSSBytes, DiskRead: w(a.DiskRead, b.DiskRead), DiskWrite: w(a.DiskWrite, b.DiskWrite),
		Sent: w(a.Sent, b.Sent), Received: w(a.Received, b.Received)}
	for i, l := range b.Links {
		var p LinkRate
		if i < len(a.Links) {
			p = a.Links[i]
		}
		m.Links = append(m.Links, LinkRate{Peer: l.Peer, Sent: w(p.Sent, l.Sent), Received: w(p.Received, l.Received)})
	}
	return m
}

// pending returns the samples taken since the last call (for the
// observers), after setting the steps done to step.
func (s *sampler) pending(step int) []ResourceSample {
	if s == nil {
		return nil
	}
	s.step.Store(int64(step))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported >= len(s.samples) {
		return nil
	}
	out := append([]ResourceSample(nil), s.samples[s.reported:]...)
	s.reported = len(s.samples)
	return out
}

// finish stops the sampler and returns the whole history.
func (s *sampler) finish() []ResourceSample {
	if s == nil {
		return nil
	}
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// groupLinks returns g's per-link byte counter, nil if g does not count.
func groupLinks(g Group) func() []collective.LinkTraffic {
	cg, ok := g.(*commGroup)
	if !ok {
		return nil
	}
	if lt, ok := cg.c.Transport().(interface {
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
