package collective

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// groupings are the host assignments the hierarchical tests run on, by
// name: hosts[r] is rank r's host.
var groupings = []struct {
	name   string
	hosts  []string
	desc   string
	hier   bool // Auto chooses Hierarchical for the ring's sizes
	leader int  // hosts
}{
	{"2x2", []string{"a", "a", "b", "b"}, "2 hosts × 2 peers", true, 2},
	{"3+1", []string{"a", "a", "a", "b"}, "2 hosts: 3+1 peers", true, 2},
	{"1x4", []string{"a", "a", "a", "a"}, "1 host × 4 peers", false, 1},
	{"4x1", []string{"a", "b", "c", "d"}, "4 hosts × 1 peer", false, 4},
	{"2x3", []string{"a", "a", "a", "b", "b", "b"}, "2 hosts × 3 peers", true, 2},
	{"uneven interleaved", []string{"x", "y", "x", "z", "x", "y", "w"}, "4 hosts: 3+2+1+1 peers", true, 4},
	{"one rank", []string{"a"}, "1 host × 1 peer", false, 1},
}

func TestTopology(t *testing.T) {
	for _, g := range groupings {
		top, err := NewTopology(g.hosts)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if top.String() != g.desc || top.Hierarchical() != g.hier || top.Hosts() != g.leader || top.Size() != len(g.hosts) {
			t.Errorf("%s: %q hierarchical %v, %d hosts of %d ranks; want %q %v %d of %d",
				g.name, top, top.Hierarchical(), top.Hosts(), top.Size(), g.desc, g.hier, g.leader, len(g.hosts))
		}
	}
	for _, bad := range []struct {
		hosts []string
		want  string
	}{
		{nil, "no ranks"},
		{[]string{"a", ""}, "rank 1 has an empty host name"},
	} {
		if _, err := NewTopology(bad.hosts); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewTopology(%q) = %v, want an error saying %q", bad.hosts, err, bad.want)
		}
	}
	comms, _ := newMemComms(t, 2, Options{})
	if err := comms[0].SetHosts([]string{"a"}); err == nil || !strings.Contains(err.Error(), "1 host names for 2 ranks") {
		t.Errorf("SetHosts with one name for two ranks: %v", err)
	}
	if _, err := New(NewMemNetwork(2).Transport(0), Options{Hosts: []string{"a", "b", "c"}}); err == nil {
		t.Error("New with 3 hosts for 2 ranks succeeded")
	}
}

// TestAutoChoosesHierarchical: the choice table. Auto takes the
// hierarchical all-reduce only for the ring's sizes, with several hosts
// and several ranks on some host; a forced algorithm stays.
func TestAutoChoosesHierarchical(t *testing.T) {
	const small, large = 1 << 10, 1 << 20
	for _, tc := range []struct {
		hosts  []string
		algo   Algo
		nbytes int
		want   Algo
		desc   string
	}{
		{[]string{"a", "a", "b", "b"}, Auto, large, Hierarchical, "topology: 2 hosts × 2 peers; all-reduce: hierarchical (reduce in host, ring over 2 leaders)"},
		{[]string{"a", "a", "b", "b"}, Auto, small, Star, "topology: 2 hosts × 2 peers; all-reduce: star"},
		{[]string{"a", "a", "b", "b"}, Ring, large, Ring, "topology: 2 hosts × 2 peers; all-reduce: ring"},
		{[]string{"a", "a", "a", "a"}, Auto, large, Ring, "topology: 1 host × 4 peers; all-reduce: ring"},
		{[]string{"a", "b", "c", "d"}, Auto, large, Ring, "topology: 4 hosts × 1 peer; all-reduce: ring"},
		{[]string{"a", "b", "c", "d"}, Hierarchical, large, Hierarchical, "topology: 4 hosts × 1 peer; all-reduce: hierarchical (reduce in host, ring over 4 leaders)"},
		{[]string{"a", "a", "a", "b"}, Auto, large, Hierarchical, "topology: 2 hosts: 3+1 peers; all-reduce: hierarchical (reduce in host, ring over 2 leaders)"},
		{nil, Auto, large, Ring, "all-reduce: ring"},
	} {
		comms, _ := newMemComms(t, 4, Options{Algo: tc.algo, Hosts: tc.hosts, StarBytes: small})
		if got, desc := comms[0].AlgoFor(tc.nbytes), comms[0].Describe(tc.nbytes); got != tc.want || desc != tc.desc {
			t.Errorf("hosts %q, %s, %d bytes: %s, %q; want %s, %q", tc.hosts, tc.algo, tc.nbytes, got, desc, tc.want, tc.desc)
		}
	}
	for _, tc := range []struct {
		hosts []string
		want  string
	}{
		{[]string{"a", "a", "b", "b"}, "topology: 2 hosts × 2 peers; all-reduce: ring (16-bit frames: the hierarchical all-reduce is float32 only)"},
		{[]string{"a", "b", "c", "d"}, "topology: 4 hosts × 1 peer; all-reduce: ring (16-bit frames)"},
		{nil, "all-reduce: ring (16-bit frames)"},
	} {
		comms, _ := newMemComms(t, 4, Options{Hosts: tc.hosts})
		if got := comms[0].DescribeHalf(); got != tc.want {
			t.Errorf("hosts %q: DescribeHalf %q, want %q", tc.hosts, got, tc.want)
		}
	}
	if a, err := ParseAlgo("hierarchical"); err != nil || a != Hierarchical || a.String() != "hierarchical" {
		t.Errorf("ParseAlgo(hierarchical) = %v, %v", a, err)
	}
}

// TestHierarchicalAllReduce runs every grouping, length and op against the
// reference: exact for small integers (every order of sums gives the same
// floats), and for normal values bitwise equal on every rank and between
// two runs, and within float tolerance of the sum in float64.
func TestHierarchicalAllReduce(t *testing.T) {
	for _, g := range groupings {
		n := len(g.hosts)
		for _, length := range []int{0, 1, n + 1, 10007, 300001} {
			for _, op := range []Op{Sum, Avg, Min, Max} {
				rng := rand.New(rand.NewPCG(uint64(length), uint64(n)))
				inputs := make([][]float32, n)
				for r := range inputs {
					inputs[r] = make([]float32, length)
					for i := range inputs[r] {
						inputs[r][i] = float32(rng.IntN(201) - 100)
					}
				}
				got := hierRun(t, g.hosts, Hierarchical, inputs, op)
				want := reference(inputs, op)
				for r := range got {
					if !slices.Equal(got[r], want) {
						t.Fatalf("%s, %d elements, %s: rank %d differs from the reference", g.name, length, op, r)
					}
				}
			}
		}
		var first [][]float32
		for run := range 2 {
			rng := rand.New(rand.NewPCG(11, uint64(n)))
			inputs := normalInputs(rng, n, 50001)
			exact := make([]float64, len(inputs[0]))
			for _, in := range inputs {
				for i, v := range in {
					exact[i] += float64(v)
				}
			}
			got := hierRun(t, g.hosts, Auto, inputs, Sum)
			for r := range got {
				for i := range got[r] {
					if math.Float32bits(got[r][i]) != math.Float32bits(got[0][i]) {
						t.Fatalf("%s: rank %d element %d = %v, rank 0 has %v", g.name, r, i, got[r][i], got[0][i])
					}
					if math.Abs(float64(got[r][i])-exact[i]) > 1e-4 {
						t.Fatalf("%s: element %d = %v, want %v", g.name, i, got[r][i], exact[i])
					}
				}
			}
			if run == 0 {
				first = got
			} else if !slices.Equal(first[0], got[0]) {
				t.Fatalf("%s: two runs differ", g.name)
			}
		}
	}
}

// hierRun all-reduces inputs (copied) among len(hosts) ranks grouped by
// hosts, in 1 KiB chunks so that the three parts overlap, and returns
// each rank's result.
func hierRun(t *testing.T, hosts []string, algo Algo, inputs [][]float32, op Op) [][]float32 {
	t.Helper()
	comms, _ := newMemComms(t, len(hosts), Options{Algo: algo, Hosts: hosts, ChunkBytes: 1024, SmallBytes: -1, Timeout: 20 * time.Second})
	bufs := make([][]float32, len(hosts))
	for r := range bufs {
		bufs[r] = slices.Clone(inputs[r])
	}
	noErrors(t, onAll(comms, func(c *Comm) error {
		return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], op)
	}))
	return bufs
}

// TestHierarchicalLinkBytes: on 2 hosts × 2 peers a member sends only to
// its leader, and each host's traffic to the other host is the leaders'
// ring's: 2(H-1)/H of the buffer, a third less than the flat ring's
// 2(N-1)/N across the same link.
func TestHierarchicalLinkBytes(t *testing.T) {
	const elems = 1 << 16
	hosts := []string{"a", "a", "b", "b"}
	cross := func(algo Algo) (perHost int64, members map[int][]LinkTraffic) {
		net := NewMemNetwork(4)
		counted := make([]*CountingTransport, 4)
		comms := make([]*Comm, 4)
		for r := range comms {
			counted[r] = CountTraffic(net.Transport(r))
			var err error
			if comms[r], err = New(counted[r], Options{Algo: algo, Hosts: hosts}); err != nil {
				t.Fatal(err)
			}
		}
		// The first all-reduce compares the hosts (agreeHosts): count the
		// second's bytes alone.
		before := make([][]LinkTraffic, len(comms))
		for i := range 2 {
			noErrors(t, onAll(comms, func(c *Comm) error {
				return c.AllReduceFloat32(context.Background(), make([]float32, elems), Sum)
			}))
			for r := range comms {
				if i == 0 {
					before[r] = counted[r].Links()
				}
			}
		}
		members = map[int][]LinkTraffic{}
		for r := range comms {
			links := counted[r].Links()
			for i := range links {
				for _, b := range before[r] {
					if b.Peer == links[i].Peer {
						links[i].Sent -= b.Sent
					}
				}
				if l := links[i]; hosts[l.Peer] != hosts[r] && hosts[r] == "a" {
					perHost += l.Sent
				}
			}
			members[r] = links
		}
		return perHost, members
	}
	ring, _ := cross(Ring)
	hier, links := cross(Hierarchical)
	buf := int64(elems * 4)
	if hier > buf+buf/20 || ring < buf*3/2 {
		t.Errorf("host a sent %d bytes to host b with the hierarchical all-reduce and %d with the ring, for a %d-byte buffer: want about 1× and 1.5×", hier, ring, buf)
	}
	for _, m := range []int{1, 3} {
		for _, l := range links[m] {
			if l.Peer != m-1 && l.Sent > 0 {
				t.Errorf("member %d sent %d bytes to rank %d, not its leader %d", m, l.Sent, l.Peer, m-1)
			}
		}
	}
}

// killAfter is a transport whose rank dies (net.Kill) at its n-th send:
// a peer that crashes mid-way through an all-reduce.
type killAfter struct {
	Transport
	net  *MemNetwork
	left atomic.Int32
}

func (k *killAfter) Send(ctx context.Context, to int, h Header, payload []byte) error {
	if k.left.Add(-1) == 0 {
		k.net.Kill(k.Rank())
		return errors.New("killed")
	}
	return k.Transport.Send(ctx, to, h, payload)
}

// TestHierarchicalKilledPeer: a member or a leader dying mid-way fails
// every other rank with an error naming it, long before the timeout.
func TestHierarchicalKilledPeer(t *testing.T) {
	hosts := []string{"a", "a", "a", "b", "b", "c"}
	for _, victim := range []int{0, 1, 3, 4, 5} {
		for _, after := range []int32{3, 25, 45} { // in the hosts' comparison, then mid-way
			t.Run(fmt.Sprintf("rank %d at send %d", victim, after), func(t *testing.T) {
				net := NewMemNetwork(len(hosts))
				comms := make([]*Comm, len(hosts))
				for r := range comms {
					tr := net.Transport(r)
					if r == victim {
						k := &killAfter{Transport: tr, net: net}
						k.left.Store(after)
						tr = k
					}
					var err error
					if comms[r], err = New(tr, Options{Algo: Hierarchical, Hosts: hosts, ChunkBytes: 1024, Timeout: 20 * time.Second}); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				errs := onAll(comms, func(c *Comm) error {
					return c.AllReduceFloat32(context.Background(), make([]float32, 20000), Sum)
				})
				if d := time.Since(start); d > 5*time.Second {
					t.Fatalf("took %v: %v", d, errs)
				}
				for r, err := range errs {
					if r == victim {
						continue
					}
					if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank %d", victim)) {
						t.Fatalf("rank %d's error does not name rank %d: %v", r, victim, err)
					}
				}
			})
		}
	}
}

// TestHierarchicalMismatch: ranks that disagree on the hosts, or a rank
// that runs another algorithm, fail with a mismatch naming the grouping
// or the kind instead of waiting on each other; without hosts the
// hierarchical all-reduce is refused with what to do.
func TestHierarchicalMismatch(t *testing.T) {
	net := NewMemNetwork(4)
	comms := make([]*Comm, 4)
	for r := range comms {
		hosts := []string{"a", "a", "b", "b"}
		if r == 3 {
			hosts = []string{"a", "b", "a", "b"}
		}
		var err error
		if comms[r], err = New(net.Transport(r), Options{Algo: Hierarchical, Hosts: hosts, Timeout: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	errs := onAll(comms, func(c *Comm) error {
		return c.AllReduceFloat32(context.Background(), make([]float32, 1000), Sum)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 3 groups the ranks by host as [0 1 0 1]") {
			t.Fatalf("rank %d with different hosts on rank 3: %v", r, err)
		}
	}
	comms, _ = newMemComms(t, 2, Options{Algo: Hierarchical})
	err := comms[0].AllReduceFloat32(context.Background(), make([]float32, 10), Sum)
	if err == nil || !strings.Contains(err.Error(), "call LearnHosts or SetHosts") {
		t.Fatalf("hierarchical without hosts: %v", err)
	}
}

// TestLearnHosts: every rank learns every rank's host in one all-gather
// and Auto then chooses the hierarchical all-reduce.
func TestLearnHosts(t *testing.T) {
	comms, _ := newMemComms(t, 4, Options{})
	noErrors(t, onAll(comms, func(c *Comm) error {
		return c.LearnHosts(context.Background(), []string{"h0", "h0", "h1", "h1"}[c.Rank()])
	}))
	for _, c := range comms {
		if top, ok := c.Topology(); !ok || top.String() != "2 hosts × 2 peers" || c.AlgoFor(1<<20) != Hierarchical {
			t.Fatalf("rank %d after LearnHosts: %v %v, %s", c.Rank(), top, ok, c.AlgoFor(1<<20))
		}
	}
}
