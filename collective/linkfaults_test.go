package collective

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pingPong times n round trips of a small frame between ranks 0 and 1 of
// ts and returns the median.
func pingPong(t *testing.T, ts []Transport, n int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := Header{Kind: KindP2P, DType: Bytes, Tag: 9}
	ping := make([]byte, 64)
	echoed := make(chan error, 1)
	go func() {
		for range n {
			f, err := ts[1].Recv(ctx, 0, PointToPoint)
			if err != nil {
				echoed <- err
				return
			}
			f.Release()
			if err := ts[1].Send(ctx, 0, h, ping); err != nil {
				echoed <- err
				return
			}
		}
		echoed <- nil
	}()
	rtts := make([]time.Duration, n)
	for i := range rtts {
		start := time.Now()
		if err := ts[0].Send(ctx, 1, h, ping); err != nil {
			t.Fatal(err)
		}
		f, err := ts[0].Recv(ctx, 1, PointToPoint)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
		rtts[i] = time.Since(start)
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
	slices.Sort(rtts)
	return rtts[n/2]
}

func delayedMem(n int, f LinkFaults) []Transport {
	net := NewMemNetwork(n)
	ts := make([]Transport, n)
	for r := range ts {
		ts[r] = DelayLinks(net.Transport(r), f)
	}
	return ts
}

// TestDelayLinksAddsRTT: a ping-pong of small frames takes 2×delay more
// with the delay injected on both ends, to within 0.3 ms.
func TestDelayLinksAddsRTT(t *testing.T) {
	for _, delay := range []time.Duration{500 * time.Microsecond, 2 * time.Millisecond} {
		base := pingPong(t, delayedMem(2, LinkFaults{}), 200)
		ts := delayedMem(2, LinkFaults{Delay: delay})
		got := pingPong(t, ts, 200)
		added := got - base
		t.Logf("delay %v: median RTT %v, %v without (+%v)", delay, got, base, added)
		if added < 2*delay || added > 2*delay+300*time.Microsecond {
			t.Errorf("delay %v added %v to the median round trip, want %v (to +0.3 ms)", delay, added, 2*delay)
		}
		for _, tr := range ts {
			if err := tr.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestDelayLinksInOrderWithoutBlocking: the sender does not wait out the
// delay; the frames arrive in order, none before it.
func TestDelayLinksInOrderWithoutBlocking(t *testing.T) {
	const delay, frames = 100 * time.Millisecond, 50
	ts := delayedMem(2, LinkFaults{Delay: delay})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	for i := range frames {
		if err := ts[0].Send(ctx, 1, Header{Kind: KindP2P, DType: Bytes, Tag: uint32(i)}, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if sent := time.Since(start); sent > delay/2 {
		t.Errorf("sending %d frames took %v: the sender waited for the delay", frames, sent)
	}
	for i := range frames {
		f, err := ts[1].Recv(ctx, 0, PointToPoint)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && time.Since(start) < delay {
			t.Errorf("first frame after %v, want ≥ %v", time.Since(start), delay)
		}
		if f.Tag != uint32(i) || f.Payload[0] != byte(i) {
			t.Fatalf("frame %d: tag %d payload %v: out of order", i, f.Tag, f.Payload)
		}
		f.Release()
	}
}

// TestDelayLinksRate: 4 MiB over a link paced to 160 Mbit/s (20 MB/s)
// takes about 0.21 s.
func TestDelayLinksRate(t *testing.T) {
	const total, frame = 4 << 20, 64 << 10
	ts := delayedMem(2, LinkFaults{Rate: 160_000_000})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	go func() {
		for range total / frame {
			if err := ts[0].Send(ctx, 1, Header{Kind: KindP2P, DType: Bytes}, make([]byte, frame)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range total / frame {
		f, err := ts[1].Recv(ctx, 0, PointToPoint)
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
	}
	want := time.Duration(float64(total+total/frame*HeaderSize) * 8 / 160e6 * float64(time.Second))
	if got := time.Since(start); got < want || got > want*3/2 {
		t.Errorf("4 MiB at 160mbit took %v, want %v (to +50%%)", got, want)
	}
}

// TestDelayLinksBitwiseIdentical: all-reduces over delayed, paced links
// give bitwise the result they give without, for every algorithm.
func TestDelayLinksBitwiseIdentical(t *testing.T) {
	const n = 4
	inputs := normalInputs(rand.New(rand.NewPCG(1, 2)), n, 70_001)
	run := func(f LinkFaults, algo Algo) [][]float32 {
		net := NewMemNetwork(n)
		comms := make([]*Comm, n)
		ms := make([]*Member, n)
		for r := range comms {
			m, err := Join(net.Transport(r), Options{Algo: algo, ChunkBytes: 64 << 10, LinkFaults: f, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ms[r], comms[r] = m, m.Comm
		}
		out := make([][]float32, n)
		noErrors(t, onAll(comms, func(c *Comm) error {
			out[c.Rank()] = slices.Clone(inputs[c.Rank()])
			err := c.AllReduceFloat32(context.Background(), out[c.Rank()], Sum)
			return ms[c.Rank()].Leave(context.Background(), err, true)
		}))
		return out
	}
	for _, algo := range []Algo{Ring, Tree, Star} {
		want := run(LinkFaults{}, algo)
		got := run(LinkFaults{Delay: 300 * time.Microsecond, Rate: 2_000_000_000}, algo)
		for r := range got {
			for i := range got[r] {
				if math.Float32bits(got[r][i]) != math.Float32bits(want[r][i]) {
					t.Fatalf("%v: rank %d element %d: %v with link faults, %v without", algo, r, i, got[r][i], want[r][i])
				}
			}
		}
	}
}

// TestDelayLinksCloseDelivers: frames still held back when the sender
// closes reach the peer before its goodbye.
func TestDelayLinksCloseDelivers(t *testing.T) {
	ts := delayedMem(2, LinkFaults{Delay: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts[0].Send(ctx, 1, Header{Kind: KindP2P, DType: Bytes}, []byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Close(); err != nil {
		t.Fatal(err)
	}
	f, err := ts[1].Recv(ctx, 0, PointToPoint)
	if err != nil || string(f.Payload) != "last words" {
		t.Fatalf("got %q, %v; want the frame sent before Close", f.Payload, err)
	}
	if _, err := ts[1].Recv(ctx, 0, PointToPoint); err == nil {
		t.Fatal("a second frame: want the goodbye")
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"1.8gbit", 1_800_000_000}, {"100mbit", 100_000_000}, {"64kbit", 64_000}, {" 1GBit ", 1_000_000_000}, {"9000bit", 9000}} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if back, err := ParseRate(FormatRate(got)); err != nil || back != got {
			t.Errorf("FormatRate(%d) = %q does not parse back: %d, %v", got, FormatRate(got), back, err)
		}
	}
	for _, bad := range []string{"", "1.8", "1.8gbps", "-1mbit", "1bit", "abcgbit"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}
