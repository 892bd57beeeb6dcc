package mirrored

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

// PeerStats are one replica's own figures: what users of TensorFlow's
// MultiWorkerMirroredStrategy gathered with dstat, top and iftop.
type PeerStats struct {
	Rank     int `json:"rank"`
	Steps    int `json:"steps"`    // steps this process ran (after any resume)
	Examples int `json:"examples"` // training examples this process computed on
	// ExamplesPerSec is Examples over this process's training time.
	ExamplesPerSec float64 `json:"peer_examples_per_sec"`
	TestAccuracy   float64 `json:"test_accuracy"`
	// BytesSent and BytesReceived count collective frames (headers and
	// payloads) as the transport saw them, 0 if it does not count.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	// Links splits them per link (peer rank), where known.
	Links []collective.LinkTraffic `json:"links,omitempty"`
	// Left says that this peer left an elastic run before its end (the
	// membership schedule), and when.
	Left string `json:"left,omitempty"`
	// CPUSeconds (user + system) and PeakRSSBytes are the process's, from
	// getrusage: with several replicas in one process they are shared.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// The training steps' time, split: computing (input excluded:
	// forward, backward, update), communicating (the gradient all-reduce
	// and the hash checks) and waiting (for the input pipeline and, with
	// MeasureWait, for the slowest replica: estimated from sampled steps,
	// see Job.MeasureWait).
	ComputeSeconds float64 `json:"compute_seconds"`
	CommSeconds    float64 `json:"comm_seconds"`
	WaitSeconds    float64 `json:"wait_seconds"`
	ComputeShare   float64 `json:"compute_share"`
	CommShare      float64 `json:"comm_share"`
	WaitShare      float64 `json:"wait_share"`
	// InputSeconds is the part of WaitSeconds spent waiting for the input
	// pipeline's next batch (the rest is waiting for slower peers).
	InputSeconds float64 `json:"input_seconds"`
	// EvalSeconds and CheckpointSeconds are spent outside the steps.
	EvalSeconds       float64 `json:"eval_seconds"`
	CheckpointSeconds float64 `json:"checkpoint_seconds"`
	ParamsSHA256      string  `json:"params_sha256"`
	// Host is the machine's name and Cores its logical CPUs (to tell
	// peers that shared a machine's cores).
	Host  string `json:"host,omitempty"`
	Cores int    `json:"cores,omitempty"`
	// PID is the process (replicas in one process share its CPUSeconds).
	PID int `json:"pid,omitempty"`
	// Resources is the process's resource use over the run, from the
	// Job's ResourceSampler (observe.Resources: one sample a second,
	// merged in pairs past observe.MaxResourceSamples).
	Resources []ResourceSample `json:"resources,omitempty"`
	// ResumedFrom is the checkpoint the run continued from (on the chief;
	// "rank 0's checkpoint" elsewhere) and ResumedStep its step.
	ResumedFrom string `json:"resumed_from,omitempty"`
	ResumedStep int    `json:"resumed_step,omitempty"`
}

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
	p.finish(counted, s.compute, s.comm+comm, s.wait+wait)
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

// finish fills the end-of-run figures every strategy reports: the bytes
// moved (when counted implements Traffic), the process's CPU time and peak
// memory, the split of step time and the throughput over it (Examples
// must be set).
func (p *PeerStats) finish(counted any, compute, comm, wait time.Duration) {
	if tr, ok := counted.(Traffic); ok {
		p.BytesSent, p.BytesReceived = tr.Traffic()
	}
	p.CPUSeconds, p.PeakRSSBytes = rusage.CPUTime().Seconds(), rusage.PeakRSS()
	p.Host, _ = os.Hostname()
	p.Cores, p.PID = runtime.NumCPU(), os.Getpid()
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
