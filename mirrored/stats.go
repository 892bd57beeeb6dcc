package mirrored

import (
	"fmt"
	"time"

	"github.com/meshtrain/meshtrain/mirrored/outcome"
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

// splitExchange divides the exchanges' time into communicating and
// waiting (outcome.SplitExchange).
var splitExchange = outcome.SplitExchange

// finishPeer fills the end-of-run figures every strategy reports: the
// bytes moved (when counted implements Traffic), then PeerStats.Finish.
func finishPeer(p *PeerStats, counted any, compute, comm, wait time.Duration) {
	if tr, ok := counted.(Traffic); ok {
		p.BytesSent, p.BytesReceived = tr.Traffic()
	}
	p.Finish(compute, comm, wait)
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
