package collective

import (
	"context"
	"sync/atomic"
)

// CountingTransport counts the bytes a Transport moves: frame headers plus
// payloads, as the collective layer sees them (the security and
// multiplexing layers below add their own framing, not counted).
type CountingTransport struct {
	Transport
	sent, received atomic.Int64
}

// CountTraffic wraps t.
func CountTraffic(t Transport) *CountingTransport {
	return &CountingTransport{Transport: t}
}

var _ Transport = (*CountingTransport)(nil)

// Send implements Transport.
func (t *CountingTransport) Send(ctx context.Context, to int, h Header, payload []byte) error {
	err := t.Transport.Send(ctx, to, h, payload)
	if err == nil {
		t.sent.Add(int64(HeaderSize + len(payload)))
	}
	return err
}

// Recv implements Transport.
func (t *CountingTransport) Recv(ctx context.Context, from int, ch Channel) (Frame, error) {
	f, err := t.Transport.Recv(ctx, from, ch)
	if err == nil {
		t.received.Add(int64(HeaderSize + len(f.Payload)))
	}
	return f, err
}

// Traffic returns the bytes sent and received so far.
func (t *CountingTransport) Traffic() (sent, received int64) {
	return t.sent.Load(), t.received.Load()
}
