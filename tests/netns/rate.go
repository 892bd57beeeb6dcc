package netns

import (
	"fmt"
	"strconv"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

// Rate is a link rate in bits per second.
type Rate int64

// Common rates.
const (
	Mbit Rate = 1_000_000
	Gbit Rate = 1_000_000_000
)

// ParseRate parses a rate written the way tc(8) writes one (see
// collective.ParseRate), e.g. 100mbit, 1gbit, 1.8gbit, of at least 8kbit.
func ParseRate(s string) (Rate, error) {
	v, err := collective.ParseRate(s)
	if err != nil {
		return 0, fmt.Errorf("netns: %w", err)
	}
	return Rate(v), nil
}

// String writes the rate in tc's units, e.g. 1.8gbit.
func (r Rate) String() string { return collective.FormatRate(int64(r)) }

// BytesPerSecond is the rate's payload ceiling, before any header.
func (r Rate) BytesPerSecond() float64 { return float64(r) / 8 }

// Burst is the bytes tbf's bucket holds on every link direction shaped
// to r: 64 KiB (so that a full GSO segment passes whole) and 0.5 ms at the
// rate (the slack of tbf's timer: with no more than 64 KiB, raw TCP
// reached 0.65× the shaped rate at 1 Gbit and 0.5× at 1.8 Gbit on this
// loaded 2-core machine, since tokens that arrive while the bucket is full
// are lost; with this it keeps 0.95-0.98×). The bucket passes its bytes at
// the unshaped path's speed after the link idled long enough to refill it
// (Refill). A real link has no bucket: the harness keeps this one as small
// as the rate allows and tells the cost model about it (cost.Params.Burst)
// rather than let the fitted parameters absorb it.
func (r Rate) Burst() int64 { return 64<<10 + int64(r)/8/2000 }

// Refill is how long a link shaped to r must idle for tbf's bucket to be
// full again (Burst at the rate, with a fifth more for the timer's slack):
// the measuring program waits this long before each timed repetition, so
// every repetition starts with a full bucket, as the model assumes.
func (r Rate) Refill() time.Duration {
	return time.Duration(1.2 * float64(r.Burst()) * 8 / float64(r) * float64(time.Second))
}

// tbf is the qdisc shaping one direction of a host's link to r: a bucket
// of Burst, and a packet waits at most 20 ms in the queue.
func (r Rate) tbf() []string {
	return []string{"tbf", "rate", strconv.FormatInt(int64(r), 10) + "bit", "burst", strconv.FormatInt(r.Burst(), 10), "latency", "20ms"}
}
