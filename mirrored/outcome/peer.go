package outcome

import (
	"os"
	"runtime"
	"time"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// Finish fills the end-of-run figures every strategy reports but the
// bytes moved: the process's CPU time and peak memory, the host, the
// split of step time (compute, comm, wait) and the throughput over it
// (Examples must be set).
func (p *PeerStats) Finish(compute, comm, wait time.Duration) {
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

// SplitExchange divides the time a run spent in its gradient exchanges
// into communicating and waiting for slower peers. The sampled steps'
// barrier measured their wait (sampledWait of sampledPhase, over sampled
// steps); each of the other steps (phase, over unsampled steps) is taken
// to have waited as long as a sampled step did on average, but never
// longer than its whole exchange phase. The wait is time, not a share of
// the exchange: a step whose exchange mostly ran during its backward pass
// (gradient buckets) has a short phase, and waited no less for that.
// Without samples all of it counts as communication.
func SplitExchange(phase time.Duration, unsampled int, sampledWait, sampledPhase time.Duration, sampled int) (comm, wait time.Duration) {
	if sampled == 0 {
		return phase + sampledPhase, 0
	}
	wait = sampledWait + min(phase, time.Duration(float64(sampledWait)/float64(sampled)*float64(unsampled)))
	return phase + sampledPhase - wait, wait
}
