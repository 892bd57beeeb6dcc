package collective

import (
	"context"
	"errors"
	"sync"
)

// progress counts completed transfers; waiters block until it reaches a
// target, the operation fails, or its ctx ends.
type progress struct {
	mu   sync.Mutex
	n    int
	wake chan struct{}
}

func newProgress() *progress { return &progress{wake: make(chan struct{})} }

func (p *progress) advance() {
	p.mu.Lock()
	p.n++
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// waitFor blocks until more than i transfers completed.
func (p *progress) waitFor(ctx context.Context, i int) error {
	for {
		p.mu.Lock()
		n, wake := p.n, p.wake
		p.mu.Unlock()
		if n > i {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// op is the state of one collective being executed: its header template
// (kind, seq, dtype, op, count) and context.
type op struct {
	c    *Comm
	hdr  Header
	done func() // releases the op's context
}

// runLinear executes a ring or chain plan over buf (elements of esize
// bytes): a sender goroutine walks p.sends, each waiting for the receive it
// depends on, while this goroutine walks p.recvs, folding or copying each
// frame into buf as it is read (see recvInto).
func (o *op) runLinear(ctx context.Context, p linearPlan, buf []byte, esize int, fn foldFunc) error {
	if len(p.sends) == 0 && len(p.recvs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clock := o.ringClock(p)
	recvd, sent := newProgress(), newProgress()
	var wg sync.WaitGroup
	var sendErr error
	if len(p.sends) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range p.sends {
				if s.dep >= 0 {
					if err := recvd.waitFor(ctx, s.dep); err != nil {
						sendErr = o.wrapPeer(ctx, "waiting for the data to forward from", p.from, err)
						return
					}
				}
				if err := o.send(ctx, p.to, s.span, buf[s.span.off*esize:(s.span.off+s.span.n)*esize]); err != nil {
					sendErr = err
					cancel()
					return
				}
				sent.advance()
			}
		}()
	}
	var recvErr error
	for i, r := range p.recvs {
		if r.dep >= 0 {
			if err := sent.waitFor(ctx, r.dep); err != nil {
				recvErr = o.wrapPeer(ctx, "finishing sending to", p.to, err)
				break
			}
		}
		dst := buf[r.span.off*esize : (r.span.off+r.span.n)*esize]
		into := fn
		if !r.reduce {
			into = nil
		}
		if err := o.recvInto(ctx, p.from, r.span, esize, dst, into, true); err != nil {
			recvErr = err
			cancel()
			break
		}
		recvd.advance()
		clock.received(i)
	}
	wg.Wait()
	// Drop the side that only stopped because the other side cancelled.
	if sendErr != nil && recvErr != nil {
		if errors.Is(recvErr, context.Canceled) && !errors.Is(sendErr, context.Canceled) {
			recvErr = nil
		} else if errors.Is(sendErr, context.Canceled) {
			sendErr = nil
		}
	}
	err := errors.Join(recvErr, sendErr)
	clock.done(err)
	return err
}

// send writes one chunk described by sp to rank to.
func (o *op) send(ctx context.Context, to int, sp span, payload []byte) error {
	h := o.hdr
	h.Offset = uint64(sp.off)
	if err := o.c.t.Send(ctx, to, h, payload); err != nil {
		return o.wrapPeer(ctx, "sending to", to, err)
	}
	return nil
}

// recv reads the next collective frame from rank from and checks that it is
// the chunk sp of the same operation.
func (o *op) recv(ctx context.Context, from int, sp span, esize int) (Frame, error) {
	f, err := o.c.t.Recv(ctx, from, Collective)
	if err != nil {
		return Frame{}, o.wrapPeer(ctx, "waiting for", from, err)
	}
	if err := o.check(from, f.Header, sp, esize); err != nil {
		f.Release()
		return Frame{}, err
	}
	return f, nil
}

// recvInto receives the chunk sp from rank from into dst: folded in with fn
// (srcFirst as for foldFunc), or copied over when fn is nil. The transport
// reads the payload straight into dst where it can (DirectReceiver);
// otherwise, or when the frame was read before dst was offered, it is
// folded or copied from the receive buffer here. dst must be free to
// overwrite: anything still to be sent from it has been sent.
func (o *op) recvInto(ctx context.Context, from int, sp span, esize int, dst []byte, fn foldFunc, srcFirst bool) error {
	want := o.hdr
	want.Offset = uint64(sp.off)
	f, err := recvInto(ctx, o.c.t, from, newLanding(ctx, want, dst, fn, srcFirst))
	if err != nil {
		return o.wrapPeer(ctx, "waiting for", from, err)
	}
	defer f.Release()
	if err := o.check(from, f.Header, sp, esize); err != nil {
		return err
	}
	switch {
	case f.Landed:
	case fn != nil:
		fn(dst, f.Payload, srcFirst)
	default:
		copy(dst, f.Payload)
	}
	return nil
}
