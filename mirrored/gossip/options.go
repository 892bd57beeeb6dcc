package gossip

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Options are every gossip knob. Start from DefaultOptions and change what
// differs: a zero field is a value, not "the default" (Timeout and Logger
// excepted). Every rank should use the same.
type Options struct {
	// Schedule and Seed choose the peer of each round (see Schedule.Peer).
	Schedule Schedule
	Seed     uint64
	// Every is the number of local steps between exchanges (≥ 1). The run
	// loop (mirrored.Run under gossip) uses it, WaitForAverage and MaxSkip; a
	// Node does not.
	Every int
	// WaitForAverage makes each exchange complete before the next local
	// step; otherwise the next step overlaps it (its answer lands as a
	// merge during that step, counted in its staleness), as AD-PSGD's
	// communication thread does.
	WaitForAverage bool
	// MaxSkip is how many rounds in a row a replica may skip, when its
	// previous average is still in flight, before it waits for it: it
	// bounds the local steps between two averages to MaxSkip+1. Negative:
	// never skip.
	MaxSkip int
	// MaxStaleness bounds how many merges a local step may absorb between
	// Read and Apply (its gradient is then that many versions stale); a
	// responder at the bound answers BUSY. At least 1.
	MaxStaleness int
	// Sparse sends only the coordinates changed since the last exchange
	// with that peer; local updates must then go through ApplySparse.
	Sparse bool
	// SparseTolerance (sparse mode) stops a coordinate that an average
	// moved by at most this fraction of its magnitude from being passed on
	// to third peers. Averages spread each change through the cluster
	// with ever smaller steps that, compared bitwise, never end; with a
	// tolerance the traffic follows the training's changes instead. The
	// cost: replicas may differ by that fraction on such a coordinate until
	// its next exchange, which makes them equal again. 0 is exact.
	SparseTolerance float64
	// Timeout bounds each exchange and the final gathering (0: the Comm's
	// timeout). A peer that does not answer within it is dropped.
	Timeout time.Duration
	// Logger receives lost peers and protocol errors (nil: none).
	Logger *zap.Logger
}

// DefaultOptions returns the defaults every gossip run starts from
// (mirrored.Strategy takes its defaults from here):
//
//   - Schedule Random: AD-PSGD's choice. Each rank's picks are independent
//     of the others', so two ranks seldom pick each other in the same round
//     (a mutual choice averages once and declines the other request), and
//     with a seed it is as reproducible as Rotate and Exponential.
//   - Every 1: average after every local step, as AD-PSGD does; the
//     exchange overlaps the next step, so this costs no waiting.
//   - WaitForAverage false: the next local step overlaps the exchange, so
//     computing does not wait for the network.
//   - MaxSkip 3: at least one average every 4 local steps when steps are
//     shorter than an exchange's round trip.
//   - MaxStaleness 2: room for the overlapped answer to the replica's own
//     exchange plus one peer's request during a step; with 1, a replica
//     whose own exchange is in flight would refuse every peer.
//   - SparseTolerance 1e-3: the value sparse gossip has run with since it
//     was written. An average that moves a weight by at most 0.1% of its
//     magnitude is not passed on, so each change stops echoing after a few
//     halvings instead of never, and replicas differ by at most that much
//     on such a weight until their next exchange.
//   - Timeout 0: the Comm's timeout, the one the collectives already use
//     to decide that a peer is dead.
func DefaultOptions() Options {
	return Options{
		Schedule:        Random,
		Every:           1,
		MaxSkip:         3,
		MaxStaleness:    2,
		SparseTolerance: 1e-3,
	}
}

// validate reports the first setting a Node cannot run with.
func (o *Options) validate() error {
	if !(o.SparseTolerance >= 0 && o.SparseTolerance < 1) {
		return fmt.Errorf("gossip: sparse tolerance %v: want a fraction in [0, 1)", o.SparseTolerance)
	}
	if o.MaxStaleness < 1 {
		return fmt.Errorf("gossip: max staleness %d: want ≥ 1 (DefaultOptions has %d)", o.MaxStaleness, DefaultOptions().MaxStaleness)
	}
	if o.Schedule < Random || o.Schedule > Exponential {
		return fmt.Errorf("gossip: unknown peer schedule %v", o.Schedule)
	}
	return nil
}
