package gossip

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
)

// outQueue bounds the messages queued for one peer. At most one request,
// one answer, one stop and one final are outstanding per peer, so it never
// fills unless the peer stopped reading.
const outQueue = 16

// Node is one rank's end of decentralised parameter averaging: the
// averaging state machine driven over a collective.Comm's point-to-point
// messages (tag Tag). Its parameter vector is shared between the caller's
// local steps (Read/Apply or ApplySparse) and the receiver goroutines that
// serve peers' requests; it must not be touched except through those
// methods while the Node runs.
type Node struct {
	c       *collective.Comm
	rank    int
	maxVals int // the model's parameter count: the most a message may carry
	timeout time.Duration

	mu       sync.Mutex // guards m and everything below
	m        *machine
	pending  *exchange // the exchange this rank initiated, until answered
	inflight *exchange // the exchange begun and not yet waited for
	closing  bool
	gone     []chan struct{} // closed when a peer is dead or finished
	out      []chan []byte   // per peer, in the order the state changes that made them

	runCtx  context.Context
	cancel  context.CancelFunc
	readers sync.WaitGroup
	writers sync.WaitGroup
}

// exchange is the caller's side of an initiated exchange.
type exchange struct {
	peer, elems int
	id          uint32
	start       time.Time
	done        chan Result // buffered; receives the settled result
}

// New returns rank c.Rank()'s gossip node over params (which it keeps and
// updates in place). Start it on every rank before exchanging.
func New(c *collective.Comm, params []float32, opts Options) (*Node, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	co := c.Options()
	if opts.Timeout <= 0 {
		opts.Timeout = co.Timeout
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if int64(len(params))*8+1024 > co.MaxGatherBytes {
		return nil, fmt.Errorf("gossip: %d parameters exceed the Comm's MaxGatherBytes %d", len(params), co.MaxGatherBytes)
	}
	n := c.Size()
	log := opts.Logger.With(zap.Int("rank", c.Rank()))
	g := &Node{
		c: c, rank: c.Rank(), maxVals: len(params), timeout: opts.Timeout,
		m:    newMachine(c.Rank(), n, params, opts, log),
		gone: make([]chan struct{}, n), out: make([]chan []byte, n),
	}
	for p := range n {
		g.gone[p] = make(chan struct{})
		g.out[p] = make(chan []byte, outQueue)
	}
	return g, nil
}

// Start launches one receiver and one writer per peer. They run until
// Close or ctx ends.
func (g *Node) Start(ctx context.Context) {
	g.mu.Lock()
	g.m.start = time.Now()
	g.mu.Unlock()
	g.runCtx, g.cancel = context.WithCancel(ctx)
	for p := range g.m.size {
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
func (g *Node) Close() {
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

// carryOutLocked does what the machine asked: queue its messages, end the
// waits on peers that left, hand a settled exchange to its waiter.
func (g *Node) carryOutLocked(e effects) {
	for _, s := range e.sends {
		g.enqueueLocked(s.to, s.msg)
	}
	for _, p := range e.left {
		close(g.gone[p])
	}
	if s := e.settled; s != nil && g.pending != nil && g.pending.id == s.id {
		g.pending.done <- s.res
		g.pending = nil
	}
}

// enqueueLocked queues msg for p; call with g.mu held, so that messages
// leave in the order of the state changes that produced them.
func (g *Node) enqueueLocked(p int, msg []byte) {
	if g.closing || g.m.dead(p) {
		return
	}
	select {
	case g.out[p] <- msg:
	default:
		g.carryOutLocked(g.m.drop(p, fmt.Errorf("%d messages queued for it: it stopped reading", outQueue)))
	}
}

// write sends p's queued messages in order until the queue is closed; a
// failed send drops p and discards the rest.
func (g *Node) write(p int) {
	defer g.writers.Done()
	for msg := range g.out[p] {
		g.mu.Lock()
		dead := g.m.dead(p)
		g.mu.Unlock()
		if dead {
			continue
		}
		if err := g.c.Send(g.runCtx, p, Tag, msg); err != nil && g.runCtx.Err() == nil {
			g.fail(p, err)
		}
	}
}

// receive reads p's messages until the link ends, a message is unreadable
// or the Node closes.
func (g *Node) receive(p int) {
	defer g.readers.Done()
	for {
		b, err := g.c.Recv(g.runCtx, p, Tag)
		if err != nil {
			if g.runCtx.Err() != nil {
				return
			}
			if errors.Is(err, context.DeadlineExceeded) {
				continue // an idle link: nobody picked us for a while
			}
			g.fail(p, err)
			return
		}
		now := time.Now()
		msg, err := decode(b, g.m.size, g.maxVals) // size and maxVals never change
		if err != nil {
			g.fail(p, fmt.Errorf("unreadable gossip message: %w", err))
			return
		}
		g.mu.Lock()
		g.carryOutLocked(g.m.receive(p, &msg, now))
		g.mu.Unlock()
	}
}

// fail drops p from the peer set after err.
func (g *Node) fail(p int, err error) {
	g.mu.Lock()
	g.carryOutLocked(g.m.drop(p, err))
	g.mu.Unlock()
}

// Peers returns the ranks still in the peer set (alive, not finished).
func (g *Node) Peers() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.peers()
}

// SetSteps records this rank's local step count; it travels with every
// message so each rank knows roughly how much work the cluster has done.
func (g *Node) SetSteps(n uint64) {
	g.mu.Lock()
	g.m.counts[g.rank] = n
	g.mu.Unlock()
}

// Progress returns the sum of every rank's step count as last heard (a
// lower bound on the cluster's work) and whether some rank asked to stop.
func (g *Node) Progress() (total uint64, stop bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.progress()
}

// Stats returns a copy of the counters.
func (g *Node) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.statsCopy()
}

// Read copies the parameters into dst and marks the start of a local step:
// merges from now until Apply count as its staleness. Dense mode only.
func (g *Node) Read(dst []float32) {
	g.mu.Lock()
	g.m.read(dst)
	g.mu.Unlock()
}

// Apply ends the local step begun by Read: update (typically an optimizer
// step with the gradient computed on the copy) runs on the parameters under
// the lock. It returns the step's staleness. It panics in sparse mode.
func (g *Node) Apply(update func(params []float32)) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.apply(update)
}

// ApplySparse runs a whole local step under the lock (sparse models read
// and write only a few coordinates, so no copy is taken): touched must
// list every coordinate update may change (duplicates allowed).
func (g *Node) ApplySparse(touched []int32, update func(params []float32)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.applySparse(touched, update)
}

// Snapshot copies the parameters into dst under the lock.
func (g *Node) Snapshot(dst []float32) {
	g.mu.Lock()
	copy(dst, g.m.params)
	g.mu.Unlock()
}

// RequestStop sets the stop flag and tells every usable peer at once; the
// flag also travels on every later message.
func (g *Node) RequestStop() {
	g.mu.Lock()
	g.carryOutLocked(g.m.requestStop(false))
	g.mu.Unlock()
}

// AskStop is RequestStop for a rank asked from outside to stop (SIGTERM):
// the messages also name it, so every rank can tell who asked (StopAsker).
func (g *Node) AskStop() {
	g.mu.Lock()
	g.carryOutLocked(g.m.requestStop(true))
	g.mu.Unlock()
}

// StopAsker returns the lowest rank heard to have asked to stop with
// AskStop (itself included), or -1 if none has.
func (g *Node) StopAsker() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m.asker
}
