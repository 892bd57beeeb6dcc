package observe

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored"
)

// ResourceInterval is how often Resources samples by default.
const ResourceInterval = time.Second

// MaxResourceSamples bounds a run's resource history: when it is full,
// neighbouring samples are merged in pairs (the interval doubles), so an
// hour at one a second fits and a week keeps the same number of points.
const MaxResourceSamples = 3600

// Resources is a Job.Resources that samples this process's resources from
// the OS every interval (0: ResourceInterval), what dstat, top and iftop
// showed the course reports by hand: CPU and resident memory (getrusage),
// disk reads and writes, and the bytes sent and received per link when
// the run's group counts them. Each run starts its own sampler.
func Resources(interval time.Duration) func(links func() []collective.LinkTraffic) mirrored.ResourceSampler {
	if interval <= 0 {
		interval = ResourceInterval
	}
	return func(links func() []collective.LinkTraffic) mirrored.ResourceSampler {
		return startSampler(interval, links)
	}
}

// sampler takes a mirrored.ResourceSample every interval on its own
// goroutine until stopped; the run tells it the steps done and collects
// what is new with Pending.
type sampler struct {
	start    time.Time
	links    func() []collective.LinkTraffic // nil: not counted
	step     atomic.Int64
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	samples  []mirrored.ResourceSample
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
		smp := mirrored.ResourceSample{Seconds: at.Sub(s.start).Seconds(), Interval: dt, Step: int(s.step.Load()),
			CPUUser: (u.User - prev.User).Seconds() / dt, CPUSystem: (u.System - prev.System).Seconds() / dt, RSSBytes: u.RSSBytes,
			DiskRead: float64(u.DiskRead-prev.DiskRead) / dt, DiskWrite: float64(u.DiskWritten-prev.DiskWritten) / dt}
		if s.links != nil {
			cur := s.links()
			for i, l := range cur {
				var p collective.LinkTraffic
				if i < len(prevLinks) {
					p = prevLinks[i]
				}
				lr := mirrored.LinkRate{Peer: l.Peer, Sent: float64(l.Sent-p.Sent) / dt, Received: float64(l.Received-p.Received) / dt}
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
func (s *sampler) add(smp mirrored.ResourceSample) {
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
func mergeSamples(a, b mirrored.ResourceSample) mirrored.ResourceSample {
	t := a.Interval + b.Interval
	w := func(x, y float64) float64 { return (x*a.Interval + y*b.Interval) / t }
	m := mirrored.ResourceSample{Seconds: b.Seconds, Interval: t, Step: b.Step, CPUUser: w(a.CPUUser, b.CPUUser), CPUSystem: w(a.CPUSystem, b.CPUSystem),
		RSSBytes: b.RSSBytes, DiskRead: w(a.DiskRead, b.DiskRead), DiskWrite: w(a.DiskWrite, b.DiskWrite),
		Sent: w(a.Sent, b.Sent), Received: w(a.Received, b.Received)}
	for i, l := range b.Links {
		var p mirrored.LinkRate
		if i < len(a.Links) {
			p = a.Links[i]
		}
		m.Links = append(m.Links, mirrored.LinkRate{Peer: l.Peer, Sent: w(p.Sent, l.Sent), Received: w(p.Received, l.Received)})
	}
	return m
}

// Pending returns the samples taken since the last call (for the
// observers), after setting the steps done to step.
func (s *sampler) Pending(step int) []mirrored.ResourceSample {
	s.step.Store(int64(step))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported >= len(s.samples) {
		return nil
	}
	out := append([]mirrored.ResourceSample(nil), s.samples[s.reported:]...)
	s.reported = len(s.samples)
	return out
}

// Finish stops the sampler and returns the whole history; it may be
// called again.
func (s *sampler) Finish() []mirrored.ResourceSample {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}
