package netns

import (
	"context"
	"fmt"
)

// SetRate reshapes host i's link to rate in both directions (a slower
// host among faster ones), until Down or the next SetRate.
func (h *Hosts) SetRate(ctx context.Context, i int, rate Rate) error {
	if i < 0 || i >= h.N {
		return fmt.Errorf("netns: host %d of %d", i, h.N)
	}
	veth := fmt.Sprintf("h%d", i)
	return run(ctx,
		append([]string{"tc", "-n", h.Namespace(i), "qdisc", "replace", "dev", "eth0", "root"}, rate.tbf()...),
		append([]string{"tc", "-n", h.bridge(), "qdisc", "replace", "dev", veth, "root"}, rate.tbf()...),
	)
}
