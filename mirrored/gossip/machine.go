package gossip

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"go.uber.org/zap"
)

// Outcome is what happened to one initiated exchange.
type Outcome int

// Exchange outcomes.
const (
	NoPeer   Outcome = iota // no usable peer left
	Averaged                // the pairwise average was applied on both sides
	Declined                // the peer was busy (or finished); nothing changed
	Lost                    // the peer failed; it was dropped from the peer set
	InFlight                // begun; Wait tells the outcome
)

func (o Outcome) String() string {
	return [...]string{"no-peer", "averaged", "declined", "lost", "in-flight"}[o]
}

// Result describes one initiated exchange.
type Result struct {
	Peer    int
	Outcome Outcome
	// Distance is ‖x_i−x_j‖ before averaging (over the exchanged
	// coordinates, which in sparse mode are all that differ) and Norm is
	// ‖(x_i+x_j)/2‖ over the same coordinates.
	Distance, Norm float64
	Elements       int // coordinates sent in the request
	Err            error
}

// DistanceSample is one averaged exchange seen by its initiator.
type DistanceSample struct {
	Seconds  float64 `json:"seconds"` // since the Node started
	Peer     int     `json:"peer"`
	Distance float64 `json:"distance"` // ‖x_i−x_j‖ before averaging
	Norm     float64 `json:"norm"`     // ‖(x_i+x_j)/2‖
}

// Stats are one rank's gossip counters.
type Stats struct {
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

// send is a message for the driver to queue for rank to.
type send struct {
	to  int
	msg []byte
}

// effects is what one input asks of the machine's driver: queue sends (in
// this order: messages to one peer must leave in the order of the state
// changes that made them), end every wait on the peers that left the peer
// set (dead or finished), and hand settled to the caller waiting for the
// pending exchange.
type effects struct {
	sends   []send
	left    []int
	settled *settlement
}

// settlement is the end of the pending exchange id.
type settlement struct {
	id  uint32
	res Result
}

// pending is the exchange this rank initiated, until its answer arrives
// or it is given up.
type pending struct {
	peer  int
	id    uint32
	elems int
	sent  map[int32]float32 // sparse: the dirty coordinates sent, with their old values
	// snap (dense) is the parameter vector sent; changed says this rank
	// served another peer or stepped meanwhile, so the answer is applied as
	// the change avg−snap rather than copied.
	snap    []float32
	changed bool
}

// machine is one rank's gossip averaging as a deterministic state machine:
// no goroutines, no locks, no network, no clock (inputs carry the time
// where a figure needs it). Each input method changes the state and
// returns the effects its driver (a Node, or a test) must carry out.
type machine struct {
	rank, size int
	opts       Options
	log        *zap.Logger
	start      time.Time // distance samples are timed from it

	params    []float32
	computing bool // between read and apply
	merged    int  // merges absorbed by the step in flight
	finished  bool // parameters frozen
	stop      bool
	asker     int      // the lowest rank asked from outside to stop, -1 for none
	counts    []uint64 // local steps per rank, as last heard
	state     []peerState
	finals    [][]float32
	snap      []float32           // dense: the buffer behind pending.snap
	dirty     []map[int32]float32 // sparse: per peer, coordinate -> value before its first change since the last exchange
	stats     Stats
	staleSum  int
	nextID    uint32
	pending   *pending
}

// newMachine returns rank's machine among size ranks over params (kept and
// updated in place). opts must be valid.
func newMachine(rank, size int, params []float32, opts Options, log *zap.Logger) *machine {
	m := &machine{
		rank: rank, size: size, opts: opts, log: log, params: params, asker: -1,
		counts: make([]uint64, size), state: make([]peerState, size), finals: make([][]float32, size),
	}
	if opts.Sparse {
		m.dirty = make([]map[int32]float32, size)
		for p := range size {
			if p != rank {
				m.dirty[p] = map[int32]float32{}
			}
		}
	}
	return m
}

// usable says whether p may be picked: alive and not finished.
func (m *machine) usable(p int) bool { return m.state[p] == peerAlive }

func (m *machine) dead(p int) bool { return m.state[p] == peerDead }

// peers returns the ranks still in the peer set.
func (m *machine) peers() []int {
	var ps []int
	for p := range m.size {
		if p != m.rank && m.usable(p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// progress returns the sum of every rank's step count as last heard and
// the stop flag.
func (m *machine) progress() (total uint64, stop bool) {
	for _, c := range m.counts {
		total += c
	}
	return total, m.stop
}

// statsCopy returns the counters, sharing no memory with the machine.
func (m *machine) statsCopy() Stats {
	s := m.stats
	s.Distances = slices.Clone(s.Distances)
	s.Dead = slices.Clone(s.Dead)
	s.Finished = slices.Clone(s.Finished)
	if s.Steps > 0 {
		s.StalenessMean = float64(m.staleSum) / float64(s.Steps)
	}
	return s
}

// encode stamps msg with this rank's step counts, stop flag and the stop's
// asker, and returns its bytes.
func (m *machine) encode(msg message) []byte {
	msg.counts, msg.stop = m.counts, m.stop
	if m.asker >= 0 && m.asker < math.MaxUint16 { // beyond, the asker goes unnamed
		msg.asker = uint16(m.asker + 1)
	}
	return msg.encode()
}

// heardAsker takes a stop's asker, keeping the lowest (-1: none).
func (m *machine) heardAsker(r int) {
	if r >= 0 && (m.asker < 0 || r < m.asker) {
		m.asker = r
	}
}

// queue adds msg for p to e, unless p is dead.
func (m *machine) queue(e *effects, p int, msg []byte) {
	if !m.dead(p) {
		e.sends = append(e.sends, send{p, msg})
	}
}

// drop removes p from the peer set after err, unless it already left.
func (m *machine) drop(p int, err error) effects {
	if m.state[p] != peerAlive {
		return effects{}
	}
	m.state[p] = peerDead
	m.stats.Dead = append(m.stats.Dead, p)
	m.log.Warn("gossip peer lost; dropped from the peer set", zap.Int("peer", p), zap.Error(err))
	return effects{left: []int{p}}
}

// read copies the parameters into dst and marks the start of a local step:
// merges from now until apply count as its staleness.
func (m *machine) read(dst []float32) {
	copy(dst, m.params)
	m.computing, m.merged = true, 0
}

// apply ends the local step begun by read with update and returns its
// staleness. Calling it in sparse mode is a programmer error.
func (m *machine) apply(update func(params []float32)) int {
	if m.dirty != nil {
		panic("gossip: Apply in sparse mode; use ApplySparse")
	}
	update(m.params)
	if m.pending != nil {
		m.pending.changed = true // an exchange in flight (Begin without Wait)
	}
	return m.endStep()
}

// applySparse runs a whole local step; touched lists every coordinate
// update may change.
func (m *machine) applySparse(touched []int32, update func(params []float32)) error {
	if m.dirty != nil {
		for _, u := range touched {
			if u < 0 || int(u) >= len(m.params) {
				return fmt.Errorf("gossip: update touches coordinate %d outside [0,%d)", u, len(m.params))
			}
			m.markDirty(u, -1)
		}
	}
	update(m.params)
	m.endStep()
	return nil
}

func (m *machine) endStep() int {
	s := 0
	if m.computing {
		s = m.merged
	}
	m.computing, m.merged = false, 0
	m.stats.Steps++
	m.staleSum += s
	m.stats.StalenessMax = max(m.stats.StalenessMax, s)
	return s
}

// moved says whether an average that took a coordinate from old to new
// must be passed on to other peers (see Options.SparseTolerance).
func (m *machine) moved(old, new float32) bool {
	tol := m.opts.SparseTolerance
	if tol == 0 {
		return true
	}
	d := math.Abs(float64(new) - float64(old))
	return d > tol*max(math.Abs(float64(old)), math.Abs(float64(new)))
}

// markDirty records, for every peer but except, the value coordinate u
// has before it changes (if not yet recorded since their last exchange).
func (m *machine) markDirty(u int32, except int) {
	v := m.params[u]
	for q, d := range m.dirty {
		if d == nil || q == except {
			continue
		}
		if _, ok := d[u]; !ok {
			d[u] = v
		}
	}
}

// requestStop sets the stop flag and tells every usable peer at once; the
// flag also travels on every later message. asked says this rank was asked
// from outside (SIGTERM): it is then named as the stop's asker.
func (m *machine) requestStop(asked bool) effects {
	m.stop = true
	if asked {
		m.heardAsker(m.rank)
	}
	var e effects
	msg := m.encode(message{kind: msgStop})
	for _, p := range m.peers() {
		m.queue(&e, p, msg)
	}
	return e
}

// begin starts the exchange of round with the peer the schedule gives;
// pendingID then names it. Peer -1 (NoPeer) when nobody is usable.
func (m *machine) begin(round uint64) (Result, effects, error) {
	switch {
	case m.finished:
		return Result{Peer: -1}, effects{}, fmt.Errorf("gossip: exchange on rank %d after Finish", m.rank)
	case m.pending != nil:
		return Result{Peer: -1}, effects{}, fmt.Errorf("gossip: exchange on rank %d while exchange %d with rank %d is pending", m.rank, m.pending.id, m.pending.peer)
	}
	p := m.opts.Schedule.Peer(m.opts.Seed, m.rank, m.size, round, m.usable)
	if p < 0 {
		return Result{Peer: -1, Outcome: NoPeer}, effects{}, nil
	}
	m.nextID++
	px := &pending{peer: p, id: m.nextID}
	req := message{kind: msgRequest, id: px.id, sparse: m.dirty != nil}
	if req.sparse {
		px.sent, m.dirty[p] = m.dirty[p], map[int32]float32{}
		req.idx = slices.Sorted(maps.Keys(px.sent))
		req.vals = make([]float32, len(req.idx))
		for i, u := range req.idx {
			req.vals[i] = m.params[u]
		}
	} else {
		req.vals = m.params
		if len(m.snap) != len(m.params) {
			m.snap = make([]float32, len(m.params))
		}
		copy(m.snap, m.params)
		px.snap = m.snap
	}
	px.elems = len(req.vals)
	m.pending = px
	m.stats.Initiated++
	m.stats.ElementsSent += int64(px.elems)
	var e effects
	m.queue(&e, p, m.encode(req))
	return Result{Peer: p, Outcome: InFlight, Elements: px.elems}, e, nil
}

// pendingID names the pending exchange (0: none).
func (m *machine) pendingID() uint32 {
	if m.pending == nil {
		return 0
	}
	return m.pending.id
}

// abandon ends pending exchange id without an average and without blaming
// the peer (the caller gave up): the coordinates it sent are dirty again,
// keeping the older recorded values.
func (m *machine) abandon(id uint32) {
	px := m.pending
	if px == nil || px.id != id {
		return
	}
	m.pending = nil
	m.abandonSent(px)
}

// abandonSent marks the coordinates px sent dirty again for its peer,
// keeping the older recorded values.
func (m *machine) abandonSent(px *pending) {
	for u, v := range px.sent {
		if _, ok := m.dirty[px.peer][u]; !ok {
			m.dirty[px.peer][u] = v
		}
	}
	px.sent = nil
}

// lose ends pending exchange id because its peer failed (err): the peer is
// dropped and the exchange settles as Lost.
func (m *machine) lose(id uint32, err error) effects {
	px := m.pending
	if px == nil || px.id != id {
		return effects{}
	}
	m.abandon(id)
	m.stats.Failed++
	e := m.drop(px.peer, err)
	e.settled = &settlement{id, Result{Peer: px.peer, Outcome: Lost, Elements: px.elems, Err: err}}
	return e
}

// receive takes msg, decoded, from peer from; now times its distance
// sample if it answers the pending exchange.
func (m *machine) receive(from int, msg *message, now time.Time) effects {
	for r, c := range msg.counts {
		m.counts[r] = max(m.counts[r], c)
	}
	m.stop = m.stop || msg.stop
	m.heardAsker(int(msg.asker) - 1)
	var e effects
	switch msg.kind {
	case msgRequest:
		m.queue(&e, from, m.serve(from, msg))
	case msgReply, msgBusy:
		e = m.answer(from, msg, now)
	case msgFinal:
		if len(msg.vals) > 0 {
			m.finals[from] = msg.vals
		}
		if m.state[from] == peerAlive {
			m.state[from] = peerFinished
			m.stats.Finished = append(m.stats.Finished, from)
			e.left = append(e.left, from)
		}
	}
	return e
}

// answer applies p's answer to the pending exchange, if it is the answer
// to it (else it answers an exchange given up after a timeout).
func (m *machine) answer(p int, msg *message, now time.Time) effects {
	px := m.pending
	if px == nil || px.peer != p || px.id != msg.id {
		return effects{}
	}
	res := Result{Peer: p, Elements: px.elems}
	if msg.kind != msgReply {
		m.abandon(px.id)
		m.stats.Declined++
		res.Outcome = Declined
		return effects{settled: &settlement{px.id, res}}
	}
	if err := m.merge(px, msg); err != nil {
		return m.lose(px.id, err)
	}
	m.pending = nil
	if m.computing {
		m.merged++
	}
	res.Outcome, res.Distance, res.Norm = Averaged, math.Sqrt(msg.dist2), math.Sqrt(msg.norm2)
	m.stats.Averaged++
	m.stats.Distances = append(m.stats.Distances, DistanceSample{
		Seconds: now.Sub(m.start).Seconds(), Peer: p, Distance: res.Distance, Norm: res.Norm})
	return effects{settled: &settlement{px.id, res}}
}

// merge applies reply msg to px's exchange, or changes nothing and says
// why it cannot.
func (m *machine) merge(px *pending, msg *message) error {
	if m.dirty != nil {
		if !msg.sparse {
			return errors.New("dense gossip reply to a sparse request")
		}
		if u, ok := outside(msg.idx, len(m.params)); ok {
			return fmt.Errorf("gossip reply with coordinate %d outside [0,%d)", u, len(m.params))
		}
		for i, u := range msg.idx {
			if m.params[u] != msg.vals[i] {
				if m.moved(m.params[u], msg.vals[i]) {
					m.markDirty(u, px.peer)
				}
				m.params[u] = msg.vals[i]
			}
		}
		return nil
	}
	if msg.sparse || len(msg.vals) != len(m.params) {
		return fmt.Errorf("gossip reply of %d values for %d parameters", len(msg.vals), len(m.params))
	}
	if px.changed {
		// Served others or stepped meanwhile: add this exchange's change,
		// which keeps the replicas' sum exact.
		for i, a := range msg.vals {
			m.params[i] += a - px.snap[i]
		}
	} else {
		copy(m.params, msg.vals)
	}
	return nil
}

// outside returns the first index not in [0, n).
func outside(idx []int32, n int) (int32, bool) {
	for _, u := range idx {
		if u < 0 || int(u) >= n {
			return u, true
		}
	}
	return 0, false
}

// finish freezes the parameters and sends them (dense mode; an empty final
// message in sparse mode) to every peer not dead, finished ones included:
// they wait for ours. Exchanges are refused from now on.
func (m *machine) finish() effects {
	m.finished = true
	final := message{kind: msgFinal}
	if m.dirty == nil {
		final.vals = m.params
	}
	msg := m.encode(final)
	var e effects
	for p := range m.size {
		if p != m.rank {
			m.queue(&e, p, msg)
		}
	}
	return e
}

// finalParams returns every rank's final parameters that arrived (nil for
// ranks lost or, in sparse mode, for everyone but this rank).
func (m *machine) finalParams() [][]float32 {
	out := make([][]float32, m.size)
	for p := range m.size {
		if p == m.rank {
			out[p] = slices.Clone(m.params)
		} else if m.state[p] == peerFinished && m.finals[p] != nil {
			out[p] = m.finals[p]
		}
	}
	return out
}
