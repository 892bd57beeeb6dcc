package collective

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemNetwork connects n in-memory transports, for tests. Links can be cut
// (the receiver sees the link go down, as after a reset or a crash) or made
// to drop frames silently (the receiver times out).
type MemNetwork struct {
	n        int
	maxFrame int
	ends     []*memEnd
	links    [][]chan struct{} // [from][to]: one Send at a time per link
	mu       sync.Mutex
	cut      map[[2]int]bool
	drop     map[[2]int]bool
}

var (
	_ Transport      = (*memEnd)(nil)
	_ DirectReceiver = (*memEnd)(nil)
)

// DefaultMaxFrame is the default bound on a frame's payload.
const DefaultMaxFrame = 16 << 20

// NewMemNetwork returns a network of n ranks.
func NewMemNetwork(n int) *MemNetwork {
	m := &MemNetwork{n: n, maxFrame: DefaultMaxFrame, cut: map[[2]int]bool{}, drop: map[[2]int]bool{}}
	for r := 0; r < n; r++ {
		m.ends = append(m.ends, &memEnd{net: m, rank: r, inbox: NewInbox(n)})
		m.links = append(m.links, make([]chan struct{}, n))
		for q := range m.links[r] {
			m.links[r][q] = make(chan struct{}, 1)
		}
	}
	return m
}

// Transport returns rank r's end.
func (m *MemNetwork) Transport(r int) Transport { return m.ends[r] }

// Cut severs the link between a and b in both directions: each side sees the
// other's link go down and sends fail.
func (m *MemNetwork) Cut(a, b int) {
	m.mu.Lock()
	m.cut[[2]int{a, b}], m.cut[[2]int{b, a}] = true, true
	m.mu.Unlock()
	m.ends[b].inbox.LinkDown(a, fmt.Errorf("memnet: link %d-%d cut", a, b))
	m.ends[a].inbox.LinkDown(b, fmt.Errorf("memnet: link %d-%d cut", a, b))
}

// Drop makes frames from one rank to another vanish without an error.
func (m *MemNetwork) Drop(from, to int) {
	m.mu.Lock()
	m.drop[[2]int{from, to}] = true
	m.mu.Unlock()
}

// Kill makes rank r crash: every link to and from it is cut.
func (m *MemNetwork) Kill(r int) {
	for q := 0; q < m.n; q++ {
		if q != r {
			m.Cut(r, q)
		}
	}
	m.ends[r].inbox.Close()
}

type memEnd struct {
	net   *MemNetwork
	rank  int
	inbox *Inbox
}

func (e *memEnd) Rank() int     { return e.rank }
func (e *memEnd) Size() int     { return e.net.n }
func (e *memEnd) MaxFrame() int { return e.net.maxFrame }

func (e *memEnd) Send(ctx context.Context, to int, h Header, payload []byte) error {
	if len(payload) > e.net.maxFrame {
		return fmt.Errorf("memnet: %d-byte payload exceeds the %d-byte frame limit", len(payload), e.net.maxFrame)
	}
	e.net.mu.Lock()
	cut, drop := e.net.cut[[2]int{e.rank, to}], e.net.drop[[2]int{e.rank, to}]
	e.net.mu.Unlock()
	if cut {
		return &PeerError{Rank: to, Reason: "link down", Err: fmt.Errorf("memnet: link %d-%d cut", e.rank, to)}
	}
	if drop {
		return nil
	}
	select {
	case <-e.net.ends[to].inbox.closed:
		return &PeerError{Rank: to, Reason: "closed its communicator"}
	default:
	}
	// One frame at a time per link, as on a stream: a landing must take
	// the very next frame (see Inbox.Claim).
	l := e.net.links[e.rank][to]
	select {
	case l <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l }()
	return deliverOrLand(ctx, e.net.ends[to].inbox, e.rank, h, payload)
}

// RecvInto implements DirectReceiver: Send lands a frame straight in the
// receiver's buffer when it is offered.
func (e *memEnd) RecvInto(ctx context.Context, from int, l *Landing) (Frame, error) {
	return e.inbox.RecvInto(ctx, from, l)
}

func (e *memEnd) Failed() context.Context { return e.inbox.Failed() }
func (e *memEnd) Failure() error          { return e.inbox.Failure() }

func (e *memEnd) Recv(ctx context.Context, from int, ch Channel) (Frame, error) {
	return e.inbox.Recv(ctx, from, ch)
}

// Close says goodbye to every peer, like a clean shutdown.
func (e *memEnd) Close() error {
	for q := 0; q < e.net.n; q++ {
		if q == e.rank {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.Send(ctx, q, Header{Kind: KindBye}, nil)
		cancel()
		e.net.ends[q].inbox.LinkDown(e.rank, ErrClosed)
	}
	e.inbox.Close()
	return nil
}
