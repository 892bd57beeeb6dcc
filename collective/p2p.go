package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Point-to-point messages travel on the same links as collectives but in
// their own inbound queue, so they may run concurrently with collectives
// (for protocols such as mirrored/gossip). Messages between two ranks are matched in order: the next
// Recv from a rank gets the next message that rank Sent, and its tag must
// be the one asked for. A p2p failure does not break the Comm.

type p2pLocks struct {
	once       sync.Once
	send, recv []sync.Mutex
}

func (c *Comm) p2pLock(peer int, recv bool) *sync.Mutex {
	c.p2p.once.Do(func() {
		c.p2p.send = make([]sync.Mutex, c.Size())
		c.p2p.recv = make([]sync.Mutex, c.Size())
	})
	if recv {
		return &c.p2p.recv[peer]
	}
	return &c.p2p.send[peer]
}

func (c *Comm) checkPeer(peer int, what string) error {
	if peer < 0 || peer >= c.Size() || peer == c.Rank() {
		return fmt.Errorf("collective: %s rank %d: want another rank in [0,%d)", what, peer, c.Size())
	}
	return nil
}

// Send sends payload to rank to with a user tag, cut into frames the
// transport accepts. It returns once payload may be reused.
func (c *Comm) Send(ctx context.Context, to int, tag uint32, payload []byte) error {
	if err := c.checkPeer(to, "send to"); err != nil {
		return err
	}
	if int64(len(payload)) > c.opts.MaxGatherBytes {
		return fmt.Errorf("collective: send of %d bytes to rank %d exceeds MaxGatherBytes %d", len(payload), to, c.opts.MaxGatherBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	mu := c.p2pLock(to, false)
	mu.Lock()
	defer mu.Unlock()
	h := Header{Kind: KindP2P, DType: Bytes, Tag: tag, Count: uint64(len(payload))}
	for _, sp := range chunks(span{0, len(payload)}, c.t.MaxFrame()) {
		h.Offset = uint64(sp.off)
		if err := c.t.Send(ctx, to, h, payload[sp.off:sp.off+sp.n]); err != nil {
			return fmt.Errorf("collective: p2p send (tag %d) on rank %d to rank %d: %w", tag, c.Rank(), to, err)
		}
	}
	return nil
}

// Recv receives the next message from rank from, which must carry tag.
func (c *Comm) Recv(ctx context.Context, from int, tag uint32) ([]byte, error) {
	if err := c.checkPeer(from, "receive from"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	mu := c.p2pLock(from, true)
	mu.Lock()
	defer mu.Unlock()
	var out []byte
	for got := 0; ; {
		f, err := c.t.Recv(ctx, from, PointToPoint)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("timed out after %v: %w", c.opts.Timeout, err)
			}
			return nil, fmt.Errorf("collective: p2p recv (tag %d) on rank %d waiting for rank %d: %w", tag, c.Rank(), from, err)
		}
		if out == nil {
			if f.Tag != tag || f.Offset != 0 || int64(f.Count) > c.opts.MaxGatherBytes {
				f.Release()
				return nil, fmt.Errorf("collective: p2p mismatch: rank %d expects tag %d from rank %d but got tag %d (%d bytes at offset %d)", c.Rank(), tag, from, f.Tag, f.Count, f.Offset)
			}
			out = make([]byte, f.Count)
		} else if f.Tag != tag || f.Count != uint64(len(out)) || f.Offset != uint64(got) {
			f.Release()
			return nil, fmt.Errorf("collective: p2p stream from rank %d corrupt: tag %d, %d bytes at offset %d inside a %d-byte message with tag %d", from, f.Tag, f.Count, f.Offset, len(out), tag)
		}
		if got+len(f.Payload) > len(out) {
			f.Release()
			return nil, fmt.Errorf("collective: p2p message from rank %d overruns its announced %d bytes", from, len(out))
		}
		copy(out[got:], f.Payload)
		got += len(f.Payload)
		f.Release()
		if got == len(out) {
			return out, nil
		}
	}
}
