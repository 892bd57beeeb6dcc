package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// The hierarchical all-reduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE,
// NCCL's tree of rings in spirit): the ranks of each host send their
// buffers to the host's leader (its lowest rank), which folds them in rank
// order; the leaders, one per host, run the ring among themselves; each
// leader sends the result back to its host. Over each host's link go
// 2(H-1)/H of the buffer for H hosts, where the flat ring sends 2(N-1)/N
// for N ranks and, with the ranks of a host next to each other in the
// ring, crosses each host's link as often as the leaders' ring does.
//
// The three parts run at once, a chunk at a time: the leaders' ring
// sends a chunk as soon as its host has folded it, and a leader sends a
// chunk back as soon as the ring has finished it. They never share a
// link (members talk only to their leader, leaders to each other), so
// each link still carries one stream of frames in one order, and a
// frame's Tag says which part it belongs to (hierPhase) beside a digest
// of the grouping, so ranks that disagree on the hosts fail with a
// mismatch. Each element is folded in one fixed order (the host's ranks
// in rank order, then the ring's order over hosts) and every rank ends
// with the leaders' bits: the result is the same on every rank and from
// run to run, though not the flat ring's bits (another order of sums).

// hierPhase is the part of the hierarchical all-reduce a frame belongs
// to: the low two bits of its Tag.
type hierPhase uint32

const (
	phaseReduce hierPhase = iota // a member's chunk to its leader
	phaseRing                    // between leaders
	phaseBcast                   // the result, from a leader to its host
)

func (p hierPhase) String() string {
	return [...]string{"reduce in host", "ring over leaders", "broadcast in host", "phase 3"}[p&3]
}

// hierPlan is one rank's part in the hierarchical all-reduce of elements
// [lo, hi) of a buffer.
type hierPlan struct {
	leader  int   // the host's leader (this rank, if it leads)
	members []int // leader only: the host's other ranks, ascending
	// reduce is the range's chunks in the order the host folds them
	// (members send them in that order): the order the leaders' ring
	// first needs them.
	reduce []span
	// ring is the leaders' ring (from and to are ranks), leaders only;
	// sendGate and recvGate say which chunk of reduce a ring send or
	// receive waits for (-1: none).
	ring               linearPlan
	sendGate, recvGate []int
	// bcast is the chunks in the order the leader sends them back.
	bcast []bcastStep
}

// bcastStep is one chunk of the broadcast back: the leader sends it once
// the ring's receive ringRecv finished it (or, with one host and so no
// ring, once reduce[reduced] is folded); a member receives it over its
// own data once it sent reduce[reduced].
type bcastStep struct {
	sp                span
	ringRecv, reduced int
}

// planHier is rank's hierPlan in topology t for elements [lo, hi) of a
// buffer of length elements, in chunks of at most chunk elements. The
// leaders' segments are those of the whole buffer cut to [lo, hi), as the
// ring's are, so a buffer reduced in ranges gets the bits of the whole.
func planHier(t Topology, rank, length, lo, hi, chunk int) hierPlan {
	h, nh := t.host[rank], t.Hosts()
	p := hierPlan{leader: t.leaders[h]}
	if rank == p.leader {
		p.members = t.ranks[h][1:]
	}
	segs := segments(length, nh)
	for i, sg := range segs {
		a, b := max(sg.off, lo), min(sg.off+sg.n, hi)
		segs[i] = span{a, max(0, b-a)}
	}
	// Leader h's ring first sends segment h-1, then folds h-2, h-3, ….
	// (Empty chunks of empty segments may share a key: a wait on the
	// later one is only longer, never circular.)
	index := map[span]int{}
	for k := range nh {
		for _, sp := range chunks(segs[mod(h-1-k, nh)], chunk) {
			index[sp] = len(p.reduce)
			p.reduce = append(p.reduce, sp)
		}
	}
	if nh == 1 {
		for i, sp := range p.reduce {
			p.bcast = append(p.bcast, bcastStep{sp: sp, ringRecv: -1, reduced: i})
		}
		return p
	}
	ring := planRing(nh, h, segs, chunk, true)
	ring.from, ring.to = t.leaders[ring.from], t.leaders[ring.to]
	p.ring = ring
	p.sendGate, p.recvGate = make([]int, len(ring.sends)), make([]int, len(ring.recvs))
	for i, s := range ring.sends {
		p.sendGate[i] = -1
		if s.dep < 0 { // the host's own values: first sent, never received
			p.sendGate[i] = index[s.span]
		}
	}
	for i, r := range ring.recvs {
		p.recvGate[i] = -1
		if r.reduce {
			p.recvGate[i] = index[r.span]
		}
		// A chunk is final at its last reduce-scatter receive (the
		// leader's own segment) or at its all-gather receive (the others').
		if !r.reduce || r.step == nh-2 {
			p.bcast = append(p.bcast, bcastStep{sp: r.span, ringRecv: i, reduced: index[r.span]})
		}
	}
	return p
}

// runHier executes p over buf (the whole buffer's bytes, elements of
// esize bytes), o.hdr.Tag holding the grouping's digest.
func (o *op) runHier(ctx context.Context, p hierPlan, buf []byte, esize int, fn foldFunc) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	part := func(ph hierPhase) *op {
		q := *o
		q.hdr.Tag |= uint32(ph)
		return &q
	}
	red, ring, bc := part(phaseReduce), part(phaseRing), part(phaseBcast)
	bytesOf := func(sp span) []byte { return buf[sp.off*esize : (sp.off+sp.n)*esize] }
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		}()
	}
	if o.c.Rank() != p.leader {
		sent := newProgress()
		run(func() error {
			for _, sp := range p.reduce {
				if err := red.send(ctx, p.leader, sp, bytesOf(sp)); err != nil {
					return err
				}
				sent.advance()
			}
			return nil
		})
		run(func() error {
			for _, b := range p.bcast {
				if err := sent.waitFor(ctx, b.reduced); err != nil {
					return o.wrapPeer(ctx, "finishing sending to", p.leader, err)
				}
				if err := bc.recvInto(ctx, p.leader, b.sp, esize, bytesOf(b.sp), nil, false); err != nil {
					return err
				}
			}
			return nil
		})
	} else {
		reduced, recvd := newProgress(), newProgress()
		run(func() error {
			for _, sp := range p.reduce {
				for _, m := range p.members {
					if err := red.recvInto(ctx, m, sp, esize, bytesOf(sp), fn, false); err != nil {
						return err
					}
				}
				reduced.advance()
			}
			return nil
		})
		run(func() error {
			g := gates{ready: reduced, send: p.sendGate, recv: p.recvGate, recvd: recvd, of: fmt.Sprintf("the sum of this host's members (ranks %v)", p.members)}
			return ring.runGated(ctx, p.ring, buf, esize, fn, g)
		})
		if len(p.members) > 0 {
			run(func() error {
				for _, b := range p.bcast {
					var err error
					if b.ringRecv >= 0 {
						err = recvd.waitFor(ctx, b.ringRecv)
					} else {
						err = reduced.waitFor(ctx, b.reduced)
					}
					if err != nil {
						return o.wrapPeer(ctx, "waiting for the finished sum from", p.ring.from, err)
					}
					for _, m := range p.members {
						if err := bc.send(ctx, m, b.sp, bytesOf(b.sp)); err != nil {
							return err
						}
					}
				}
				return nil
			})
		}
	}
	wg.Wait()
	return joinFirst(errs)
}

// joinFirst joins errs, leaving out the context.Canceled errors of the
// parts that stopped only because another part failed first.
func joinFirst(errs []error) error {
	var real []error
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			real = append(real, err)
		}
	}
	if len(real) == 0 {
		return errors.Join(errs...)
	}
	return errors.Join(real...)
}
