package p2p

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

// formAll forms generation gen over members on each of their hosts at
// once and returns their Comms by rank.
func formAll(t *testing.T, hosts []*Host, gen uint64, members []int) ([]*collective.Comm, []*Transport, []error) {
	t.Helper()
	comms, ts, errs := make([]*collective.Comm, len(members)), make([]*Transport, len(members)), make([]error, len(members))
	var wg sync.WaitGroup
	for r, i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tr, err := hosts[i].Form(ctx, gen, members)
			if err != nil {
				errs[r] = err
				return
			}
			ts[r] = tr
			comms[r], errs[r] = collective.New(tr, collective.Options{Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	return comms, ts, errs
}

// TestGenerations: three peers form generation 1 and all-reduce; one
// dies; the two left form generation 2 over the same hosts, ranks 0 and 1
// now being cluster peers 1 and 2, and all-reduce again; the dead peer's
// restart (a new host with its identity) joins them in generation 3.
func TestGenerations(t *testing.T) {
	for _, ih := range []IntraHost{IntraHostTLS, IntraHostAuto} {
		t.Run(string(ih), func(t *testing.T) { testGenerations(t, ih) })
	}
}

// testGenerations is TestGenerations with the peers' links to each other
// over their security (tls) or the same-host link (auto).
func testGenerations(t *testing.T, ih IntraHost) {
	peers := freeAddrs(t, 3, false)
	listenAll := func(idx ...int) []*Host {
		hosts := make([]*Host, 3)
		for _, i := range idx {
			h, err := Listen(Config{Rank: i, Peers: peers, ClusterSecret: testSecret, IntraHost: ih, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Close() })
			hosts[i] = h
		}
		return hosts
	}
	hosts := listenAll(0, 1, 2)
	check := func(gen uint64, members []int) []*Transport {
		comms, ts, errs := formAll(t, hosts, gen, members)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("generation %d, rank %d (peer %d): %v", gen, r, members[r], err)
			}
			for q, l := range ts[r].out {
				if q != r && (l.local != nil) != (ih == IntraHostAuto) {
					t.Fatalf("generation %d, rank %d's link to rank %d: same-host %v with --intra-host %s", gen, r, q, l.local != nil, ih)
				}
			}
		}
		errs = onAll(comms, func(c *collective.Comm) error {
			buf := []float32{float32(members[c.Rank()] + 1)}
			if err := c.AllReduceFloat32(context.Background(), buf, collective.Sum); err != nil {
				return err
			}
			want := float32(0)
			for _, i := range members {
				want += float32(i + 1)
			}
			if buf[0] != want {
				t.Errorf("generation %d rank %d: sum %v, want %v", gen, c.Rank(), buf[0], want)
			}
			return nil
		})
		for _, err := range errs {
			if err != nil {
				t.Fatalf("generation %d: %v", gen, err)
			}
		}
		return ts
	}
	ts := check(1, []int{0, 1, 2})
	_ = hosts[0].Close() // peer 0 dies: no goodbye
	closeAll(ts[1:])
	ts = check(2, []int{1, 2})
	closeAll(ts)
	hosts[0] = listenAll(0)[0]
	ts = check(3, []int{1, 2, 0})
	closeAll(ts)
	// Peers that disagree on the members fail at once, naming it.
	_, ts2, errs := formAll(t, hosts, 4, []int{1, 2})
	defer func() {
		for _, tr := range ts2 {
			if tr != nil {
				_ = tr.Close()
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hosts[0].Form(ctx, 4, []int{0, 1}); err == nil || !strings.Contains(err.Error(), "cluster list") {
		t.Errorf("forming with another member list: %v, want the difference named", err)
	}
	_ = errs
}

// TestHostGrows: a cluster listed with an empty slot forms without it; a
// generation naming the slot before it has an address fails naming it;
// once SetAddr gives it one (a worker discovered), the newcomer, whose
// identity is the slot's, forms generation 2 with the others. SetAddr
// refuses this peer's own slot, one outside the cluster, and a second
// address for a slot.
func TestHostGrows(t *testing.T) {
	all := freeAddrs(t, 3, false)
	listed := []string{all[0], all[1], ""}
	hosts := make([]*Host, 3)
	for i := range 3 {
		peers := listed
		if i == 2 {
			peers = all // the newcomer knows the cluster and itself
		}
		h, err := Listen(Config{Rank: i, Peers: peers, ClusterSecret: testSecret, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		hosts[i] = h
	}
	if hosts[0].Known(2) || !hosts[0].Known(1) {
		t.Fatalf("known: slot 2 %v, slot 1 %v; want the empty slot unknown", hosts[0].Known(2), hosts[0].Known(1))
	}
	if _, _, errs := formAll(t, hosts, 1, []int{0, 1}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("the listed peers: %v", errs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hosts[0].Form(ctx, 2, []int{0, 1, 2}); err == nil || !strings.Contains(err.Error(), "peer 2, whose address nobody gave") {
		t.Fatalf("forming with the unknown slot: %v, want it named", err)
	}
	for _, tc := range []struct {
		slot int
		addr string
		want string
	}{{0, all[2], "no slot 0"}, {3, all[2], "no slot 3"}, {2, "no-port", "slot 2"}} {
		if err := hosts[0].SetAddr(tc.slot, tc.addr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetAddr(%d, %q): %v, want %q", tc.slot, tc.addr, err, tc.want)
		}
	}
	for _, h := range hosts[:2] {
		if err := h.SetAddr(2, all[2]); err != nil {
			t.Fatal(err)
		}
		if err := h.SetAddr(2, all[2]); err != nil {
			t.Errorf("the same address again: %v", err)
		}
	}
	if err := hosts[0].SetAddr(2, all[1]); err == nil || !strings.Contains(err.Error(), "is at") {
		t.Errorf("another address for slot 2: %v, want it refused", err)
	}
	if _, _, errs := formAll(t, hosts, 3, []int{0, 1, 2}); errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("with the newcomer: %v", errs)
	}
}
