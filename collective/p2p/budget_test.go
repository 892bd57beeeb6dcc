package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p/mux"
)

// probeHost is a libp2p host of the test's, running meshtrain's TLS and
// multiplexer (with cfg's window, and no budget of its own to hold it
// back) under key (a member's: the probe is a member gone bad).
func probeHost(t *testing.T, key crypto.PrivKey, cfg Config) host.Host {
	t.Helper()
	tr, err := mux.New(mux.Config{Window: initialWindow(cfg), MaxFrame: meshMaxFrame, Budget: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.Security(libp2ptls.ID, libp2ptls.New), libp2p.Muxer(mux.ID, tr),
		libp2p.Transport(tcp.NewTCPTransport), libp2p.NoListenAddrs, libp2p.DisableRelay(), libp2p.Ping(false),
		libp2p.ResourceManager(&network.NullResourceManager{})) // the probe's own limits do not hold it back
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// stallNegotiation opens a stream from h to p without negotiating a
// protocol and keeps sending what libp2p's protocol negotiation reads
// slowest: the multistream header, then empty proposals, each of which it
// must answer ("na") before it reads the next, while the peer's sender
// is not held back by anything but the stream's credit. It sends up to n
// bytes, for at most d, reads and drops the answers, and leaves the
// stream open (the caller resets it).
func stallNegotiation(ctx context.Context, h host.Host, p peer.ID, n int, d time.Duration) network.Stream {
	s, err := h.Network().NewStream(network.WithNoDial(ctx, "probe"), p)
	if err != nil {
		return nil
	}
	go func() { _, _ = io.Copy(io.Discard, s) }()
	_ = s.SetWriteDeadline(time.Now().Add(d))
	buf := append([]byte("\x13/multistream/1.0.0\n"), bytes.Repeat([]byte("\x01\n"), 32<<10)...)
	for sent := 0; sent < n; {
		k, err := s.Write(buf[:min(len(buf), n-sent)])
		sent += k
		if err != nil {
			break
		}
		buf = buf[20:] // the header once
	}
	return s
}

// stalled collects the probes' streams.
type stalled struct {
	mu      sync.Mutex
	streams []network.Stream
}

func (st *stalled) add(s network.Stream) {
	if s != nil {
		st.mu.Lock()
		st.streams = append(st.streams, s)
		st.mu.Unlock()
	}
}

func (st *stalled) reset() {
	for _, s := range st.streams {
		_ = s.Reset()
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC() // the pools' victim caches too
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// heldFor sums what h's connections to p committed and buffer (package
// mux's accounting).
func heldFor(h host.Host, p peer.ID) (committed uint64, buffered int) {
	for _, c := range h.Network().ConnsToPeer(p) {
		var mc *mux.Conn
		if c.As(&mc) {
			committed += mc.Committed()
			buffered += mc.Buffered()
		}
	}
	return committed, buffered
}

// TestHostileMemberMemoryBounded (issue 24 item 2): a member gone bad (it
// holds rank 1's key) connects to rank 0 twice besides the real rank 1,
// opens streams, keeps libp2p's protocol negotiation of each busy and
// sends as much as the multiplexer lets it. Rank 0 must hold no more for
// rank 1's peer ID than its documented budget: whatever the probe does,
// what its connections commit stays within peerBudget, and memory within
// twice that; a probe that goes over is disconnected and logged with its
// peer ID and the limit; the cluster still runs. Before, each stream was
// granted the whole window at accept, and a worker held window × streams
// × connections (1.59 GB in 20 s with 64 MiB windows).
func TestHostileMemberMemoryBounded(t *testing.T) {
	const window = 4 << 20
	core, logs := observer.New(zapcore.WarnLevel)
	peers := freeAddrs(t, 2, false)
	comms, ts := startWith(t, 2, collective.Options{Timeout: 20 * time.Second}, func(r int) (*Transport, error) {
		log := zap.NewNop()
		if r == 0 {
			log = zap.New(core)
		}
		return New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, Timeout: 20 * time.Second, StreamWindow: window, Logger: log})
	})
	cfg := ts[0].cfg
	budget := peerBudget(cfg)
	rank0, rank1 := ts[0].Host().ID(), ts[1].Host().ID()
	key, _ := DeriveIdentity(testSecret, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var probes []host.Host
	for range 2 {
		h := probeHost(t, key, cfg)
		if err := h.Connect(ctx, peer.AddrInfo{ID: rank0, Addrs: ts[0].Host().Addrs()}); err != nil {
			t.Logf("a probe's connection was refused: %v", err)
			continue
		}
		probes = append(probes, h)
	}
	if len(probes) == 0 {
		t.Fatal("no probe connected")
	}
	before := liveHeap() // the probes' hosts are the test's, not rank 0's
	// Within the budget: 10 streams per connection, each sent a whole
	// window if the multiplexer lets it.
	var peak uint64
	sample := func() {
		if c, b := heldFor(ts[0].Host(), rank1); c > peak {
			peak = c
			if uint64(b) > c {
				t.Errorf("rank 0 buffers %d bytes for rank 1's peer ID, more than the %d it committed", b, c)
			}
		}
	}
	var wg sync.WaitGroup
	var held stalled
	defer held.reset()
	for _, h := range probes {
		for range 10 {
			wg.Go(func() { held.add(stallNegotiation(ctx, h, rank0, window, time.Second)) })
		}
	}
	for done := waitGroupDone(&wg); ; {
		sample()
		select {
		case <-done:
		case <-time.After(5 * time.Millisecond):
			continue
		}
		break
	}
	grew := liveHeap() - before
	sample()
	_, buffered := heldFor(ts[0].Host(), rank1)
	t.Logf("%d probe connections of 2 kept (rank 0 allows %d each way), %d streams held: the heap grew %.1f MiB; rank 0 buffers %.1f MiB for rank 1's peer ID, and committed at most %.1f MiB of its %.1f MiB budget",
		kept(probes, rank0), maxPeerConns, len(held.streams), float64(grew)/(1<<20), float64(buffered)/(1<<20), float64(peak)/(1<<20), float64(budget)/(1<<20))
	if peak > budget {
		t.Errorf("rank 0 committed %d bytes for rank 1's peer ID, over its %d-byte budget", peak, budget)
	}
	// Buffered bytes take at most twice their number in chunks; the 20
	// negotiations under way have goroutines and make garbage as they go.
	if bound := 2*int64(budget) + 8<<20; grew > bound {
		t.Fatalf("the heap grew by %.1f MiB while a member's probe stalled its streams' negotiation; the bound is %.1f MiB (twice the peer's %.1f MiB budget, and 8 MiB)",
			float64(grew)/(1<<20), float64(bound)/(1<<20), float64(budget)/(1<<20))
	}

	// Over the budget: more streams than it allows. The probe is
	// disconnected, and that is logged with its peer ID and the limit.
	for _, h := range probes {
		for range 40 {
			wg.Go(func() { held.add(stallNegotiation(ctx, h, rank0, mux.BaseWindow, time.Second)) })
		}
	}
	wg.Wait()
	// Whichever comes first: the connection's budget or the peer's.
	limits := []string{fmt.Sprintf("over its %d-byte budget", connBudget(cfg)), fmt.Sprintf("over the %d-byte memory budget of a cluster peer's connections", budget)}
	found := func() bool {
		for _, e := range logs.FilterMessage("mux: closed the connection").All() {
			f := e.ContextMap()
			if f["peer"] == rank1.String() && matchesAny(fmt.Sprint(f["error"]), strings.Join(limits, "|")) {
				return true
			}
		}
		return false
	}
	// The probe's writes are done; rank 0 may still be reading them.
	for deadline := time.Now().Add(10 * time.Second); !found() && time.Now().Before(deadline); {
		sample()
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	if !found() {
		t.Fatalf("no warning that the probe went over the peer's budget, naming it and the limit: %v", logs.All())
	}
	if peak > budget {
		t.Errorf("rank 0 committed %d bytes for rank 1's peer ID, over its %d-byte budget", peak, budget)
	}
	for _, h := range probes {
		_ = h.Close()
	}
	// The cluster still runs.
	bufs := [][]float32{{1}, {2}}
	if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
		return c.AllReduceFloat32(ctx, bufs[c.Rank()], collective.Sum)
	})...); err != nil || bufs[0][0] != 3 {
		t.Fatalf("all-reduce after the probe: %v %v", err, bufs)
	}
}

// kept counts the hosts still connected to p.
func kept(hosts []host.Host, p peer.ID) int {
	n := 0
	for _, h := range hosts {
		if len(h.Network().ConnsToPeer(p)) > 0 {
			n++
		}
	}
	return n
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// TestConnectionsPerPeerCapped (issue 24 item 2): a member cannot open
// connections without end: beyond maxPeerConns each way the resource
// manager refuses them, and the refusal is logged with the peer's ID.
func TestConnectionsPerPeerCapped(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	peers := freeAddrs(t, 2, false)
	_, ts := startWith(t, 2, collective.Options{}, func(r int) (*Transport, error) {
		log := zap.NewNop()
		if r == 0 {
			log = zap.New(core)
		}
		return New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, Timeout: 20 * time.Second, Logger: log})
	})
	rank0, rank1 := ts[0].Host().ID(), ts[1].Host().ID()
	key, _ := DeriveIdentity(testSecret, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		h := probeHost(t, key, ts[0].cfg)
		_ = h.Connect(ctx, peer.AddrInfo{ID: rank0, Addrs: ts[0].Host().Addrs()}) // refused or not: rank 0 counts
	}
	inbound := 0
	for _, c := range ts[0].Host().Network().ConnsToPeer(rank1) {
		if c.Stat().Direction == network.DirInbound {
			inbound++
		}
	}
	if inbound > maxPeerConns {
		t.Fatalf("rank 0 has %d inbound connections from rank 1's peer ID, over the %d allowed", inbound, maxPeerConns)
	}
	found := false
	for _, e := range logs.FilterMessageSnippet("refused a connection: the peer already has as many connections").All() {
		found = found || e.ContextMap()["peer"] == rank1.String()
	}
	if !found {
		t.Fatalf("no warning naming the peer whose connections were refused: %v", logs.All())
	}
}
