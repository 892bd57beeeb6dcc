package collective

import (
	"context"
	"errors"
	"fmt"
)

// Member is one rank's part in a cluster, from Join to Leave: a Comm over
// its transport, which counts the bytes the collectives move. Every way of
// bringing a peer up (the worker, the benchmarks, the comparison, the
// tests) goes through it, so each leaves the same way.
type Member struct {
	// Comm runs the collectives; its Transport counts its bytes.
	Comm    *Comm
	t       Transport
	counted *CountingTransport
}

// Join returns rank t.Rank()'s Member of t's cluster, with a Comm of opts
// over t (with opts.LinkFaults injected on its links). It takes t over: if
// the Comm cannot be made, t is closed. The error names the rank.
func Join(t Transport, opts Options) (*Member, error) {
	t = DelayLinks(t, opts.LinkFaults)
	counted := CountTraffic(t)
	c, err := New(counted, opts)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", t.Rank(), errors.Join(err, t.Close()))
	}
	return &Member{Comm: c, t: t, counted: counted}, nil
}

// Traffic returns the bytes the Comm sent and received so far.
func (m *Member) Traffic() (sent, received int64) { return m.counted.Traffic() }

// Links returns the bytes the Comm sent to and received from each peer.
func (m *Member) Links() []LinkTraffic { return m.counted.Links() }

// Leave ends a run that returned err and closes the transport. After a
// run that succeeded, if together, it first waits for every rank (a
// barrier), so that nobody closes its links while a peer still reads the
// last frames; ranks that already left together (gossip's final swap), or
// that may have lost a peer on purpose, pass false. The run's, the
// barrier's and Close's errors are joined, and the result names the rank.
func (m *Member) Leave(ctx context.Context, err error, together bool) error {
	if err == nil && together {
		if berr := m.Comm.Barrier(ctx); berr != nil {
			err = fmt.Errorf("final barrier: %w", berr)
		}
	}
	if err = errors.Join(err, m.t.Close()); err != nil {
		return fmt.Errorf("rank %d: %w", m.Comm.Rank(), err)
	}
	return nil
}
