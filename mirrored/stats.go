package mirrored

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// syncTimes adds up where a synchronous run's time went.
type syncTimes struct {
	compute, comm, wait time.Duration
	input               time.Duration // the part of wait spent on the input
	// phase is the time from the end of a step's gradient to the end of
	// its exchange, over the steps sampled by MeasureWait (sampledPhase,
	// with sampledWait the barrier's part of it) and the others.
	phase, sampledWait, sampledPhase time.Duration
	sampled, unsampled               int
}

// step adds one step's times (see stepClock).
func (s *syncTimes) step(c stepClock, sample bool) {
	s.wait += c[1].Sub(c[0])
	s.input += c[1].Sub(c[0])
	s.compute += c[2].Sub(c[1]) + c[5].Sub(c[4])
	if sample {
		s.sampled++
		s.sampledWait += c[3].Sub(c[2])
		s.sampledPhase += c[4].Sub(c[2])
	} else {
		s.unsampled++
		s.phase += c[4].Sub(c[2])
	}
}

// finish fills p's end-of-run figures, splitting the exchanges' time into
// communicating and waiting (splitExchange).
func (s *syncTimes) finish(p *PeerStats, counted any) {
	comm, wait := splitExchange(s.phase, s.unsampled, s.sampledWait, s.sampledPhase, s.sampled)
	finishPeer(p, counted, s.compute, s.comm+comm, s.wait+wait)
	p.InputSeconds = s.input.Seconds()
}

// splitExchange divides the time a run spent in its gradient exchanges
// into communicating and waiting for slower peers. The sampled steps'
// barrier measured their wait (sampledWait of sampledPhase, over sampled
// steps); each of the other steps (phase, over unsampled steps) is taken
// to have waited as long as a sampled step did on average, but never
// longer than its whole exchange phase. The wait is time, not a share of
// the exchange: a step whose exchange mostly ran during its backward pass
// (gradient buckets) has a short phase, and waited no less for that.
// Without samples all of it counts as communication.
func splitExchange(phase time.Duration, unsampled int, sampledWait, sampledPhase time.Duration, sampled int) (comm, wait time.Duration) {
	if sampled == 0 {
		return phase + sampledPhase, 0
	}
	wait = sampledWait + min(phase, time.Duration(float64(sampledWait)/float64(sampled)*float64(unsampled)))
	return phase + sampledPhase - wait, wait
}

// finishPeer fills the end-of-run figures every strategy reports: the bytes
// moved (when counted implements Traffic), the process's CPU time and peak
// memory, the split of step time and the throughput over it (Examples
// must be set).
func finishPeer(p *PeerStats, counted any, compute, comm, wait time.Duration) {
	if tr, ok := counted.(Traffic); ok {
		p.BytesSent, p.BytesReceived = tr.Traffic()
	}
	p.CPUSeconds, p.PeakRSSBytes = rusage.CPUTime().Seconds(), rusage.PeakRSS()
	p.Host, _ = os.Hostname()
	p.Cores, p.PID = runtime.NumCPU(), os.Getpid()
	host, life := rusage.HostCPUSinceStart()
	p.HostCPUSeconds, p.ProcessSeconds, p.Load1 = host.Seconds(), life.Seconds(), max(0, rusage.Load1())
	p.ComputeSeconds, p.CommSeconds, p.WaitSeconds = compute.Seconds(), comm.Seconds(), wait.Seconds()
	if total := compute + comm + wait; total > 0 {
		p.ComputeShare, p.CommShare, p.WaitShare = float64(compute)/float64(total), float64(comm)/float64(total), float64(wait)/float64(total)
		p.ExamplesPerSec = float64(p.Examples) / total.Seconds()
	}
}

// targetMet says whether the last epoch reached a target of cfg.
func targetMet(cfg *Config, eps []Epoch) bool {
	if len(eps) == 0 {
		return false
	}
	ep := eps[len(eps)-1]
	return (cfg.TargetAccuracy > 0 && ep.TestAccuracy >= cfg.TargetAccuracy) || (cfg.TargetLoss > 0 && ep.Loss <= cfg.TargetLoss)
}

func markAccuracy(res *Result, ep Epoch) {
	for _, mark := range accuracyMarks {
		key := fmt.Sprint(mark)
		if _, done := res.TimeToAccuracy[key]; !done && ep.TestAccuracy >= mark {
			res.TimeToAccuracy[key] = ep.TrainSeconds
		}
	}
}
