package collective

// Schedules: pure functions of (world size, rank, lengths) that say which
// chunk moves between which ranks in what order. They know nothing about
// transports and are tested by simulating every rank (schedule_test.go).

// span is the half-open element range [off, off+n).
type span struct{ off, n int }

func mod(a, n int) int { return ((a % n) + n) % n }

// segments cuts length elements into n contiguous, balanced spans (the
// first length%n spans are one element longer).
func segments(length, n int) []span {
	segs := make([]span, n)
	q, r := length/n, length%n
	off := 0
	for i := range segs {
		segs[i] = span{off, q}
		if i < r {
			segs[i].n++
		}
		off += segs[i].n
	}
	return segs
}

// chunks cuts s into pieces of at most chunk elements; an empty span is one
// empty chunk, so that every step of a schedule moves at least one frame.
func chunks(s span, chunk int) []span {
	if chunk < 1 {
		chunk = 1
	}
	k := (s.n + chunk - 1) / chunk
	if k == 0 {
		return []span{s}
	}
	out := make([]span, k)
	for i := range out {
		n := min(chunk, s.n-i*chunk)
		out[i] = span{s.off + i*chunk, n}
	}
	return out
}

// xfer is one frame of a linear schedule. For a send, dep is the index of
// the receive that must have completed first (its data is what is sent);
// for a receive, dep is the index of the send that must have completed
// before the receive overwrites the span. -1 means no dependency.
type xfer struct {
	step   int
	span   span
	reduce bool // receive: reduce into the span rather than copy
	dep    int
}

// linearPlan is what one rank does in a schedule where it receives only from
// one rank (from) and sends only to one rank (to): a ring or a chain.
type linearPlan struct {
	from, to     int
	sends, recvs []xfer
}

// planRing is the ring schedule for rank among n over segs (one span per
// rank). With reduceScatter, n-1 reduce steps leave rank r holding the full
// reduction of segs[r]; then n-1 all-gather steps (the only steps without
// reduceScatter, where rank r starts holding segs[r]) pass every finished
// segment around. Spans are cut into chunks of at most chunk elements so that
// sending a chunk overlaps receiving and reducing the next one.
func planRing(n, rank int, segs []span, chunk int, reduceScatter bool) linearPlan {
	p := linearPlan{from: mod(rank-1, n), to: mod(rank+1, n)}
	if n == 1 {
		return p
	}
	type key struct{ seg, chunk int }
	lastSend, lastRecv := map[key]int{}, map[key]int{}
	step := 0
	add := func(sendSeg, recvSeg int, reduce bool) {
		for c, sp := range chunks(segs[sendSeg], chunk) {
			dep, ok := lastRecv[key{sendSeg, c}]
			if !ok {
				dep = -1
			}
			lastSend[key{sendSeg, c}] = len(p.sends)
			p.sends = append(p.sends, xfer{step: step, span: sp, dep: dep})
		}
		for c, sp := range chunks(segs[recvSeg], chunk) {
			dep, ok := lastSend[key{recvSeg, c}]
			if !ok {
				dep = -1
			}
			lastRecv[key{recvSeg, c}] = len(p.recvs)
			p.recvs = append(p.recvs, xfer{step: step, span: sp, reduce: reduce, dep: dep})
		}
		step++
	}
	if reduceScatter {
		for s := 0; s < n-1; s++ {
			add(mod(rank-s-1, n), mod(rank-s-2, n), true)
		}
	}
	for s := 0; s < n-1; s++ {
		add(mod(rank-s, n), mod(rank-s-1, n), false)
	}
	return p
}

// planChain is the pipelined chain broadcast from root over length
// elements: rank root+v receives each chunk from root+v-1 and forwards it to
// root+v+1 as soon as it has it.
func planChain(n, rank, root, length, chunk int) linearPlan {
	v := mod(rank-root, n)
	p := linearPlan{from: mod(rank-1, n), to: mod(rank+1, n)}
	cs := chunks(span{0, length}, chunk)
	if v > 0 {
		for _, sp := range cs {
			p.recvs = append(p.recvs, xfer{span: sp, dep: -1})
		}
	}
	if v < n-1 {
		for i, sp := range cs {
			dep := i
			if v == 0 {
				dep = -1
			}
			p.sends = append(p.sends, xfer{span: sp, dep: dep})
		}
	}
	return p
}

// rdMove is one move of recursive doubling.
type rdMove int

const (
	rdSend     rdMove = iota // send my whole buffer to peer
	rdRecvFold               // receive peer's buffer and fold it into mine
	rdExchange               // send mine to peer and fold peer's into mine
	rdRecvCopy               // receive the final result from peer
)

// rdStep is one round of recursive doubling. peerFirst says whether the
// peer's value is the left operand, so both sides compute op(a, b) with the
// same a and b and get the same bits even for min/max of NaN.
type rdStep struct {
	move      rdMove
	peer      int
	peerFirst bool
}

// planRecDoubling is recursive-doubling all-reduce for any n: with p the
// largest power of two ≤ n and rem = n-p, each even rank below 2·rem first
// hands its buffer to the odd rank above it and sits out; the p remaining
// ranks exchange and fold with partners at distance 1, 2, 4, …; then the odd
// ranks hand the result back. log2(p)+2 latencies, full buffer each round:
// the right trade for small messages.
func planRecDoubling(n, rank int) []rdStep {
	if n == 1 {
		return nil
	}
	p := 1
	for p*2 <= n {
		p *= 2
	}
	rem := n - p
	var steps []rdStep
	newRank := rank - rem
	if rank < 2*rem {
		if rank%2 == 0 {
			return []rdStep{{move: rdSend, peer: rank + 1}, {move: rdRecvCopy, peer: rank + 1}}
		}
		steps = append(steps, rdStep{move: rdRecvFold, peer: rank - 1, peerFirst: true})
		newRank = rank / 2
	}
	real := func(nr int) int {
		if nr < rem {
			return 2*nr + 1
		}
		return nr + rem
	}
	for mask := 1; mask < p; mask <<= 1 {
		partner := newRank ^ mask
		steps = append(steps, rdStep{move: rdExchange, peer: real(partner), peerFirst: partner < newRank})
	}
	if rank < 2*rem {
		steps = append(steps, rdStep{move: rdSend, peer: rank - 1})
	}
	return steps
}

// planDissemination is the barrier's schedule: in round k, send to rank+2^k
// and receive from rank-2^k; after ceil(log2 n) rounds every rank has
// (transitively) heard from every other.
func planDissemination(n, rank int) (to, from []int) {
	for d := 1; d < n; d <<= 1 {
		to = append(to, mod(rank+d, n))
		from = append(from, mod(rank-d, n))
	}
	return to, from
}
