package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"
)

// Gossip averaging: each rank keeps its own parameter vector, runs local
// steps on it, and between steps averages it with one peer chosen by a
// PeerSchedule. The pairwise exchange is atomic and cannot deadlock:
//
//   - The initiator marks itself busy with peer p, sends REQUEST(x_i) and
//     waits for the answer (Exchange), or goes on with local steps while
//     it travels (Begin ... Wait), without holding any lock.
//   - The responder's receiver goroutine (one per peer, always reading)
//     answers at once, under the parameter lock: it sets x_j ← (x_j+x_i)/2
//     and sends REPLY((x_j+x_i)/2); the initiator's receiver applies it on
//     arrival, in order with that peer's other messages. If the initiator's
//     vector did not change meanwhile it copies the average, and both end
//     with the same bits (float addition is commutative); the sum of the
//     replicas is unchanged either way.
//   - Nobody waits while holding the lock, and receivers never wait for
//     their own rank's exchanges, so no cycle of waits can form. A rank
//     waiting on its own exchange still serves other peers (dense mode;
//     its own answer is then applied as a change, avg−x_sent, which keeps
//     the sum exact); when two ranks pick each other, the lower rank's
//     request is served and the higher rank's answered BUSY, so exactly
//     one average happens. In sparse mode a waiting rank answers BUSY to
//     everyone else, because the changed-coordinates bookkeeping needs
//     both sides' vectors to be exactly equal after each exchange.
//   - While a rank's compute goroutine is inside a local step (between
//     Read and Apply), merges make its gradient stale; a responder whose
//     step already absorbed MaxStaleness merges (counting the answer to its
//     own exchange in flight) answers BUSY, which bounds staleness. The
//     initiator never waits for a peer's computation, only for its
//     receiver, so a slow peer does not slow the others.
//
// In sparse mode a rank sends only the coordinates it changed since its
// last exchange with that peer (local updates and merges with others).
// Every other coordinate is equal on both sides (they were equal after
// their last exchange and neither side changed it), so averaging those
// alone is exact. Each rank records, per peer, the value a coordinate had
// before its first change since the last exchange with that peer: that is
// the peer's current value of it, which the responder needs for the
// coordinates only it changed.

// GossipTag is the point-to-point tag of every gossip message.
const GossipTag uint32 = 0x60551900

type gossipKind byte

const (
	msgRequest gossipKind = iota + 1 // initiator's parameters or changed coordinates
	msgReply                         // the pairwise average
	msgBusy                          // the responder declined this time
	msgStop                          // a rank asks everyone to stop training
	msgFinal                         // the sender finished; its final parameters
)

var gossipKindNames = [...]string{"?", "request", "reply", "busy", "stop", "final"}

const (
	flagStop   = 1 << 0
	flagSparse = 1 << 1
)

// gossipHeader is kind, flags, 2 reserved bytes, id, distance², norm²; then
// one uint64 step count per rank and a uint32 element count.
const gossipHeader = 1 + 1 + 2 + 4 + 8 + 8

// GossipOptions configure a Gossip. Every rank should use the same.
type GossipOptions struct {
	// Schedule and Seed choose the peer of each round (see GossipPeer).
	Schedule PeerSchedule
	Seed     uint64
	// Sparse sends only the coordinates changed since the last exchange
	// with that peer; local updates must then go through ApplySparse.
	Sparse bool
	// SparseTolerance (sparse mode) stops a coordinate that an average
	// moved by at most this fraction of its magnitude from being passed on
	// to third peers. Averages spread each change through the cluster
	// with ever smaller steps that, compared bitwise, never end; with a
	// tolerance the traffic follows the training's changes instead. The
	// cost: replicas may differ by that fraction on such a coordinate until
	// its next exchange, which makes them equal again. 0 is exact.
	SparseTolerance float64
	// MaxStaleness bounds how many merges a local step may absorb between
	// Read and Apply (its gradient is then that many versions stale); a
	// responder at the bound answers BUSY. 0 means 1.
	MaxStaleness int
	// Timeout bounds each exchange and the final gathering (default: the
	// Comm's timeout). A peer that does not answer within it is dropped.
	Timeout time.Duration
	// Logger receives lost peers and protocol errors.
	Logger *zap.Logger
}

// ExchangeOutcome is what happened to one initiated exchange.
type ExchangeOutcome int

// Exchange outcomes.
const (
	NoPeer   ExchangeOutcome = iota // no usable peer left
	Averaged                        // the pairwise average was applied on both sides
	Declined                        // the peer was busy (or finished); nothing changed
	Lost                            // the peer failed; it was dropped from the peer set
	InFlight                        // begun; Wait tells the outcome
)

func (o ExchangeOutcome) String() string {
	return [...]string{"no-peer", "averaged", "declined", "lost", "in-flight"}[o]
}

// ExchangeResult describes one initiated exchange.
type ExchangeResult struct {
	Peer    int
	Outcome ExchangeOutcome
	// Distance is ‖x_i−x_j‖ before averaging (over the exchanged
	// coordinates, which in sparse mode are all that differ) and Norm is
	// ‖(x_i+x_j)/2‖ over the same coordinates.
	Distance, Norm float64
	Elements       int // coordinates sent in the request
	Err            error
}

// DistanceSample is one averaged exchange seen by its initiator.
type DistanceSample struct {
	Seconds  float64 `json:"seconds"` // since the Gossip started
	Peer     int     `json:"peer"`
	Distance float64 `json:"distance"` // ‖x_i−x_j‖ before averaging
	Norm     float64 `json:"norm"`     // ‖(x_i+x_j)/2‖
}

// GossipStats are one rank's gossip counters.
type GossipStats struct {
	Initiated int `json:"initiated"` // exchanges this rank started
	Averaged  int `json:"averaged"`  // ... that averaged
	Declined  int `json:"declined"`  // ... that the peer answered busy
	Failed    int `json:"failed"`    // ... whose peer was lost
	Served    int `json:"served"`    // requests from peers this rank averaged
	Refused   int `json:"refused"`   // requests answered busy (any reason)
	// RefusedStale counts refusals because the local step in flight had
	// already absorbed MaxStaleness merges.
	RefusedStale int `json:"refused_stale"`
	// Staleness of applied local steps: merges absorbed between Read and
	// Apply.
	Steps         int     `json:"steps"`
	StalenessMax  int     `json:"staleness_max"`
	StalenessMean float64 `json:"staleness_mean"`
	// ElementsSent counts coordinates sent in requests and replies.
	ElementsSent int64            `json:"elements_sent"`
	Distances    []DistanceSample `json:"distances"`
	// Dead are peers dropped after a failure; Finished peers that ended
	// normally, in the order seen.
	Dead     []int `json:"dead"`
	Finished []int `json:"finished"`
}

type peerState int

const (
	peerAlive peerState = iota
	peerFinished
	peerDead
)

type gossipReply struct {
	id       uint32
	kind     gossipKind
	idx      []int32
	vals     []float32
	dist2    float64
	norm2    float64
	received time.Time
}

// Gossip is one rank's end of decentralised parameter averaging. Its
// parameter vector is shared between the caller's local steps (Read/Apply
// or ApplySparse) and the receiver goroutines that serve peers' requests;
// it must not be touched except through those methods while the Gossip
// runs.
type Gossip struct {
	c          *Comm
	opts       GossipOptions
	rank, size int
	log        *zap.Logger
	start      time.Time

	mu         sync.Mutex
	params     []float32
	computing  bool // between Read and Apply
	merged     int  // merges absorbed by the step in flight
	initiating int  // peer of the exchange in flight, or -1
	finished   bool // Finish called: parameters frozen
	stop       bool
	counts     []uint64 // local steps per rank, as last heard
	state      []peerState
	gone       []chan struct{} // closed when a peer is dead or finished
	finals     [][]float32
	snap       []float32           // dense: the parameters sent by the pending exchange
	dirty      []map[int32]float32 // sparse: per peer, coordinate -> value before its first change since the last exchange
	stats      GossipStats
	staleSum   int
	nextID     uint32

	pending  *pendingExchange // the exchange this rank initiated, until answered
	inflight *pendingExchange // the exchange begun and not yet waited for
	closing  bool
	out      []chan []byte // per peer, in the order the state changes that made them

	runCtx  context.Context
	cancel  context.CancelFunc
	readers sync.WaitGroup
	writers sync.WaitGroup
}

// pendingExchange is an initiated exchange awaiting its answer. The answer
// is applied by the receiver goroutine the moment it arrives, in order with
// the peer's other messages: that ordering is what keeps two ranks that pick
// each other consistent (see serveLocked).
type pendingExchange struct {
	peer int
	id   uint32
	sent map[int32]float32 // sparse: the dirty coordinates sent, with their old values
	// snap (dense) is the parameter vector sent; changed says this rank
	// served another peer meanwhile, so the answer is applied as the
	// change avg−snap rather than copied.
	snap    []float32
	changed bool
	start   time.Time
	elems   int
	done    chan gossipReply // buffered; receives the applied answer
}

// NewGossip returns rank c.Rank()'s gossip end over params (which it
// keeps and updates in place). Call Start on every rank before exchanging.
func NewGossip(c *Comm, params []float32, opts GossipOptions) (*Gossip, error) {
	if !(opts.SparseTolerance >= 0 && opts.SparseTolerance < 1) {
		return nil, fmt.Errorf("collective: gossip sparse tolerance %v: want a fraction in [0, 1)", opts.SparseTolerance)
	}
	if opts.MaxStaleness < 0 {
		return nil, fmt.Errorf("collective: gossip max staleness %d: want ≥ 0 (0: the default of 1)", opts.MaxStaleness)
	}
	if opts.MaxStaleness == 0 {
		opts.MaxStaleness = 1
	}
	if opts.Timeout <= 0 {
		opts.Timeout = c.opts.Timeout
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if int64(len(params))*8+1024 > c.opts.MaxGatherBytes {
		return nil, fmt.Errorf("collective: gossip over %d parameters exceeds MaxGatherBytes %d", len(params), c.opts.MaxGatherBytes)
	}
	n := c.Size()
	g := &Gossip{
		c: c, opts: opts, rank: c.Rank(), size: n, log: opts.Logger.With(zap.Int("rank", c.Rank())),
		params: params, initiating: -1, counts: make([]uint64, n), state: make([]peerState, n),
		gone: make([]chan struct{}, n), finals: make([][]float32, n), out: make([]chan []byte, n),
	}
	for p := range n {
		g.gone[p] = make(chan struct{})
		g.out[p] = make(chan []byte, outQueue)
	}
	if opts.Sparse {
		g.dirty = make([]map[int32]float32, n)
		for p := range n {
			if p != g.rank {
				g.dirty[p] = map[int32]float32{}
			}
		}
	}
	return g, nil
}

// outQueue bounds the messages queued for one peer. At most one request,
// one answer, one stop and one final are outstanding per peer, so it never
// fills unless the peer stopped reading.
const outQueue = 16

// Start launches one receiver and one writer per peer. They run until
// Close or ctx ends.
func (g *Gossip) Start(ctx context.Context) {
	g.start = time.Now()
	g.runCtx, g.cancel = context.WithCancel(ctx)
	for p := range g.size {
		if p == g.rank {
			continue
		}
		g.readers.Add(1)
		go g.receive(p)
		g.writers.Add(1)
		go g.write(p)
	}
}

// Close sends what is queued (a final message in particular), then stops
// the receivers and writers. It does not close the Comm.
func (g *Gossip) Close() {
	g.mu.Lock()
	if g.closing || g.cancel == nil {
		g.mu.Unlock()
		return
	}
	g.closing = true
	for p, q := range g.out {
		if p != g.rank {
			close(q)
		}
	}
	g.mu.Unlock()
	g.writers.Wait()
	g.cancel()
	g.readers.Wait()
}

// enqueueLocked queues msg for p; call with g.mu held, so that messages
// leave in the order of the state changes that produced them.
func (g *Gossip) enqueueLocked(p int, msg []byte) {
	if g.closing || g.state[p] == peerDead {
		return
	}
	select {
	case g.out[p] <- msg:
	default:
		g.dropLocked(p, fmt.Errorf("%d messages queued for it: it stopped reading", outQueue))
	}
}

// write sends p's queued messages in order until the queue is closed; a
// failed send drops p and discards the rest.
func (g *Gossip) write(p int) {
	defer g.writers.Done()
	for msg := range g.out[p] {
		g.mu.Lock()
		dead := g.state[p] == peerDead
		g.mu.Unlock()
		if dead {
			continue
		}
		if err := g.c.Send(g.runCtx, p, GossipTag, msg); err != nil && g.runCtx.Err() == nil {
			g.mu.Lock()
			g.dropLocked(p, err)
			g.mu.Unlock()
		}
	}
}

// usable says whether p may be picked: alive and not finished. Call with
// g.mu held.
func (g *Gossip) usable(p int) bool { return g.state[p] == peerAlive }

// Peers returns the ranks still in the peer set (alive, not finished).
func (g *Gossip) Peers() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []int
	for p := range g.size {
		if p != g.rank && g.usable(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// SetSteps records this rank's local step count; it travels with every
// message so each rank knows roughly how much work the cluster has done.
func (g *Gossip) SetSteps(n uint64) {
	g.mu.Lock()
	g.counts[g.rank] = n
	g.mu.Unlock()
}

// Progress returns the sum of every rank's step count as last heard (a
// lower bound on the cluster's work) and whether some rank asked to stop.
func (g *Gossip) Progress() (total uint64, stop bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.counts {
		total += c
	}
	return total, g.stop
}

// Stats returns a copy of the counters.
func (g *Gossip) Stats() GossipStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Distances = append([]DistanceSample(nil), s.Distances...)
	s.Dead = append([]int(nil), s.Dead...)
	s.Finished = append([]int(nil), s.Finished...)
	if s.Steps > 0 {
		s.StalenessMean = float64(g.staleSum) / float64(s.Steps)
	}
	return s
}

// Read copies the parameters into dst and marks the start of a local step:
// merges from now until Apply count as its staleness. Dense mode only.
func (g *Gossip) Read(dst []float32) {
	g.mu.Lock()
	copy(dst, g.params)
	g.computing, g.merged = true, 0
	g.mu.Unlock()
}

// Apply ends the local step begun by Read: update (typically an optimizer
// step with the gradient computed on the copy) runs on the parameters under
// the lock. It returns the step's staleness.
func (g *Gossip) Apply(update func(params []float32)) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dirty != nil {
		panic("collective: Gossip.Apply in sparse mode; use ApplySparse")
	}
	update(g.params)
	if g.pending != nil {
		g.pending.changed = true // an exchange in flight (Begin without Wait)
	}
	return g.endStep()
}

// ApplySparse runs a whole local step under the lock (sparse models read
// and write only a few coordinates, so no copy is taken): touched must
// list every coordinate update may change (duplicates allowed).
func (g *Gossip) ApplySparse(touched []int32, update func(params []float32)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dirty != nil {
		for _, u := range touched {
			if u < 0 || int(u) >= len(g.params) {
				return fmt.Errorf("collective: gossip update touches coordinate %d outside [0,%d)", u, len(g.params))
			}
			g.markDirty(u, -1)
		}
	}
	update(g.params)
	g.endStep()
	return nil
}

func (g *Gossip) endStep() int {
	s := 0
	if g.computing {
		s = g.merged
	}
	g.computing, g.merged = false, 0
	g.stats.Steps++
	g.staleSum += s
	g.stats.StalenessMax = max(g.stats.StalenessMax, s)
	return s
}

// moved says whether an average that took a coordinate from old to new
// must be passed on to other peers (see SparseTolerance).
func (g *Gossip) moved(old, new float32) bool {
	tol := g.opts.SparseTolerance
	if tol == 0 {
		return true
	}
	d := math.Abs(float64(new) - float64(old))
	return d > tol*max(math.Abs(float64(old)), math.Abs(float64(new)))
}

// markDirty records, for every peer but except, the value coordinate u
// has before it changes (if not yet recorded since their last exchange).
func (g *Gossip) markDirty(u int32, except int) {
	v := g.params[u]
	for q, d := range g.dirty {
		if d == nil || q == except {
			continue
		}
		if _, ok := d[u]; !ok {
			d[u] = v
		}
	}
}

// Snapshot copies the parameters into dst under the lock.
func (g *Gossip) Snapshot(dst []float32) {
	g.mu.Lock()
	copy(dst, g.params)
	g.mu.Unlock()
}

// RequestStop sets the stop flag and tells every usable peer at once; the
// flag also travels on every later message.
func (g *Gossip) RequestStop() {
	g.mu.Lock()
	g.stop = true
	var ps []int
	for p := range g.size {
		if p != g.rank && g.usable(p) {
			ps = append(ps, p)
		}
	}
	msg := g.encode(msgStop, 0, 0, 0, nil, nil, false)
	for _, p := range ps {
		g.enqueueLocked(p, msg)
	}
	g.mu.Unlock()
}

// Exchange averages with the peer the schedule gives for round: Begin,
// then Wait. It waits at most Timeout for the answer; a peer that fails is
// dropped from the peer set and logged, and the exchange reports Lost (not
// an error: the others carry on). An error is returned only when ctx ends
// or after Finish.
func (g *Gossip) Exchange(ctx context.Context, round uint64) (ExchangeResult, error) {
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
func (g *Gossip) Begin(ctx context.Context, round uint64) (ExchangeResult, error) {
	if _, err := g.Wait(ctx); err != nil {
		return ExchangeResult{Peer: -1}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.finished || g.closing {
		return ExchangeResult{Peer: -1}, fmt.Errorf("collective: gossip exchange on rank %d after Finish or Close", g.rank)
	}
	p := GossipPeer(g.opts.Schedule, g.opts.Seed, g.rank, g.size, round, g.usable)
	if p < 0 {
		return ExchangeResult{Peer: -1, Outcome: NoPeer}, nil
	}
	g.initiating = p
	g.nextID++
	px := &pendingExchange{peer: p, id: g.nextID, done: make(chan gossipReply, 1), start: time.Now()}
	var msg []byte
	elems := len(g.params)
	if g.dirty != nil {
		px.sent, g.dirty[p] = g.dirty[p], map[int32]float32{}
		idx := make([]int32, 0, len(px.sent))
		vals := make([]float32, 0, len(px.sent))
		for u := range px.sent {
			idx = append(idx, u)
			vals = append(vals, g.params[u])
		}
		msg = g.encode(msgRequest, px.id, 0, 0, idx, vals, true)
		elems = len(idx)
	} else {
		msg = g.encode(msgRequest, px.id, 0, 0, nil, g.params, false)
		if len(g.snap) != len(g.params) {
			g.snap = make([]float32, len(g.params))
		}
		copy(g.snap, g.params)
		px.snap = g.snap
	}
	px.elems = elems
	g.pending, g.inflight = px, px
	g.stats.Initiated++
	g.stats.ElementsSent += int64(elems)
	g.enqueueLocked(p, msg)
	return ExchangeResult{Peer: p, Outcome: InFlight, Elements: elems}, nil
}

// InFlight says whether the exchange last begun is still unanswered (and
// within its deadline): a caller that never waits for communication skips
// a round then, rather than calling Begin, which would wait.
func (g *Gossip) InFlight() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending != nil && g.pending == g.inflight && time.Since(g.pending.start) < g.opts.Timeout
}

// Wait waits for the exchange in flight (if any; Peer -1 and NoPeer if
// none) and returns its result. Its deadline is Timeout after Begin.
func (g *Gossip) Wait(ctx context.Context) (ExchangeResult, error) {
	g.mu.Lock()
	px := g.inflight
	g.inflight = nil
	g.mu.Unlock()
	if px == nil {
		return ExchangeResult{Peer: -1, Outcome: NoPeer}, nil
	}
	p := px.peer
	res := ExchangeResult{Peer: p, Elements: px.elems}
	wait, cancel := context.WithDeadline(ctx, px.start.Add(g.opts.Timeout))
	defer cancel()
	var rep gossipReply
	var err error
	select {
	case rep = <-px.done:
	case <-g.gone[p]:
		err = fmt.Errorf("rank %d left the peer set while rank %d waited for its answer", p, g.rank)
	case <-wait.Done():
		err = fmt.Errorf("rank %d did not answer a gossip request within %v", p, g.opts.Timeout)
	}
	if err != nil {
		g.mu.Lock()
		if g.pending != px { // answered after all, just now
			g.mu.Unlock()
			rep, err = <-px.done, nil
		} else {
			g.abandonLocked(px)
			if ctx.Err() != nil {
				g.mu.Unlock()
				return res, fmt.Errorf("collective: gossip exchange of rank %d with rank %d: %w", g.rank, p, ctx.Err())
			}
			g.stats.Failed++
			g.dropLocked(p, err)
			g.mu.Unlock()
			res.Outcome, res.Err = Lost, err
			return res, nil
		}
	}
	if rep.kind != msgReply {
		res.Outcome = Declined
		return res, nil
	}
	res.Outcome = Averaged
	res.Distance, res.Norm = math.Sqrt(rep.dist2), math.Sqrt(rep.norm2)
	return res, nil
}

// abandonLocked ends px without an average: the coordinates it sent are
// dirty again (keeping the older recorded values).
func (g *Gossip) abandonLocked(px *pendingExchange) {
	g.pending, g.initiating = nil, -1
	for u, v := range px.sent {
		if _, ok := g.dirty[px.peer][u]; !ok {
			g.dirty[px.peer][u] = v
		}
	}
	px.sent = nil
}

// answerLocked applies p's answer to the pending exchange (if it is the
// answer to it) and wakes the initiator.
func (g *Gossip) answerLocked(p int, m gossipReply) {
	px := g.pending
	if px == nil || px.peer != p || px.id != m.id {
		return // an answer to an exchange abandoned after a timeout
	}
	if m.kind != msgReply {
		g.abandonLocked(px)
		g.stats.Declined++
		px.done <- m
		return
	}
	if g.dirty != nil {
		for i, u := range m.idx {
			if u < 0 || int(u) >= len(g.params) {
				g.abandonLocked(px)
				g.dropLocked(p, fmt.Errorf("gossip reply with coordinate %d outside [0,%d)", u, len(g.params)))
				return
			}
			if g.params[u] != m.vals[i] {
				if g.moved(g.params[u], m.vals[i]) {
					g.markDirty(u, p)
				}
				g.params[u] = m.vals[i]
			}
		}
	} else {
		if len(m.vals) != len(g.params) {
			g.abandonLocked(px)
			g.dropLocked(p, fmt.Errorf("gossip reply of %d values for %d parameters", len(m.vals), len(g.params)))
			return
		}
		if px.changed {
			// Served others meanwhile: add this exchange's change, which
			// keeps the replicas' sum exact.
			for i, a := range m.vals {
				g.params[i] += a - px.snap[i]
			}
		} else {
			copy(g.params, m.vals)
		}
	}
	g.pending, g.initiating = nil, -1
	if g.computing {
		g.merged++
	}
	g.stats.Averaged++
	g.stats.Distances = append(g.stats.Distances, DistanceSample{
		Seconds: m.received.Sub(g.start).Seconds(), Peer: p, Distance: math.Sqrt(m.dist2), Norm: math.Sqrt(m.norm2)})
	px.done <- m
}

// receive reads p's messages until the link ends or the Gossip closes.
func (g *Gossip) receive(p int) {
	defer g.readers.Done()
	for {
		b, err := g.c.Recv(g.runCtx, p, GossipTag)
		if err != nil {
			if g.runCtx.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				continue // an idle link: nobody picked us for a while
			}
			g.mu.Lock()
			g.dropLocked(p, err)
			g.mu.Unlock()
			return
		}
		now := time.Now()
		m, err := g.decode(b)
		if err != nil {
			g.mu.Lock()
			g.dropLocked(p, fmt.Errorf("unreadable gossip message: %w", err))
			g.mu.Unlock()
			return
		}
		g.mu.Lock()
		for r, c := range m.counts {
			g.counts[r] = max(g.counts[r], c)
		}
		g.stop = g.stop || m.stop
		switch m.kind {
		case msgRequest:
			g.enqueueLocked(p, g.serveLocked(p, m))
		case msgReply, msgBusy:
			m.received = now
			g.answerLocked(p, m.gossipReply)
		case msgFinal:
			if len(m.vals) > 0 {
				g.finals[p] = m.vals
			}
			if g.state[p] == peerAlive {
				g.state[p] = peerFinished
				g.stats.Finished = append(g.stats.Finished, p)
				close(g.gone[p])
			}
		}
		g.mu.Unlock()
	}
}

// dropLocked removes p from the peer set after err, unless it already left.
func (g *Gossip) dropLocked(p int, err error) {
	if g.state[p] != peerAlive {
		return
	}
	g.state[p] = peerDead
	g.stats.Dead = append(g.stats.Dead, p)
	close(g.gone[p])
	g.log.Warn("gossip peer lost; dropped from the peer set", zap.Int("peer", p), zap.Error(err))
}

// serveLocked answers p's request: the average, or busy. When two ranks
// picked each other the lower rank's request is served and the higher
// rank's declined. Messages between two
// ranks arrive in order and answers are applied on arrival, so a request
// that was already served before its sender's own request arrived is
// settled first.
func (g *Gossip) serveLocked(p int, m decoded) []byte {
	busy := func() []byte {
		g.stats.Refused++
		return g.encode(msgBusy, m.id, 0, 0, nil, nil, false)
	}
	switch {
	case g.finished:
		return busy()
	case g.state[p] == peerDead:
		return busy() // dropped after a timeout: it gets no answer, so nothing may change
	case g.initiating == p && p > g.rank:
		return busy() // two ranks picked each other: the lower rank's request wins
	case g.initiating >= 0 && g.initiating != p && g.dirty != nil:
		return busy() // sparse exchanges stay strictly one at a time (see below)
	case g.computing && g.merged+boolInt(g.pending != nil) >= g.opts.MaxStaleness:
		// At the bound, counting the answer to this rank's own exchange
		// in flight, which will land during the step and cannot be
		// refused.
		g.stats.RefusedStale++
		return busy()
	case m.sparse != (g.dirty != nil):
		g.log.Error("gossip peer uses another exchange mode; refusing", zap.Int("peer", p), zap.Bool("peer_sparse", m.sparse))
		return busy()
	case !m.sparse && len(m.vals) != len(g.params):
		g.log.Error("gossip peer sent a parameter vector of another length; refusing", zap.Int("peer", p), zap.Int("got", len(m.vals)), zap.Int("want", len(g.params)))
		return busy()
	}
	var dist2, norm2 float64
	var out []byte
	if m.sparse {
		if px := g.pending; px != nil && px.peer == p {
			// Two ranks picked each other and this (higher) rank serves;
			// its own request will be declined, so the coordinates it sent
			// are still different from the peer's: average them now.
			for u, v := range px.sent {
				if _, ok := g.dirty[p][u]; !ok {
					g.dirty[p][u] = v
				}
			}
			px.sent = nil
		}
		d := g.dirty[p]
		idx := make([]int32, 0, len(m.idx)+len(d))
		vals := make([]float32, 0, len(m.idx)+len(d))
		avg := func(u int32, theirs float32) {
			mine := g.params[u]
			a := (mine + theirs) * 0.5
			dd := float64(mine) - float64(theirs)
			dist2 += dd * dd
			norm2 += float64(a) * float64(a)
			if a != mine {
				if g.moved(mine, a) {
					g.markDirty(u, p)
				}
				g.params[u] = a
			}
			idx = append(idx, u)
			vals = append(vals, a)
		}
		for _, u := range m.idx {
			if u < 0 || int(u) >= len(g.params) {
				g.log.Error("gossip peer sent a coordinate out of range; refusing", zap.Int("peer", p), zap.Int32("coordinate", u))
				return busy()
			}
		}
		for i, u := range m.idx {
			delete(d, u)
			avg(u, m.vals[i])
		}
		// Coordinates only this rank changed: the peer still has the
		// value they had before that change.
		for u, theirs := range d {
			avg(u, theirs)
		}
		clear(d)
		out = g.encode(msgReply, m.id, dist2, norm2, idx, vals, true)
		g.stats.ElementsSent += int64(len(idx))
	} else {
		for i, theirs := range m.vals {
			mine := g.params[i]
			a := (mine + theirs) * 0.5
			dd := float64(mine) - float64(theirs)
			dist2 += dd * dd
			norm2 += float64(a) * float64(a)
			g.params[i] = a
		}
		out = g.encode(msgReply, m.id, dist2, norm2, nil, g.params, false)
		g.stats.ElementsSent += int64(len(g.params))
	}
	if g.computing {
		g.merged++
	}
	if g.pending != nil {
		g.pending.changed = true
	}
	g.stats.Served++
	return out
}

// Finish freezes this rank's parameters, sends them to every peer still in
// the cluster (finished ones included: they wait for ours) and waits up to
// Timeout for theirs. It returns every rank's final parameters that
// arrived (dense mode; nil entries for ranks lost or, in sparse mode, for
// everyone but this rank). Exchanges are refused from now on.
func (g *Gossip) Finish(ctx context.Context) [][]float32 {
	g.mu.Lock()
	g.finished = true
	var vals []float32
	if g.dirty == nil {
		vals = g.params
	}
	msg := g.encode(msgFinal, 0, 0, 0, nil, vals, false)
	var ps []int
	for p := range g.size {
		if p != g.rank && g.state[p] != peerDead {
			ps = append(ps, p)
			g.enqueueLocked(p, msg)
		}
	}
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, g.opts.Timeout)
	defer cancel()
	for _, p := range ps {
		select {
		case <-g.gone[p]:
		case <-ctx.Done():
			g.mu.Lock()
			g.dropLocked(p, fmt.Errorf("no final parameters within %v: %w", g.opts.Timeout, ctx.Err()))
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([][]float32, g.size)
	for p := range g.size {
		if p == g.rank {
			out[p] = append([]float32(nil), g.params...)
		} else if g.state[p] == peerFinished && g.finals[p] != nil {
			out[p] = g.finals[p]
		}
	}
	return out
}

type decoded struct {
	gossipReply
	sparse bool
	stop   bool
	counts []uint64
}

// encode builds a message; call with g.mu held (it reads counts and stop).
// Dense messages carry vals whole; sparse ones (idx, vals) pairs.
func (g *Gossip) encode(kind gossipKind, id uint32, dist2, norm2 float64, idx []int32, vals []float32, sparse bool) []byte {
	per := 4
	if sparse {
		per = 8
	}
	b := make([]byte, gossipHeader+8*g.size+4+per*len(vals))
	b[0] = byte(kind)
	if g.stop {
		b[1] |= flagStop
	}
	if sparse {
		b[1] |= flagSparse
	}
	binary.LittleEndian.PutUint32(b[4:], id)
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(dist2))
	binary.LittleEndian.PutUint64(b[16:], math.Float64bits(norm2))
	o := gossipHeader
	for _, c := range g.counts {
		binary.LittleEndian.PutUint64(b[o:], c)
		o += 8
	}
	binary.LittleEndian.PutUint32(b[o:], uint32(len(vals)))
	o += 4
	// Raw little-endian memory, as every collective payload (New refuses
	// big-endian hosts).
	if sparse {
		o += copy(b[o:], sliceBytes(idx))
	}
	copy(b[o:], sliceBytes(vals))
	return b
}

// sliceBytes views a slice of 4-byte elements as its bytes.
func sliceBytes[T int32 | float32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// decode parses a message, checking every length against the bytes
// present before allocating.
func (g *Gossip) decode(b []byte) (decoded, error) {
	var m decoded
	if len(b) < gossipHeader+8*g.size+4 {
		return m, fmt.Errorf("%d-byte message is shorter than its %d-byte header", len(b), gossipHeader+8*g.size+4)
	}
	m.kind = gossipKind(b[0])
	if m.kind < msgRequest || m.kind > msgFinal {
		return m, fmt.Errorf("unknown message kind %d", b[0])
	}
	if b[1]&^(flagStop|flagSparse) != 0 || b[2]|b[3] != 0 {
		return m, fmt.Errorf("%s message with unknown flags %#x", gossipKindNames[m.kind], b[1:4])
	}
	m.stop, m.sparse = b[1]&flagStop != 0, b[1]&flagSparse != 0
	m.id = binary.LittleEndian.Uint32(b[4:])
	m.dist2 = math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	m.norm2 = math.Float64frombits(binary.LittleEndian.Uint64(b[16:]))
	o := gossipHeader
	m.counts = make([]uint64, g.size)
	for r := range m.counts {
		m.counts[r] = binary.LittleEndian.Uint64(b[o:])
		o += 8
	}
	n := int(binary.LittleEndian.Uint32(b[o:]))
	o += 4
	per := 4
	if m.sparse {
		per = 8
	}
	if rest := len(b) - o; rest != n*per || n > len(g.params) {
		return m, fmt.Errorf("%s message announces %d elements (%d bytes each) but carries %d bytes (model has %d parameters)", gossipKindNames[m.kind], n, per, rest, len(g.params))
	}
	if m.sparse {
		m.idx = make([]int32, n)
		o += copy(sliceBytes(m.idx), b[o:])
	}
	if n > 0 {
		m.vals = make([]float32, n)
		copy(sliceBytes(m.vals), b[o:])
	}
	return m, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
