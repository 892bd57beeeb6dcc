package collective

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LinkFaults is fault injection on a rank's outgoing links, for experiments
// and tests: it makes a fast link (loopback, a LAN) behave like a slower,
// farther one, where netem is not available. Every frame reaches the peer
// Delay after it was sent (one way), and, if Rate is set, no link carries
// more than Rate bits per second. The zero value injects nothing.
type LinkFaults struct {
	Delay time.Duration
	Rate  int64 // bits per second; 0: as fast as the link below
}

// Active says whether f injects anything.
func (f LinkFaults) Active() bool { return f.Delay > 0 || f.Rate > 0 }

func (f LinkFaults) String() string {
	var s []string
	if f.Delay > 0 {
		s = append(s, "one-way delay "+f.Delay.String())
	}
	if f.Rate > 0 {
		s = append(s, "rate "+FormatRate(f.Rate))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// rateUnits are tc(8)'s decimal units, longest suffix first.
var rateUnits = []struct {
	suffix string
	scale  float64
}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// ParseRate parses a link rate written as tc(8) writes one: a number and
// bit, kbit, mbit or gbit (decimal: 1gbit = 10^9 bit/s), e.g. 1.8gbit.
func ParseRate(s string) (int64, error) {
	low := strings.ToLower(strings.TrimSpace(s))
	for _, u := range rateUnits {
		if num, ok := strings.CutSuffix(low, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || v*u.scale < 8000 || v*u.scale > 1e15 {
				break
			}
			return int64(v * u.scale), nil
		}
	}
	return 0, fmt.Errorf("link rate %q: want a number and bit, kbit, mbit or gbit between 8kbit and 1000000gbit, e.g. 100mbit, 1.8gbit", s)
}

// FormatRate writes bits per second in ParseRate's units, e.g. 1.8gbit.
func FormatRate(bits int64) string {
	for _, u := range rateUnits {
		if float64(bits) >= u.scale {
			return strconv.FormatFloat(float64(bits)/u.scale, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(bits, 10) + "bit"
}

// delayQueueBytes bounds the bytes one link holds back (a socket buffer's
// job): past it, Send waits, so a fast sender feels back-pressure instead
// of queueing without limit.
const delayQueueBytes = 64 << 20

// drainTimeout bounds how long Close waits for the frames still held back
// to go out before it says goodbye.
const drainTimeout = 10 * time.Second

// DelayLinks wraps t so that every frame sent reaches its peer f.Delay
// later, paced to f.Rate per link. Send copies the frame and returns at
// once (it waits only while the link holds delayQueueBytes back); one
// goroutine per link delivers the frames in order when they are due. A
// failure to deliver is returned by the link's next Send. Close delivers
// what is held back (for at most drainTimeout) before closing t. Delays
// are kept to within about 0.1 ms (see sleepUntil).
func DelayLinks(t Transport, f LinkFaults) Transport {
	if !f.Active() {
		return t
	}
	d := &delayTransport{Transport: t, faults: f, links: make([]*delayLink, t.Size())}
	d.ctx, d.stop = context.WithCancel(context.Background())
	for r := range d.links {
		if r == t.Rank() {
			continue
		}
		l := &delayLink{q: make(chan delayed, 1024), room: make(chan struct{}), done: make(chan struct{})}
		d.links[r] = l
		d.wg.Go(func() { d.deliver(r, l) })
	}
	return d
}

type delayTransport struct {
	Transport
	faults    LinkFaults
	links     []*delayLink
	ctx       context.Context // ends at Close: stops the deliveries
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var (
	_ Transport      = (*delayTransport)(nil)
	_ DirectReceiver = (*delayTransport)(nil)
)

// RecvInto implements DirectReceiver: faults delay sending only.
func (d *delayTransport) RecvInto(ctx context.Context, from int, l *Landing) (Frame, error) {
	return recvInto(ctx, d.Transport, from, l)
}

// delayLink is one outgoing link's queue.
type delayLink struct {
	q    chan delayed
	mu   sync.Mutex
	held int           // bytes queued and not yet delivered
	room chan struct{} // closed (and replaced) whenever held shrinks
	err  error         // the first delivery failure
	done chan struct{} // closed once everything sent so far is delivered (Close)
}

type delayed struct {
	h    Header
	f    Frame // owns the payload's copy
	sent time.Time
}

// Send implements Transport: it queues a copy of the frame for delivery
// when due.
func (d *delayTransport) Send(ctx context.Context, to int, h Header, payload []byte) error {
	if to == d.Rank() || to < 0 || to >= len(d.links) {
		return d.Transport.Send(ctx, to, h, payload) // the transport's own error
	}
	if len(payload) > d.MaxFrame() {
		return fmt.Errorf("link faults: %d-byte payload exceeds the %d-byte frame limit", len(payload), d.MaxFrame())
	}
	l := d.links[to]
	if err := l.reserve(ctx, d.ctx, len(payload)); err != nil {
		return err
	}
	f := Frame{}
	if len(payload) > 0 {
		f.buf = getBuf(len(payload))
		f.Payload = (*f.buf)[:len(payload)]
		copy(f.Payload, payload)
	}
	select {
	case l.q <- delayed{h: h, f: f, sent: time.Now()}:
		return nil
	case <-ctx.Done():
		f.Release()
		l.release(len(payload))
		return ctx.Err()
	case <-d.ctx.Done():
		f.Release()
		return ErrClosed
	}
}

// reserve waits until the link holds few enough bytes back to take n
// more (a frame larger than the bound goes alone), or fails.
func (l *delayLink) reserve(ctx, closed context.Context, n int) error {
	for {
		l.mu.Lock()
		if err := l.err; err != nil {
			l.mu.Unlock()
			return err
		}
		if l.held == 0 || l.held+n <= delayQueueBytes {
			l.held += n
			l.mu.Unlock()
			return nil
		}
		room := l.room
		l.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-closed.Done():
			return ErrClosed
		}
	}
}

func (l *delayLink) release(n int) {
	l.mu.Lock()
	l.held -= n
	close(l.room)
	l.room = make(chan struct{})
	l.mu.Unlock()
}

// deliver sends link to's frames when due, in order, until Close.
func (d *delayTransport) deliver(to int, l *delayLink) {
	var free time.Time // pacing: when the link has finished sending the previous frame
	for {
		var fr delayed
		select {
		case fr = <-l.q:
		case <-d.ctx.Done():
			return
		}
		if fr.h.Kind == kindFlush {
			close(l.done)
			continue
		}
		due := fr.sent
		if d.faults.Rate > 0 {
			start := fr.sent
			if free.After(start) {
				start = free
			}
			bits := 8 * float64(HeaderSize+len(fr.f.Payload))
			free = start.Add(time.Duration(bits / float64(d.faults.Rate) * 1e9))
			due = free
		}
		sleepUntil(d.ctx, due.Add(d.faults.Delay))
		err := d.Transport.Send(d.ctx, to, fr.h, fr.f.Payload)
		n := len(fr.f.Payload)
		fr.f.Release()
		if err != nil {
			l.mu.Lock()
			if l.err == nil {
				l.err = fmt.Errorf("link faults: delivering a delayed frame to rank %d: %w", to, err)
			}
			l.mu.Unlock()
		}
		l.release(n)
	}
}

// kindFlush marks the queue entry Close uses to learn that a link has
// delivered everything before it; it never reaches the transport.
const kindFlush = Kind(0xff)

// spinBelow is the part of a wait done by yielding in a loop: Go's timers
// and nanosleep both wake tens of microseconds to a millisecond late.
const spinBelow = 80 * time.Microsecond

// sleepUntil returns at t (or when ctx ends): a timer for all but the last
// 2 ms (Go's timers may wake up to a millisecond late), then nanosleep
// (sleepPrecise) for all but spinBelow, then yielding until t. Each frame
// costs at most spinBelow of CPU.
func sleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t) - 2*time.Millisecond; d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
	}
	if d := time.Until(t) - spinBelow; d > 0 {
		sleepPrecise(d)
	}
	for time.Now().Before(t) && ctx.Err() == nil {
		runtime.Gosched()
	}
}

// Close delivers the frames held back (for at most drainTimeout), then
// closes the transport below, which says goodbye.
func (d *delayTransport) Close() error {
	d.closeOnce.Do(func() {
		drain, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		var late []int
		for r, l := range d.links {
			if l == nil {
				continue
			}
			select {
			case l.q <- delayed{h: Header{Kind: kindFlush}}:
			case <-drain.Done():
			}
			select {
			case <-l.done:
			case <-drain.Done():
				late = append(late, r)
			}
		}
		d.stop()
		d.wg.Wait()
		for _, l := range d.links {
			for l != nil && len(l.q) > 0 {
				fr := <-l.q
				fr.f.Release()
			}
		}
		var err error
		if len(late) > 0 {
			err = fmt.Errorf("link faults: frames to rank(s) %v still held back after %v: dropped", late, drainTimeout)
		}
		d.closeErr = errors.Join(err, d.Transport.Close())
	})
	return d.closeErr
}
