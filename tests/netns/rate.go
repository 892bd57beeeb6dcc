package netns

import (
	"fmt"
	"strconv"

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

// tbf is the qdisc shaping one direction of a host's link to r. The bucket
// holds 2 ms at the rate (at least 64 KiB, so a full GSO segment passes
// whole), and a packet waits at most 20 ms in the queue.
func (r Rate) tbf() []string {
	burst := max(int64(r)/8/500, 64<<10)
	return []string{"tbf", "rate", strconv.FormatInt(int64(r), 10) + "bit", "burst", strconv.FormatInt(burst, 10), "latency", "20ms"}
}
