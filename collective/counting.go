package collective

import (
	"context"
	"sync/atomic"
)

// CountingTransport counts the bytes a Transport moves, in total and per
// link: frame headers plus payloads, as the collective layer sees them
// (the security and multiplexing layers below add their own framing, not
// counted).
type CountingTransport struct {
	Transport
	sent, received atomic.Int64
	// to and from count per peer rank.
	to, from []atomic.Int64
}

// CountTraffic wraps t.
func CountTraffic(t Transport) *CountingTransport {
	return &CountingTransport{Transport: t, to: make([]atomic.Int64, t.Size()), from: make([]atomic.Int64, t.Size())}
}

var (
	_ Transport      = (*CountingTransport)(nil)
	_ DirectReceiver = (*CountingTransport)(nil)
)

// Send implements Transport.
func (t *CountingTransport) Send(ctx context.Context, to int, h Header, payload []byte) error {
	err := t.Transport.Send(ctx, to, h, payload)
	if err == nil {
		n := int64(HeaderSize + len(payload))
		t.sent.Add(n)
		t.to[to].Add(n)
	}
	return err
}

// Recv implements Transport.
func (t *CountingTransport) Recv(ctx context.Context, from int, ch Channel) (Frame, error) {
	f, err := t.Transport.Recv(ctx, from, ch)
	t.countRecv(from, f, err)
	return f, err
}

// RecvInto implements DirectReceiver (falling back to Recv when the
// wrapped transport does not).
func (t *CountingTransport) RecvInto(ctx context.Context, from int, l *Landing) (Frame, error) {
	f, err := recvInto(ctx, t.Transport, from, l)
	t.countRecv(from, f, err)
	return f, err
}

func (t *CountingTransport) countRecv(from int, f Frame, err error) {
	if err == nil {
		n := int64(HeaderSize) + int64(f.Len)
		t.received.Add(n)
		t.from[from].Add(n)
	}
}

// Traffic returns the bytes sent and received so far.
func (t *CountingTransport) Traffic() (sent, received int64) {
	return t.sent.Load(), t.received.Load()
}

// LinkTraffic is the bytes one rank moved over its link to one peer.
type LinkTraffic struct {
	Peer     int   `json:"peer"`
	Sent     int64 `json:"sent_bytes"`
	Received int64 `json:"received_bytes"`
}

// Links returns the bytes sent to and received from each peer so far, in
// rank order, this rank left out.
func (t *CountingTransport) Links() []LinkTraffic {
	out := make([]LinkTraffic, 0, len(t.to))
	for r := range t.to {
		if r != t.Rank() {
			out = append(out, LinkTraffic{Peer: r, Sent: t.to[r].Load(), Received: t.from[r].Load()})
		}
	}
	return out
}
