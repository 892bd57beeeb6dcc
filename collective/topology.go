package collective

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Topology is which host each rank runs on, as the hierarchical
// all-reduce needs it: ranks on one host reduce to their host's leader
// (its lowest rank), the leaders run the ring among themselves (in rank
// order), and each leader sends the result back to its host. Hosts are
// numbered in order of their lowest rank. Every rank must hold the same
// Topology: the frames carry a digest of it, so ranks that disagree fail
// with a mismatch instead of waiting on each other.
type Topology struct {
	host    []int   // rank → host index
	ranks   [][]int // host index → its ranks, ascending (the leader first)
	leaders []int   // host index → its leader's rank
	digest  uint32  // of the grouping, for the frames' Tag
	// agreed says every rank is known to hold this grouping: it came from
	// LearnHosts, or agreeHosts compared it.
	agreed bool
}

// NewTopology groups the ranks 0..len(hosts)-1 by host: hosts[r] names
// rank r's host (hostid.Self in a worker; any label in tests). Equal
// names are one host.
func NewTopology(hosts []string) (Topology, error) {
	if len(hosts) == 0 {
		return Topology{}, fmt.Errorf("collective: a topology of no ranks: give every rank's host")
	}
	t := Topology{host: make([]int, len(hosts))}
	index := map[string]int{}
	h := fnv.New32a()
	for r, name := range hosts {
		if name == "" {
			return Topology{}, fmt.Errorf("collective: rank %d has an empty host name: give every rank's host (hostid.Self)", r)
		}
		i, ok := index[name]
		if !ok {
			i = len(t.ranks)
			index[name] = i
			t.ranks = append(t.ranks, nil)
			t.leaders = append(t.leaders, r)
		}
		t.host[r] = i
		t.ranks[i] = append(t.ranks[i], r)
		h.Write([]byte(strconv.Itoa(i) + ","))
	}
	t.digest = h.Sum32()
	return t, nil
}

// Size is the number of ranks; Hosts the number of hosts.
func (t Topology) Size() int  { return len(t.host) }
func (t Topology) Hosts() int { return len(t.ranks) }

// Hierarchical says whether the hierarchical all-reduce moves fewer bytes
// over the hosts' links than the flat ring: only when there are several
// hosts and some host runs several ranks. With one host there is no link
// to spare; with one rank per host the leaders' ring is the flat ring.
func (t Topology) Hierarchical() bool {
	if len(t.ranks) < 2 {
		return false
	}
	for _, rs := range t.ranks {
		if len(rs) > 1 {
			return true
		}
	}
	return false
}

// String describes the grouping: "2 hosts × 2 peers", "2 hosts: 3+1
// peers", "1 host × 4 peers"; "" for an unknown topology.
func (t Topology) String() string {
	if len(t.ranks) == 0 {
		return ""
	}
	counts := make([]string, len(t.ranks))
	even := true
	for i, rs := range t.ranks {
		counts[i] = strconv.Itoa(len(rs))
		even = even && len(rs) == len(t.ranks[0])
	}
	hosts := plural(len(t.ranks), "host")
	if even {
		return fmt.Sprintf("%s × %s", hosts, plural(len(t.ranks[0]), "peer"))
	}
	return fmt.Sprintf("%s: %s peers", hosts, strings.Join(counts, "+"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Describe is the topology and the all-reduce algorithm of an nbytes
// buffer, as the run summary and the verdict show them: "topology: 2
// hosts × 2 peers; all-reduce: hierarchical (reduce in host, ring over 2
// leaders)".
func (c *Comm) Describe(nbytes int) string {
	a := c.AlgoFor(nbytes)
	how := ""
	if a == Hierarchical && c.topo != nil {
		how = fmt.Sprintf(" (reduce in host, ring over %d leaders)", c.topo.Hosts())
	}
	return c.describe(a.String() + how)
}

// DescribeHalf is Describe for AllReduceFloat32Half, which runs the ring
// whatever the hosts: its frames carry 16-bit partial sums that each hop
// rounds once, an order of rounding the hierarchical all-reduce would
// change.
func (c *Comm) DescribeHalf() string {
	if c.topo != nil && c.topo.Hierarchical() {
		return c.describe("ring (16-bit frames: the hierarchical all-reduce is float32 only)")
	}
	return c.describe("ring (16-bit frames)")
}

func (c *Comm) describe(algo string) string {
	if c.topo == nil {
		return "all-reduce: " + algo
	}
	return "topology: " + c.topo.String() + "; all-reduce: " + algo
}

// Topology returns the hosts the Comm knows (SetHosts, LearnHosts,
// Options.Hosts); ok is false when it knows none.
func (c *Comm) Topology() (t Topology, ok bool) {
	if c.topo == nil {
		return Topology{}, false
	}
	return *c.topo, true
}

// SetHosts tells the Comm each rank's host (hosts[r] for rank r), so that
// Auto chooses the hierarchical all-reduce where it pays. Every rank must
// call it with the same hosts, before its next collective.
func (c *Comm) SetHosts(hosts []string) error {
	if len(hosts) != c.Size() {
		return fmt.Errorf("collective: %d host names for %d ranks: give one host per rank", len(hosts), c.Size())
	}
	t, err := NewTopology(hosts)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.topo = &t
	c.mu.Unlock()
	return nil
}

// agreeHosts compares the ranks' groupings before the first hierarchical
// all-reduce on hosts that SetHosts or Options.Hosts gave: ranks that
// disagree would send to leaders that never read them and wait out the
// timeout, so they fail here, every rank naming the ranks that differ.
func (c *Comm) agreeHosts(ctx context.Context) error {
	if c.topo.agreed {
		return nil
	}
	all, err := AllGatherJSON(ctx, c, c.topo.host)
	if err != nil {
		return fmt.Errorf("collective: comparing the ranks' hosts before a hierarchical all-reduce: %w", err)
	}
	var differ []string
	for r, h := range all {
		if !slices.Equal(h, c.topo.host) {
			differ = append(differ, fmt.Sprintf("rank %d groups the ranks by host as %v", r, h))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("collective: rank %d groups the ranks by host as %v, but %s: give every rank the same hosts (Options.Hosts, SetHosts) or use LearnHosts",
			c.Rank(), c.topo.host, strings.Join(differ, ", "))
	}
	c.topo.agreed = true
	return nil
}

// LearnHosts gathers every rank's host name (self is this rank's:
// hostid.Self) and sets them (SetHosts). Every rank calls it at once,
// as a collective.
func (c *Comm) LearnHosts(ctx context.Context, self string) error {
	all, err := AllGatherJSON(ctx, c, self)
	if err != nil {
		return fmt.Errorf("collective: learning the peers' hosts: %w", err)
	}
	if err := c.SetHosts(all); err != nil {
		return err
	}
	c.topo.agreed = true // every rank set the same gathered names
	return nil
}
