package collective

import (
	"fmt"
	"time"
)

// Phase is one phase of an all-reduce as this rank ran it, from Start to
// End: the ring's reduce-scatter then all-gather (PhaseReduceScatter,
// PhaseAllGather), or each round of recursive doubling ("tree: exchange
// with rank 2"). Options.Phases receives them, so that a timeline can
// show which phase of a combine took the time. The star has one phase
// per rank (the root folds and sends chunk by chunk), so it reports none.
type Phase struct {
	Name       string
	Start, End time.Time
}

// The ring all-reduce's phases.
const (
	PhaseReduceScatter = "ring reduce-scatter"
	PhaseAllGather     = "ring all-gather"
)

// ringClock marks a ring all-reduce's two phases for Options.Phases.
// The reduce-scatter ends when the last receive that folds is done (the
// all-gather's first send waits for it); the all-gather when the last
// frame has been received and sent. Without a hook it reads no clock.
type ringClock struct {
	hook           func(Phase)
	start, reduced time.Time
	lastReduce     int // the index of the plan's last folding receive; -1: none (not an all-reduce)
}

func (o *op) ringClock(p linearPlan) ringClock {
	rc := ringClock{hook: o.c.opts.Phases, lastReduce: -1}
	if rc.hook == nil {
		return rc
	}
	for i, r := range p.recvs {
		if r.reduce {
			rc.lastReduce = i
		}
	}
	if rc.lastReduce >= 0 {
		rc.start = time.Now()
	}
	return rc
}

// received notes that receive i of the plan is done.
func (rc *ringClock) received(i int) {
	if rc.hook != nil && i == rc.lastReduce {
		rc.reduced = time.Now()
	}
}

// done reports the phases of an all-reduce that succeeded.
func (rc *ringClock) done(err error) {
	if rc.hook == nil || rc.lastReduce < 0 || err != nil || rc.reduced.IsZero() {
		return
	}
	end := time.Now()
	rc.hook(Phase{Name: PhaseReduceScatter, Start: rc.start, End: rc.reduced})
	rc.hook(Phase{Name: PhaseAllGather, Start: rc.reduced, End: end})
}

// rdPhase is the name of a round of recursive doubling.
func rdPhase(st rdStep) string {
	switch st.move {
	case rdSend:
		return fmt.Sprintf("tree: send to rank %d", st.peer)
	case rdRecvFold:
		return fmt.Sprintf("tree: fold from rank %d", st.peer)
	case rdExchange:
		return fmt.Sprintf("tree: exchange with rank %d", st.peer)
	default:
		return fmt.Sprintf("tree: result from rank %d", st.peer)
	}
}
