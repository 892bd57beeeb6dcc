package gossip

import (
	"context"
	"fmt"
	"time"
)

// Exchange averages with the peer the schedule gives for round: Begin,
// then Wait. It waits at most Timeout for the answer; a peer that fails is
// dropped from the peer set and logged, and the exchange reports Lost (not
// an error: the others carry on). An error is returned only when ctx ends
// or after Finish.
func (g *Node) Exchange(ctx context.Context, round uint64) (Result, error) {
	res, err := g.Begin(ctx, round)
	if err != nil || res.Peer < 0 {
		return res, err
	}
	return g.Wait(ctx)
}

// Begin starts the exchange of round (after waiting for the one in flight,
// if any, whose result it drops: call Wait first to see it) and returns
// without waiting for the answer, which the receiver applies when it
// arrives. In dense mode the caller may run local steps meanwhile: the
// answer is then applied as the change it brings (avg−x_sent), and counts
// towards the staleness of a step in flight. In sparse mode the caller
// must Wait before its next local step.
func (g *Node) Begin(ctx context.Context, round uint64) (Result, error) {
	if _, err := g.Wait(ctx); err != nil {
		return Result{Peer: -1}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return Result{Peer: -1}, fmt.Errorf("gossip: exchange on rank %d after Close", g.rank)
	}
	res, e, err := g.m.begin(round)
	if err != nil || res.Peer < 0 {
		return res, err
	}
	px := &exchange{peer: res.Peer, id: g.m.pendingID(), elems: res.Elements, start: time.Now(), done: make(chan Result, 1)}
	g.pending, g.inflight = px, px
	g.carryOutLocked(e)
	return res, nil
}

// InFlight says whether the exchange last begun is still unanswered (and
// within its deadline): a caller that never waits for communication skips
// a round then, rather than calling Begin, which would wait.
func (g *Node) InFlight() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending != nil && g.pending == g.inflight && time.Since(g.pending.start) < g.timeout
}

// Wait waits for the exchange in flight (if any; Peer -1 and NoPeer if
// none) and returns its result. Its deadline is Timeout after Begin.
func (g *Node) Wait(ctx context.Context) (Result, error) {
	g.mu.Lock()
	px := g.inflight
	g.inflight = nil
	g.mu.Unlock()
	if px == nil {
		return Result{Peer: -1, Outcome: NoPeer}, nil
	}
	wait, cancel := context.WithDeadline(ctx, px.start.Add(g.timeout))
	defer cancel()
	var err error
	select {
	case res := <-px.done:
		return res, nil
	case <-g.gone[px.peer]:
		err = fmt.Errorf("rank %d left the peer set while rank %d waited for its answer", px.peer, g.rank)
	case <-wait.Done():
		err = fmt.Errorf("rank %d did not answer a gossip request within %v", px.peer, g.timeout)
	}
	g.mu.Lock()
	if g.pending == px { // not answered meanwhile: give it up
		if ctx.Err() != nil {
			g.m.abandon(px.id)
			g.pending = nil
			g.mu.Unlock()
			return Result{Peer: px.peer, Elements: px.elems}, fmt.Errorf("gossip: exchange of rank %d with rank %d: %w", g.rank, px.peer, ctx.Err())
		}
		g.carryOutLocked(g.m.lose(px.id, err)) // settles px as Lost
	}
	g.mu.Unlock()
	return <-px.done, nil
}

// Finish freezes this rank's parameters, sends them to every peer still in
// the cluster (finished ones included: they wait for ours) and waits up to
// Timeout for theirs. It returns every rank's final parameters that
// arrived (dense mode; nil entries for ranks lost or, in sparse mode, for
// everyone but this rank). Exchanges are refused from now on.
func (g *Node) Finish(ctx context.Context) [][]float32 {
	g.mu.Lock()
	e := g.m.finish()
	g.carryOutLocked(e)
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	for _, s := range e.sends {
		select {
		case <-g.gone[s.to]:
		case <-ctx.Done():
			g.fail(s.to, fmt.Errorf("no final parameters within %v: %w", g.timeout, ctx.Err()))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.finalParams()
}
