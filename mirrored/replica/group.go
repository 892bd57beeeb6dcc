package replica

import (
	"context"
	"fmt"

	"github.com/meshtrain/meshtrain/collective"
)

// Group is what mirrored's Run needs from the collective layer: an all-reduce and a
// broadcast of float32 buffers (updated in place), an all-gather of byte
// strings (the start-up handshake, parameter-hash comparison) and a
// barrier (to tell waiting for peers apart from communicating). Every
// replica calls them in the same order. NewGroup adapts a collective.Comm,
// LocalGroup is one replica; a caller may wrap either (to count or delay
// collectives), except that gossip needs NewGroup's own.
type Group interface {
	Rank() int
	Size() int
	// AllReduceSum replaces buf on every replica by the element-wise sum
	// of all replicas' buf.
	AllReduceSum(ctx context.Context, buf []float32) error
	// Broadcast replaces buf on every replica by root's buf.
	Broadcast(ctx context.Context, buf []float32, root int) error
	// AllGather returns every replica's local bytes, indexed by rank.
	AllGather(ctx context.Context, local []byte) ([][]byte, error)
	// Barrier returns once every replica has called it.
	Barrier(ctx context.Context) error
}

// Traffic is implemented by Groups that count the bytes they move.
type Traffic interface {
	// Traffic returns the bytes sent and received so far.
	Traffic() (sent, received int64)
}

// NewGroup adapts a collective.Comm. If the Comm's transport counts its
// bytes (collective.CountTraffic), the Group reports them through Traffic.
func NewGroup(c *collective.Comm) Group { return &commGroup{c} }

type commGroup struct{ c *collective.Comm }

var (
	_ Group        = (*commGroup)(nil)
	_ Traffic      = (*commGroup)(nil)
	_ RangeReducer = (*commGroup)(nil)
)

// Comm is the collective.Comm under a Group made by NewGroup, and false
// for any other Group: gossip talks pairwise over the Comm itself, and
// resource sampling reads its transport.
func Comm(g Group) (*collective.Comm, bool) {
	cg, ok := g.(*commGroup)
	if !ok {
		return nil, false
	}
	return cg.c, true
}

func (g *commGroup) Rank() int { return g.c.Rank() }
func (g *commGroup) Size() int { return g.c.Size() }

func (g *commGroup) AllReduceSum(ctx context.Context, buf []float32) error {
	return g.c.AllReduceFloat32(ctx, buf, collective.Sum)
}

func (g *commGroup) AllReduceSumRange(ctx context.Context, buf []float32, lo, hi int) error {
	return g.c.AllReduceFloat32Range(ctx, buf, lo, hi, collective.Sum)
}

func (g *commGroup) Broadcast(ctx context.Context, buf []float32, root int) error {
	return g.c.BroadcastFloat32(ctx, buf, root)
}

// AllGather uses the one-round direct all-gather: the payloads are small
// (settings, hashes), and it makes every rank receive from every other in
// the first collective, so that every inbound link is up before anyone
// can fail and close (a closing transport waits for the peers it has heard
// from; one that has not heard from a peer yet could reset that peer's
// unread frames).
func (g *commGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	return g.c.AllGatherDirect(ctx, local)
}

func (g *commGroup) Barrier(ctx context.Context) error { return g.c.Barrier(ctx) }

func (g *commGroup) Traffic() (int64, int64) {
	if t, ok := g.c.Transport().(Traffic); ok {
		return t.Traffic()
	}
	return 0, 0
}

// LocalGroup is the Group of a single replica: rank 0 of 1, where a sum,
// a broadcast or a gather leaves the data as they are.
type LocalGroup struct{}

func (LocalGroup) Rank() int { return 0 }

func (LocalGroup) Size() int { return 1 }

func (LocalGroup) AllReduceSum(ctx context.Context, _ []float32) error { return ctx.Err() }

func (LocalGroup) Broadcast(ctx context.Context, _ []float32, root int) error {
	if root != 0 {
		return fmt.Errorf("mirrored: broadcast from root %d in a one-replica run: the only rank is 0", root)
	}
	return ctx.Err()
}

func (LocalGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	return [][]byte{local}, ctx.Err()
}

func (LocalGroup) Barrier(ctx context.Context) error { return ctx.Err() }

var _ Group = LocalGroup{}
