package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Channel selects which of a link's two inbound queues Recv reads:
// collective frames (which an abort from any rank interrupts) or
// point-to-point frames (which only the link's own failure interrupts).
type Channel int

// Inbound channels.
const (
	Collective Channel = iota
	PointToPoint
)

// Transport moves frames between the ranks of one cluster. Frames from one
// rank to another arrive in the order they were sent.
type Transport interface {
	// Rank is this process's rank in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// MaxFrame is the largest payload Send accepts and Recv can return.
	MaxFrame() int
	// Send writes one frame (h with Len set from payload) to rank to. It
	// returns once payload may be reused. Safe for concurrent use; frames to
	// one rank are written one at a time. A ctx that ends mid-write may
	// leave the link unusable.
	Send(ctx context.Context, to int, h Header, payload []byte) error
	// Recv returns the next frame from rank from on channel ch; the caller
	// releases it. It fails when ctx ends, when the link from that rank went
	// down, and (for Collective) when any rank aborted.
	Recv(ctx context.Context, from int, ch Channel) (Frame, error)
	// Failed is done once any rank aborted or a link went down without a
	// goodbye; collectives then stop waiting, and Failure says why. (A
	// context rather than a channel, so that each collective can tie its own
	// cancellation to it with context.AfterFunc, without a goroutine.)
	Failed() context.Context
	Failure() error
	// Close says goodbye to every peer and releases the transport.
	Close() error
}

// PeerError reports that a rank's link failed or that the rank aborted.
type PeerError struct {
	Rank   int
	Reason string // "aborted: ..." or "link down: ..."
	Err    error
}

func (e *PeerError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("rank %d %s: %v", e.Rank, e.Reason, e.Err)
	}
	return fmt.Sprintf("rank %d %s", e.Rank, e.Reason)
}

func (e *PeerError) Unwrap() error { return e.Err }

// ErrClosed is returned by operations on a closed transport.
var ErrClosed = errors.New("collective: transport closed")

// inboxDepth is how many frames per link and channel wait for the executor
// before the link's reader blocks (and the sender feels back-pressure).
const inboxDepth = 8

// DefaultQueueBytes bounds the payload bytes per link and channel that wait
// for the executor (issue 32 item 3): inboxDepth frames of the ring's
// default chunk, so a legitimate all-reduce queues as many frames as the
// depth allows, while a member that sends frames of MaxFrame (16 MiB) and
// lets none be taken makes the worker hold max(DefaultQueueBytes, MaxFrame)
// per channel instead of inboxDepth × MaxFrame (128 MiB). A frame larger
// than the bound is still queued when its channel is empty, so no frame a
// transport accepts can wait for ever.
const DefaultQueueBytes = inboxDepth * DefaultChunkBytes

// Inbox queues the frames a transport's readers receive until the executor
// asks for them, and turns abort frames and lost links into errors that wake
// every waiting collective. Both transports use it.
type Inbox struct {
	links     []*inLink
	limit     int // payload bytes per link and channel (DefaultQueueBytes)
	closed    chan struct{}
	closeOnce sync.Once
	abortOnce sync.Once
	aborted   chan struct{}
	abortErr  error
	failCtx   context.Context
	failStop  context.CancelFunc
}

type inLink struct {
	coll, p2p chan Frame
	mu        sync.Mutex
	bye       bool
	post      *Landing      // offered for the next collective frame (landing.go)
	last      *Landing      // the latest offered, for Claim's wait
	offered   chan struct{} // signalled on every offer
	delivered uint64        // collective frames queued so far
	held      [2]int        // payload bytes queued per Channel, guarded by mu
	room      chan struct{} // signalled whenever the executor takes a frame
	taken     uint64        // collective frames the executor took so far
	down      chan struct{}
	downErr   error
}

// NewInbox returns an inbox for n ranks.
func NewInbox(n int) *Inbox {
	ib := &Inbox{links: make([]*inLink, n), limit: DefaultQueueBytes, closed: make(chan struct{}), aborted: make(chan struct{})}
	ib.failCtx, ib.failStop = context.WithCancel(context.Background())
	for i := range ib.links {
		ib.links[i] = &inLink{coll: make(chan Frame, inboxDepth), p2p: make(chan Frame, inboxDepth), down: make(chan struct{}), offered: make(chan struct{}, 1), room: make(chan struct{}, 1)}
	}
	return ib
}

// channelOf is the queue a frame of kind k waits in.
func channelOf(k Kind) Channel {
	if k == KindP2P {
		return PointToPoint
	}
	return Collective
}

// Reserve waits until the queue that a frame with header h from rank from
// goes to has room for its payload: the bytes queued there plus h.Len
// within the inbox's bound, or nothing queued at all. A link's reader
// calls it after the header and before reading the payload, so that the
// frame in its hands counts too, and a sender that runs ahead of the
// executor waits for the stream window instead of filling this process's
// memory. Only the link's reader adds to the queue, so the room found
// stays until its Deliver. It fails when ctx ends or the inbox closes.
func (ib *Inbox) Reserve(ctx context.Context, from int, h Header) error {
	l, ch := ib.links[from], channelOf(h.Kind)
	if h.Kind == KindAbort || h.Kind == KindBye {
		return nil // consumed by Deliver, never queued
	}
	for {
		l.mu.Lock()
		ok := l.held[ch] == 0 || l.held[ch]+int(h.Len) <= ib.limit
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-l.room:
		case <-ib.closed:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// hold adds d payload bytes to channel ch of link l and, when bytes left,
// tells a reader waiting in Reserve.
func (l *inLink) hold(ch Channel, d int) {
	l.mu.Lock()
	l.held[ch] += d
	l.mu.Unlock()
	if d < 0 {
		select {
		case l.room <- struct{}{}:
		default:
		}
	}
}

// Deliver hands a frame read from rank from to the executor, blocking while
// that queue is full (inboxDepth frames). Abort and bye frames are consumed
// here. Deliver counts the payload's bytes but does not wait for room in
// bytes: a network reader calls Reserve first, while the in-memory
// transport's sender, which nothing else buffers for, keeps the depth's
// room alone (several frames per peer sent before receiving, as the sparse
// gather does, must not wait for the peer).
func (ib *Inbox) Deliver(ctx context.Context, from int, f Frame) (err error) {
	l := ib.links[from]
	var q chan Frame
	switch f.Kind {
	case KindAbort:
		ib.abort(&PeerError{Rank: from, Reason: "aborted", Err: errors.New(string(f.Payload))})
		f.Release()
		return nil
	case KindBye:
		l.mu.Lock()
		l.bye = true
		l.mu.Unlock()
		f.Release()
		return nil
	case KindP2P:
		q = l.p2p
	default:
		q = l.coll
	}
	coll := f.Kind != KindP2P
	ch := channelOf(f.Kind)
	if coll {
		ib.count(from, &l.delivered, 1)
	}
	l.hold(ch, len(f.Payload))
	select {
	case q <- f:
		return nil
	case <-ib.closed:
		err = ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.hold(ch, -len(f.Payload))
	f.Release()
	if coll {
		ib.count(from, &l.delivered, -1)
	}
	return err
}

// LinkDown records that the link from rank from ended. Unless that rank said
// goodbye first, it counts as the rank failing and aborts collectives.
func (ib *Inbox) LinkDown(from int, err error) {
	l := ib.links[from]
	l.mu.Lock()
	select {
	case <-l.down:
		l.mu.Unlock()
		return
	default:
	}
	bye := l.bye
	if bye {
		l.downErr = &PeerError{Rank: from, Reason: "closed its communicator"}
	} else {
		l.downErr = &PeerError{Rank: from, Reason: "link down", Err: err}
	}
	close(l.down)
	l.mu.Unlock()
	if !bye {
		ib.abort(l.downErr)
	}
}

func (ib *Inbox) abort(err error) {
	ib.abortOnce.Do(func() {
		ib.abortErr = err
		close(ib.aborted)
		ib.failStop()
	})
}

// Down is closed once the link from rank from has ended (a goodbye, a
// failure or Close).
func (ib *Inbox) Down(from int) <-chan struct{} { return ib.links[from].down }

// Failed is closed on the first abort or lost link.
func (ib *Inbox) Failed() context.Context { return ib.failCtx }

// Failure returns the first abort or lost link seen, or nil.
func (ib *Inbox) Failure() error {
	select {
	case <-ib.aborted:
		return ib.abortErr
	default:
		return nil
	}
}

// Recv implements Transport.Recv.
func (ib *Inbox) Recv(ctx context.Context, from int, ch Channel) (Frame, error) {
	f, err := ib.recv(ctx, from, ch)
	if err == nil && ch == Collective {
		ib.count(from, &ib.links[from].taken, 1)
	}
	return f, err
}

func (ib *Inbox) recv(ctx context.Context, from int, ch Channel) (Frame, error) {
	l := ib.links[from]
	q, aborted := l.coll, ib.aborted
	if ch == PointToPoint {
		q, aborted = l.p2p, nil
	}
	select {
	case f := <-q:
		l.hold(ch, -len(f.Payload))
		return f, nil
	default:
	}
	select {
	case f := <-q:
		l.hold(ch, -len(f.Payload))
		return f, nil
	case <-aborted:
		return Frame{}, ib.abortErr
	case <-l.down:
		select {
		case f := <-q:
			l.hold(ch, -len(f.Payload))
			return f, nil
		default:
		}
		// A peer that aborted and then said goodbye has both ready: the
		// abort names the cause.
		select {
		case <-aborted:
			return Frame{}, ib.abortErr
		default:
		}
		return Frame{}, l.downErr
	case <-ib.closed:
		return Frame{}, ErrClosed
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// Close wakes every waiter with ErrClosed and frees queued frames.
func (ib *Inbox) Close() {
	ib.closeOnce.Do(func() { close(ib.closed) })
	for _, l := range ib.links {
		for ch, q := range []chan Frame{Collective: l.coll, PointToPoint: l.p2p} {
			for drained := false; !drained; {
				select {
				case f := <-q:
					l.hold(Channel(ch), -len(f.Payload))
					f.Release()
				default:
					drained = true
				}
			}
		}
	}
}
