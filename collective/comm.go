package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Algo selects the all-reduce algorithm.
type Algo int

// All-reduce algorithms. Auto picks Ring above Options.SmallBytes; below it,
// Star for 3 to StarMaxRanks ranks and up to Options.StarBytes, else Tree
// (recursive doubling).
const (
	Auto Algo = iota
	Ring
	Tree
	// Star sends every buffer to rank 0, which reduces and sends the result
	// back: two hops like recursive doubling at N=4, but 2(N-1) messages
	// instead of N log2 N, and one wake-up per op on the other ranks.
	Star
)

// ParseAlgo parses "auto", "ring", "tree" or "star".
func ParseAlgo(s string) (Algo, error) {
	switch s {
	case "auto", "":
		return Auto, nil
	case "ring":
		return Ring, nil
	case "tree":
		return Tree, nil
	case "star":
		return Star, nil
	}
	return 0, fmt.Errorf("collective: unknown algorithm %q: want auto, ring, tree or star", s)
}

func (a Algo) String() string { return [...]string{"auto", "ring", "tree", "star"}[a] }

// Defaults. DefaultSmallBytes is Auto's threshold between recursive
// doubling (latency-bound sizes) and the ring (bandwidth-bound ones);
// DefaultStarBytes the size up to which Star's one round beats both on
// loopback while keeping the root's link from carrying 2(N-1)M on a real
// network; DefaultChunkBytes the ring's chunk with the least CPU per large
// all-reduce. The measurements behind each are in BENCHMARKS.md ("Where
// the collective defaults come from").
const (
	DefaultTimeout        = 60 * time.Second
	DefaultChunkBytes     = 1 << 20
	DefaultSmallBytes     = 128 << 10
	DefaultStarBytes      = 16 << 10
	DefaultMaxGatherBytes = 1 << 30
)

// Options configure a Comm. Every rank must use the same Algo, ChunkBytes
// and SmallBytes (a difference is detected and reported as a mismatch).
type Options struct {
	// Timeout bounds every collective (and every wait inside it).
	Timeout time.Duration
	// Algo forces an all-reduce algorithm; Auto chooses by size.
	Algo Algo
	// ChunkBytes is the pipelining chunk of ring and chain schedules.
	ChunkBytes int
	// SmallBytes is Auto's threshold: buffers up to it use recursive doubling.
	SmallBytes int
	// StarBytes is Auto's threshold for Star (with 3 to StarMaxRanks
	// ranks); negative disables Star.
	StarBytes int
	// MaxGatherBytes bounds the total size of an all-gather result, checked
	// before allocating it.
	MaxGatherBytes int64
	// Logger receives failures; nil means no logging.
	Logger *zap.Logger
	// LinkFaults, applied by Join, delays and paces this rank's outgoing
	// frames: fault injection for experiments and tests (see DelayLinks).
	// Ranks may differ (one slow host).
	LinkFaults LinkFaults
	// Phases, if set, receives each all-reduce's phases as it ends (see
	// Phase), on the collective's goroutine: it must be quick (a
	// timeline's append). Nil reads no clock.
	Phases func(Phase)
}

func (o *Options) fill() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.SmallBytes < 0 {
		o.SmallBytes = 0
	} else if o.SmallBytes == 0 {
		o.SmallBytes = DefaultSmallBytes
	}
	if o.StarBytes == 0 {
		o.StarBytes = DefaultStarBytes
	}
	if o.MaxGatherBytes <= 0 {
		o.MaxGatherBytes = DefaultMaxGatherBytes
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
}

// Comm runs collectives among the Size() ranks of a Transport. One
// collective at a time, called in the same order on every rank;
// point-to-point Send/Recv may run concurrently with collectives.
type Comm struct {
	t    Transport
	opts Options
	log  *zap.Logger

	mu     sync.Mutex // serialises collectives
	seq    uint64
	broken error

	p2p p2pLocks
}

// New returns a communicator over t.
func New(t Transport, opts Options) (*Comm, error) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		return nil, errors.New("collective: big-endian hosts are not supported (payloads are raw little-endian memory)")
	}
	if t.Size() < 1 || t.Rank() < 0 || t.Rank() >= t.Size() {
		return nil, fmt.Errorf("collective: rank %d out of range for world size %d", t.Rank(), t.Size())
	}
	opts.fill()
	if opts.ChunkBytes > t.MaxFrame() {
		return nil, fmt.Errorf("collective: chunk of %d bytes exceeds the transport's %d-byte frame limit; lower ChunkBytes", opts.ChunkBytes, t.MaxFrame())
	}
	if opts.ChunkBytes%8 != 0 {
		return nil, fmt.Errorf("collective: ChunkBytes %d must be a multiple of 8", opts.ChunkBytes)
	}
	return &Comm{t: t, opts: opts, log: opts.Logger.With(zap.Int("rank", t.Rank()))}, nil
}

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.t.Rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.t.Size() }

// Options returns the options in effect (defaults filled in).
func (c *Comm) Options() Options { return c.opts }

// Transport returns the transport under c.
func (c *Comm) Transport() Transport { return c.t }

// begin starts a collective: it takes the lock, checks the Comm is usable
// and assigns the next sequence number.
func (c *Comm) begin(ctx context.Context, kind Kind, dt DType, rop Op, count int) (*op, context.Context, context.CancelFunc, error) {
	c.mu.Lock()
	if c.broken != nil {
		err := fmt.Errorf("collective: %s on rank %d: communicator unusable after an earlier failure: %w", kind, c.Rank(), c.broken)
		c.mu.Unlock()
		return nil, nil, nil, err
	}
	c.seq++
	o := &op{c: c, hdr: Header{Kind: kind, DType: dt, Op: rop, Seq: c.seq, Count: uint64(count)}}
	octx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	// A failure anywhere in the cluster stops every wait of this op,
	// including sends blocked on a peer that stopped reading.
	stop := context.AfterFunc(c.t.Failed(), cancel)
	o.done = func() { stop(); cancel() }
	return o, octx, o.done, nil
}

// end finishes a collective; a failure breaks the Comm and tells every other
// rank why, so that ranks waiting on someone else do not wait out the timeout.
func (c *Comm) end(o *op, cancel context.CancelFunc, err error) error {
	cancel()
	defer c.mu.Unlock()
	if err == nil {
		return nil
	}
	if failure := c.t.Failure(); failure != nil && errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), failure.Error()) {
		err = fmt.Errorf("%w, after %w", err, failure)
	}
	err = fmt.Errorf("collective: %s #%d on rank %d: %w", o.hdr.Kind, o.hdr.Seq, c.Rank(), err)
	c.broken = err
	c.log.Warn("collective failed; aborting peers", zap.Error(err))
	msg := []byte(err.Error())
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	var wg sync.WaitGroup
	for r := 0; r < c.Size(); r++ {
		if r == c.Rank() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = c.t.Send(ctx, r, Header{Kind: KindAbort, DType: Bytes, Seq: o.hdr.Seq}, msg)
		}()
	}
	wg.Wait()
	return err
}

// check compares a received header with the one this rank expects for the
// chunk sp. Any difference in kind, order, type, op or count is a mismatch
// naming both ranks and both shapes.
func (o *op) check(from int, h Header, sp span, esize int) error {
	want := o.hdr
	if h.Kind != want.Kind || h.Seq != want.Seq || h.DType != want.DType || h.Op != want.Op || h.Count != want.Count || h.Tag != want.Tag {
		return fmt.Errorf("mismatch: rank %d is at %s but rank %d sent %s: every rank must call the same collectives in the same order with the same lengths",
			o.c.Rank(), want.shape(), from, h.shape())
	}
	if h.Offset != uint64(sp.off) || int(h.Len) != sp.n*esize {
		return fmt.Errorf("mismatch: rank %d expected elements [%d,+%d) of %s but rank %d sent [%d,+%d): ranks use different ChunkBytes/SmallBytes/Algo options",
			o.c.Rank(), sp.off, sp.n, want.shape(), from, h.Offset, int(h.Len)/esize)
	}
	return nil
}

// wrapPeer names the rank and what this rank was doing when err happened.
func (o *op) wrapPeer(ctx context.Context, doing string, peer int, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("%s rank %d: timed out after %v: %w", doing, peer, o.c.opts.Timeout, err)
	}
	if pe := (*PeerError)(nil); errors.As(err, &pe) && pe.Rank != peer {
		return fmt.Errorf("%s rank %d: interrupted: %w", doing, peer, err)
	}
	return fmt.Errorf("%s rank %d: %w", doing, peer, err)
}
