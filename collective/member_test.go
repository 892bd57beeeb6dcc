package collective

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// closeFails is a transport whose Close fails after closing it.
type closeFails struct{ Transport }

func (t closeFails) Close() error {
	return errors.Join(t.Transport.Close(), errors.New("close failed"))
}

// TestMember: members count their traffic and leave together; Leave joins
// the run's and Close's errors and names the rank; a Join that cannot make
// its Comm closes the transport.
func TestMember(t *testing.T) {
	net := NewMemNetwork(2)
	ms := make([]*Member, 2)
	for r := range ms {
		var tr Transport = net.Transport(r)
		if r == 1 {
			tr = closeFails{tr}
		}
		m, err := Join(tr, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ms[r] = m
	}
	errs := make([]error, 2)
	onAll([]*Comm{ms[0].Comm, ms[1].Comm}, func(c *Comm) error {
		r := c.Rank()
		err := c.AllReduceFloat32(context.Background(), []float32{1}, Sum)
		if sent, recv := ms[r].Traffic(); err == nil && (sent == 0 || recv == 0) {
			t.Errorf("rank %d counted %d bytes sent, %d received", r, sent, recv)
		}
		errs[r] = ms[r].Leave(context.Background(), err, true)
		return nil
	})
	if errs[0] != nil {
		t.Errorf("rank 0: %v", errs[0])
	}
	if errs[1] == nil || errs[1].Error() != "rank 1: close failed" {
		t.Errorf("rank 1: %v, want Close's error, naming rank 1", errs[1])
	}

	// A failed run skips the barrier (its peers may be gone).
	net = NewMemNetwork(2)
	m, err := Join(closeFails{net.Transport(1)}, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runErr := errors.New("the run failed")
	if err := m.Leave(context.Background(), runErr, true); !errors.Is(err, runErr) || err.Error() != "rank 1: the run failed\nclose failed" {
		t.Errorf("Leave after a failed run: %q, want the run's and Close's errors, naming rank 1", err)
	}

	net = NewMemNetwork(1)
	_, err = Join(closeFails{net.Transport(0)}, Options{ChunkBytes: 7})
	if err == nil || !strings.HasPrefix(err.Error(), "rank 0: ") || !strings.Contains(err.Error(), "multiple of 8") || !strings.Contains(err.Error(), "close failed") {
		t.Errorf("Join with bad options: %v, want the Comm's error and Close's, naming rank 0", err)
	}
}

// TestMemberLinks: the traffic is counted per link, headers included.
func TestMemberLinks(t *testing.T) {
	net := NewMemNetwork(3)
	ms := make([]*Member, 3)
	for r := range ms {
		m, err := Join(net.Transport(r), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ms[r] = m
	}
	ctx := context.Background()
	tr := ms[0].Comm.Transport()
	for to, size := range map[int]int{1: 100, 2: 5000} {
		if err := tr.Send(ctx, to, Header{Kind: KindP2P, DType: Bytes}, make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		f, err := ms[to].Comm.Transport().Recv(ctx, 0, PointToPoint)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	}
	want := []LinkTraffic{{Peer: 1, Sent: HeaderSize + 100}, {Peer: 2, Sent: HeaderSize + 5000}}
	if got := ms[0].Links(); !slices.Equal(got, want) {
		t.Errorf("rank 0's links %+v, want %+v", got, want)
	}
	want = []LinkTraffic{{Peer: 0, Received: HeaderSize + 5000}, {Peer: 1}}
	if got := ms[2].Links(); !slices.Equal(got, want) {
		t.Errorf("rank 2's links %+v, want %+v", got, want)
	}
}

// TestAllGatherJSON: every rank gets every rank's record, in rank order.
func TestAllGatherJSON(t *testing.T) {
	type rec struct {
		Rank int
		Name string
	}
	comms, _ := newMemComms(t, 3, Options{})
	got := make([][]rec, 3)
	noErrors(t, onAll(comms, func(c *Comm) error {
		var err error
		got[c.Rank()], err = AllGatherJSON(context.Background(), c, rec{c.Rank(), strings.Repeat("x", c.Rank())})
		return err
	}))
	want := []rec{{0, ""}, {1, "x"}, {2, "xx"}}
	for r := range got {
		if !slices.Equal(got[r], want) {
			t.Errorf("rank %d got %+v, want %+v", r, got[r], want)
		}
	}
}
