package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective"
)

var testSecret = []byte("meshtrain test cluster secret 0123")

// freeAddrs returns n host:port addresses on 127.0.0.1 that were free a
// moment ago (UDP ports for QUIC).
func freeAddrs(t testing.TB, n int, udp bool) []string {
	t.Helper()
	addrs, err := LocalAddrs(n, udp)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// startCluster starts n transports on 127.0.0.1 (real ports) and returns
// their communicators.
func startCluster(t testing.TB, n int, sec Security, log *zap.Logger, opts collective.Options) ([]*collective.Comm, []*Transport) {
	return startClusterMuxer(t, n, sec, "", log, opts)
}

// startClusterMuxer is startCluster with the given stream multiplexer.
func startClusterMuxer(t testing.TB, n int, sec Security, m Muxer, log *zap.Logger, opts collective.Options) ([]*collective.Comm, []*Transport) {
	t.Helper()
	peers := freeAddrs(t, n, sec == SecurityQUIC)
	return startWith(t, n, opts, func(r int) (*Transport, error) {
		return New(context.Background(), Config{Rank: r, Peers: peers, Security: sec, Muxer: m, ClusterSecret: testSecret, Timeout: 20 * time.Second, Logger: log})
	})
}

// startMock starts n transports on the hosts of an in-process mocknet
// (linked, not yet connected: the transports dial as on a real network)
// and returns their communicators; mod, if set, adjusts rank r's Config.
func startMock(t testing.TB, n int, log *zap.Logger, opts collective.Options, mod func(r int, c *Config)) ([]*collective.Comm, []*Transport) {
	t.Helper()
	mn, err := mocknet.FullMeshLinked(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mn.Close() })
	hosts, peers := mockPeers(mn)
	return startWith(t, n, opts, func(r int) (*Transport, error) {
		cfg := Config{Rank: r, Peers: peers, Timeout: 20 * time.Second, Logger: log}
		if mod != nil {
			mod(r, &cfg)
		}
		return NewOnHost(context.Background(), hosts[r], cfg)
	})
}

// mockPeers returns mn's hosts and their addresses with peer IDs, as
// Config.Peers.
func mockPeers(mn mocknet.Mocknet) ([]host.Host, []string) {
	hosts := mn.Hosts()
	peers := make([]string, len(hosts))
	for r, h := range hosts {
		peers[r] = h.Addrs()[0].Encapsulate(ma.StringCast("/p2p/" + h.ID().String())).String()
	}
	return hosts, peers
}

// startWith starts n transports concurrently (each waits for the others)
// and returns them with their communicators.
func startWith(t testing.TB, n int, opts collective.Options, newTransport func(r int) (*Transport, error)) ([]*collective.Comm, []*Transport) {
	t.Helper()
	ts := make([]*Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { ts[r], errs[r] = newTransport(r) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(ts)
		t.Fatal(err)
	}
	comms := make([]*collective.Comm, n)
	for r := range n {
		c, err := collective.New(ts[r], opts)
		if err != nil {
			t.Fatal(err)
		}
		comms[r] = c
	}
	t.Cleanup(func() { closeAll(ts) })
	return comms, ts
}

// closeAll closes the transports at once, as a cluster shutting down does
// (one by one, each would wait for the others' goodbyes).
func closeAll(ts []*Transport) {
	var wg sync.WaitGroup
	for _, tr := range ts {
		if tr != nil {
			wg.Go(func() { _ = tr.Close() })
		}
	}
	wg.Wait()
}

func onAll(comms []*collective.Comm, f func(c *collective.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func TestDeriveIdentity(t *testing.T) {
	a, err := DerivePeerID(testSecret, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DerivePeerID(testSecret, 3)
	c, _ := DerivePeerID(testSecret, 4)
	d, _ := DerivePeerID(append(slices.Clone(testSecret), 'x'), 3)
	if a != b || a == c || a == d {
		t.Fatalf("derivation not deterministic per (secret, rank): %s %s %s %s", a, b, c, d)
	}
	if _, err := DeriveIdentity([]byte("short"), 0); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
}

// TestAllReduceOverLibp2p: every security on real ports.
func TestAllReduceOverLibp2p(t *testing.T) {
	for _, tc := range []struct {
		n   int
		sec Security
	}{{2, SecurityTLS}, {2, SecurityNoise}, {2, SecurityPlaintext}, {3, SecurityQUIC}} {
		t.Run(fmt.Sprintf("n%d/%s", tc.n, tc.sec), func(t *testing.T) {
			comms, _ := startCluster(t, tc.n, tc.sec, zap.NewNop(), collective.Options{Timeout: 20 * time.Second, ChunkBytes: 64 << 10})
			checkAllReduce(t, comms)
		})
	}
}

// TestAllReduceOnMocknet: cluster sizes, on in-process hosts.
func TestAllReduceOnMocknet(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			comms, _ := startMock(t, n, zap.NewNop(), collective.Options{Timeout: 20 * time.Second, ChunkBytes: 64 << 10}, nil)
			checkAllReduce(t, comms)
		})
	}
}

// checkAllReduce sums buffers of several lengths over comms.
func checkAllReduce(t *testing.T, comms []*collective.Comm) {
	t.Helper()
	n := len(comms)
	for _, length := range []int{0, 1, n + 1, 100003} {
		bufs := make([][]float32, n)
		for r := range bufs {
			bufs[r] = make([]float32, length)
			for i := range bufs[r] {
				bufs[r][i] = float32(r + i%7)
			}
		}
		errs := onAll(comms, func(c *collective.Comm) error {
			if err := c.AllReduceFloat32(context.Background(), bufs[c.Rank()], collective.Sum); err != nil {
				return err
			}
			return c.Barrier(context.Background())
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for r := range bufs {
			for i, v := range bufs[r] {
				want := float32(n*(i%7) + n*(n-1)/2)
				if v != want {
					t.Fatalf("len %d rank %d element %d = %v, want %v", length, r, i, v, want)
				}
			}
		}
	}
}

// TestStrangerRefused: a host with a key outside the cluster cannot open a
// stream to a worker, and the worker logs the refusal.
func TestStrangerRefused(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	comms, ts := startCluster(t, 2, SecurityTLS, zap.New(core), collective.Options{})
	stranger, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	target := peer.AddrInfo{ID: ts[0].Host().ID(), Addrs: ts[0].Host().Addrs()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := stranger.Connect(ctx, target); err == nil {
		if s, err := stranger.NewStream(ctx, target.ID, ProtocolID); err == nil {
			_ = collective.WriteFrame(s, collective.Header{Kind: collective.KindAbort, DType: collective.Bytes}, []byte("injected"))
			_ = s.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for logs.FilterMessageSnippet("outside the cluster").Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waits on a condition with a deadline
	}
	if logs.FilterMessageSnippet("outside the cluster").Len() == 0 {
		t.Fatal("the stranger's connection was not logged as refused")
	}
	// The cluster still works and saw no injected abort.
	bufs := [][]float32{{1}, {2}}
	if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
		return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], collective.Sum)
	})...); err != nil || bufs[0][0] != 3 {
		t.Fatalf("cluster after a stranger: %v %v", err, bufs)
	}
}

// TestWrongSecretRefused: a rank with another cluster secret has a peer ID
// the others do not accept, and fails to join.
func TestWrongSecretRefused(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secret := testSecret
			if r == 1 {
				secret = []byte("some other cluster's secret 9876")
			}
			var tr *Transport
			tr, errs[r] = New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: secret, Timeout: 2 * time.Second})
			if tr != nil {
				defer tr.Close()
			}
		}()
	}
	wg.Wait()
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("ranks with different secrets connected: %v / %v", errs[0], errs[1])
	}
}

func TestMismatchOverLibp2p(t *testing.T) {
	comms, _ := startMock(t, 3, zap.NewNop(), collective.Options{Timeout: 20 * time.Second}, nil)
	errs := onAll(comms, func(c *collective.Comm) error {
		length := 1000
		if c.Rank() == 2 {
			length = 999
		}
		return c.AllReduceFloat32(context.Background(), make([]float32, length), collective.Sum)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "float32×1000") || !strings.Contains(err.Error(), "float32×999") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestKilledPeer: a rank whose host disappears mid-run (no goodbye) makes
// the others fail fast with an error naming it. On real ports: what a
// crash looks like is the kernel resetting its TCP connections (mocknet's
// unbuffered streams block the survivors' writes, and the cancelled write
// that resets a survivor's link can then be what the third rank sees).
func TestKilledPeer(t *testing.T) {
	comms, ts := startCluster(t, 3, SecurityTLS, zap.NewNop(), collective.Options{Timeout: 15 * time.Second})
	start := time.Now()
	errs := onAll(comms, func(c *collective.Comm) error {
		if c.Rank() == 1 {
			return ts[1].Host().Close() // crash: connections drop without a bye
		}
		return c.AllReduceFloat32(context.Background(), make([]float32, 1<<20), collective.Sum)
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
	for _, r := range []int{0, 2} {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "rank 1") {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
	}
}

func TestBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no peers":      {Rank: 0},
		"bad address":   {Rank: 0, Peers: []string{"nonsense"}, ClusterSecret: testSecret},
		"no secret":     {Rank: 0, Peers: []string{"127.0.0.1:1"}},
		"quic over tcp": {Rank: 0, Peers: []string{"/ip4/127.0.0.1/tcp/1"}, Security: SecurityQUIC, ClusterSecret: testSecret},
		"bad security":  {Rank: 0, Peers: []string{"127.0.0.1:1"}, Security: "rot13", ClusterSecret: testSecret},
		"short psk":     {Rank: 0, Peers: []string{"127.0.0.1:0"}, ClusterSecret: testSecret, PSK: []byte("x")},
		"tiny window":   {Rank: 0, Peers: []string{"127.0.0.1:0"}, ClusterSecret: testSecret, StreamWindow: 64 << 10},
	} {
		if tr, err := New(context.Background(), cfg); err == nil {
			_ = tr.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	// Listed peer IDs win over the derived ones; a key that does not match
	// its listed ID is refused.
	other, _ := DerivePeerID(testSecret, 1)
	addr, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/1/p2p/" + other.String())
	if _, err := New(context.Background(), Config{Rank: 0, Peers: []string{addr.String()}, ClusterSecret: testSecret}); err == nil || !strings.Contains(err.Error(), "lists") {
		t.Errorf("mismatched identity: %v", err)
	}
}

func TestPSK(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	psk := []byte("0123456789abcdef0123456789abcdef")
	ts := make([]*Transport, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts[r], errs[r] = New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, PSK: psk, Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	defer closeAll(ts)
	comms := make([]*collective.Comm, 2)
	for r := range comms {
		comms[r], _ = collective.New(ts[r], collective.Options{})
	}
	if err := errors.Join(onAll(comms, func(c *collective.Comm) error { return c.Barrier(context.Background()) })...); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAllReduce64MiB: two in-process ranks over plaintext libp2p on
// loopback (for profiles; `meshtrain bench allreduce` is the real figure).
func BenchmarkAllReduce64MiB(b *testing.B) {
	for _, sec := range []Security{SecurityPlaintext, SecurityTLS} {
		for _, chunk := range []int{256 << 10, 1 << 20, 4 << 20} {
			for _, m := range []Muxer{MuxerMesh, MuxerYamux} {
				b.Run(fmt.Sprintf("%s/chunk%dK/%s", sec, chunk>>10, m), func(b *testing.B) {
					comms, _ := startClusterMuxer(b, 2, sec, m, zap.NewNop(), collective.Options{ChunkBytes: chunk})
					bufs := [][]float32{make([]float32, 16<<20), make([]float32, 16<<20)}
					b.SetBytes(64 << 20)
					var ru0, ru1 syscall.Rusage
					_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
					b.ResetTimer()
					allReduceN(b, comms, bufs)
					_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
					cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
					b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// BenchmarkPlaintextProof: what proving membership costs over plaintext,
// two in-process ranks all-reducing 64 MiB on loopback: the challenge in
// each connection's handshake (the default) against a private-network key
// (pnet, which encrypts every byte with XSalsa20), and TLS for reference.
// BENCHMARKS.md, "Proving membership over plaintext", alternates them.
func BenchmarkPlaintextProof(b *testing.B) {
	for _, tc := range []struct {
		name string
		sec  Security
		psk  []byte
	}{
		{"challenge", SecurityPlaintext, nil},
		{"psk", SecurityPlaintext, []byte("0123456789abcdef0123456789abcdef")},
		{"tls", SecurityTLS, nil},
	} {
		b.Run(tc.name, func(b *testing.B) {
			peers := freeAddrs(b, 2, false)
			comms, _ := startWith(b, 2, collective.Options{}, func(r int) (*Transport, error) {
				return New(context.Background(), Config{Rank: r, Peers: peers, Security: tc.sec, ClusterSecret: testSecret, PSK: tc.psk, Timeout: 20 * time.Second})
			})
			bufs := [][]float32{make([]float32, 16<<20), make([]float32, 16<<20)}
			b.SetBytes(64 << 20)
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			allReduceN(b, comms, bufs)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// allReduceN sums bufs over comms b.N times, every rank at once.
func allReduceN(b *testing.B, comms []*collective.Comm, bufs [][]float32) {
	for range b.N {
		if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
			return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], collective.Sum)
		})...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllReduce4KiB: four in-process ranks, recursive doubling over
// TLS (for profiles of the per-message path).
func BenchmarkAllReduce4KiB(b *testing.B) {
	comms, _ := startCluster(b, 4, SecurityTLS, zap.NewNop(), collective.Options{})
	bufs := make([][]float32, 4)
	for r := range bufs {
		bufs[r] = make([]float32, 1024)
	}
	b.ResetTimer()
	allReduceN(b, comms, bufs)
}

func TestIdentityAndPSKFiles(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/id.key"
	id, err := WriteIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteIdentity(path); err == nil || !strings.Contains(err.Error(), path+" exists: not overwriting") {
		t.Fatalf("WriteIdentity over an existing key: %v", err)
	}
	k, err := LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := peer.IDFromPrivateKey(k); got != id {
		t.Fatalf("loaded key has ID %s, wrote %s", got, id)
	}
	pskPath := dir + "/swarm.key"
	if err := os.WriteFile(pskPath, []byte("/key/swarm/psk/1.0.0/\n/base16/\n"+strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	psk, err := LoadPSK(pskPath)
	if err != nil || len(psk) != 32 || psk[0] != 0xab {
		t.Fatalf("LoadPSK: %x, %v", psk, err)
	}
	if _, err := LoadIdentity(pskPath); err == nil {
		t.Fatal("a swarm key was accepted as an identity")
	}
	if _, err := LoadPSK(path); err == nil {
		t.Fatal("an identity was accepted as a swarm key")
	}
}

// TestCloseWaitsForSlowReader: a rank that sends its last message and
// closes at once waits for the slower peer's goodbye (even one that never
// sent anything, whose stream it has not seen yet), so the peer gets the
// message, then sees a goodbye, not a reset.
func TestCloseWaitsForSlowReader(t *testing.T) {
	for trial := range 5 {
		comms, ts := startMock(t, 2, zap.NewNop(), collective.Options{Timeout: 10 * time.Second}, nil)
		ctx := context.Background()
		msg := make([]byte, 3<<20) // several frames, larger than socket buffers
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		closed := make(chan error, 1)
		go func() {
			if err := comms[0].Send(ctx, 1, 7, msg); err != nil {
				closed <- err
				return
			}
			closed <- ts[0].Close()
		}()
		got, err := comms[1].Recv(ctx, 0, 7)
		if err != nil || !slices.Equal(got, msg) {
			t.Fatalf("trial %d: the slower reader got %d bytes, %v: want the whole message before rank 0 leaves", trial, len(got), err)
		}
		_, err = comms[1].Recv(ctx, 0, 7)
		var pe *collective.PeerError
		if !errors.As(err, &pe) || pe.Reason != "closed its communicator" {
			t.Fatalf("trial %d: after the message: %v, want rank 0's goodbye", trial, err)
		}
		// Rank 1 never sent anything, so rank 0 has no stream from it
		// yet; rank 0 must still wait for its goodbye (up to the linger).
		select {
		case err := <-closed:
			t.Fatalf("trial %d: rank 0's Close returned (%v) before rank 1 said goodbye", trial, err)
		default:
		}
		if err := ts[1].Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-closed; err != nil {
			t.Fatalf("trial %d: rank 0: %v", trial, err)
		}
	}
}

// TestOversizeFrameDropsLink: a peer's frame longer than this rank's
// MaxFrame is refused from its header, before any of it is buffered, and
// the link goes down with an error naming that peer and the sizes.
func TestOversizeFrameDropsLink(t *testing.T) {
	_, ts := startMock(t, 2, zap.NewNop(), collective.Options{ChunkBytes: 1024}, func(r int, c *Config) {
		if r == 0 {
			c.MaxFrame = 1024
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Count: 4096}
	// The send may fail: mocknet's streams buffer nothing, so rank 1 can
	// still be writing the payload when rank 0 resets the stream.
	sent := make(chan error, 1)
	go func() { sent <- ts[1].Send(ctx, 0, h, make([]byte, 4096)) }()
	_, err := ts[0].Recv(ctx, 1, collective.PointToPoint)
	if serr := <-sent; serr != nil && !strings.Contains(serr.Error(), "rank 0 link down") {
		t.Errorf("rank 1 sending: %v, want success or rank 0's link down", serr)
	}
	var pe *collective.PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || pe.Reason != "link down" || !strings.Contains(err.Error(), "4096 bytes exceeds the 1024-byte limit") {
		t.Fatalf("rank 0 receiving an oversize frame from rank 1: %v, want rank 1's link down for a 4096-byte frame over the 1024-byte limit", err)
	}
}

// TestSecondStreamRefused: a cluster peer that opens another collective
// stream while its first is up (a bug, or a replayed connection) has the
// new one reset, and the link it already has keeps working.
func TestSecondStreamRefused(t *testing.T) {
	comms, ts := startMock(t, 2, zap.NewNop(), collective.Options{Timeout: 10 * time.Second}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exchange := func(what string) {
		t.Helper()
		if err := comms[1].Send(ctx, 0, 3, []byte(what)); err != nil {
			t.Fatalf("%s: rank 1 sending: %v", what, err)
		}
		if got, err := comms[0].Recv(ctx, 1, 3); err != nil || string(got) != what {
			t.Fatalf("%s: rank 0 got %q, %v", what, got, err)
		}
	}
	exchange("first") // rank 0 has now seen rank 1's stream
	s, err := ts[1].Host().NewStream(ctx, ts[0].Host().ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if err := collective.WriteFrame(s, collective.Header{Kind: collective.KindP2P, DType: collective.Bytes, Tag: 3, Count: 5}, []byte("extra")); err != nil {
		t.Fatalf("writing on the second stream: %v", err)
	}
	if n, err := s.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second stream: read %d bytes, %v: want it reset by rank 0", n, err)
	}
	exchange("after")
}

// TestNewOnHost: the transport takes the caller's host as it is, refuses a
// host whose peer ID is not its rank's, and Close leaves the host open
// for a new transport.
func TestNewOnHost(t *testing.T) {
	mn, err := mocknet.FullMeshLinked(2)
	if err != nil {
		t.Fatal(err)
	}
	defer mn.Close()
	hosts, peers := mockPeers(mn)
	if _, err := NewOnHost(context.Background(), hosts[1], Config{Rank: 0, Peers: peers}); err == nil || !strings.Contains(err.Error(), "lists") {
		t.Errorf("rank 0 on rank 1's host: %v", err)
	}
	if _, err := NewOnHost(context.Background(), hosts[0], Config{Rank: 0, Peers: peers, PSK: make([]byte, 32)}); err == nil || !strings.Contains(err.Error(), "the host's") {
		t.Errorf("a private-network key: %v", err)
	}
	for round := range 2 {
		comms, ts := startWith(t, 2, collective.Options{}, func(r int) (*Transport, error) {
			return NewOnHost(context.Background(), hosts[r], Config{Rank: r, Peers: peers, Timeout: 10 * time.Second})
		})
		if err := errors.Join(onAll(comms, func(c *collective.Comm) error { return c.Barrier(context.Background()) })...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		closeAll(ts)
	}
}

// landCounter counts the collective frames whose payload the reader put
// straight into the executor's buffer.
type landCounter struct {
	*Transport
	landed, frames atomic.Int64
}

func (l *landCounter) RecvInto(ctx context.Context, from int, ld *collective.Landing) (collective.Frame, error) {
	f, err := l.Transport.RecvInto(ctx, from, ld)
	if err == nil {
		l.frames.Add(1)
		if f.Landed {
			l.landed.Add(1)
		}
	}
	return f, err
}

// TestPayloadsLand: in a ring all-reduce over libp2p, the links' readers
// read most payloads straight into the destination (copied in the
// all-gather, folded from a small piece in the reduce-scatter) rather than
// into a pooled buffer the executor copies from, and the result is exact.
func TestPayloadsLand(t *testing.T) {
	for _, m := range []Muxer{MuxerMesh, MuxerYamux} {
		t.Run(string(m), func(t *testing.T) { testPayloadsLand(t, m) })
	}
}

func testPayloadsLand(t *testing.T, m Muxer) {
	const n, floats = 3, 1 << 20
	_, ts := startClusterMuxer(t, n, SecurityPlaintext, m, zap.NewNop(), collective.Options{})
	counters := make([]*landCounter, n)
	comms := make([]*collective.Comm, n)
	for r := range n {
		counters[r] = &landCounter{Transport: ts[r]}
		var err error
		if comms[r], err = collective.New(counters[r], collective.Options{Timeout: 20 * time.Second, ChunkBytes: 64 << 10, Algo: collective.Ring}); err != nil {
			t.Fatal(err)
		}
	}
	bufs := make([][]float32, n)
	for rep := range 3 {
		for r := range bufs {
			bufs[r] = make([]float32, floats)
			for i := range bufs[r] {
				bufs[r][i] = float32((i+r+rep)%1000) * 0.5
			}
		}
		if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
			return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], collective.Sum)
		})...); err != nil {
			t.Fatal(err)
		}
		for r := range bufs {
			for i, v := range bufs[r] {
				var want float32
				for q := range n {
					want += float32((i+q+rep)%1000) * 0.5
				}
				if v != want {
					t.Fatalf("rep %d rank %d element %d = %v, want %v", rep, r, i, v, want)
				}
			}
		}
	}
	for r, c := range counters {
		landed, frames := c.landed.Load(), c.frames.Load()
		t.Logf("rank %d: %d of %d frames landed", r, landed, frames)
		if frames == 0 || landed*2 < frames {
			t.Errorf("rank %d: only %d of %d frames landed in place", r, landed, frames)
		}
	}
}

// cancelMidFrame is a Send's writer that ends the Send's context once the
// frame's header is written, before its payload: what a collective that
// fails for another rank's reason does to a write under way.
type cancelMidFrame struct {
	io.Writer
	cancel context.CancelFunc
}

func (c *cancelMidFrame) Write(b []byte) (int, error) {
	n, err := c.Writer.Write(b)
	c.cancel()
	return n, err
}

// TestSendFinishesFrameAfterCancel: a Send whose context ends mid-frame
// finishes the frame (within collective.FrameGrace) instead of resetting
// the stream, so the link to a healthy peer stays up and in step: the
// frame after it (in a collective, the abort naming the rank that failed)
// arrives. Before, the reset made the peer see this rank's link go down.
func TestSendFinishesFrameAfterCancel(t *testing.T) {
	_, ts := startCluster(t, 2, SecurityPlaintext, zap.NewNop(), collective.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ts[0].writeHook = func(_ int, w io.Writer) io.Writer { return &cancelMidFrame{Writer: w, cancel: cancel} }
	h := collective.Header{Kind: collective.KindAllReduceRing, DType: collective.Bytes, Seq: 1, Count: 1 << 20}
	payload := bytes.Repeat([]byte{7}, 1<<20)
	if err := ts[0].Send(ctx, 1, h, payload); err != nil {
		t.Fatalf("a frame cancelled mid-write did not finish: %v", err)
	}
	ts[0].writeHook = nil
	h.Seq = 2
	if err := ts[0].Send(context.Background(), 1, h, []byte("next")); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	for seq, want := range [][]byte{payload, []byte("next")} {
		f, err := ts[1].Recv(rctx, 0, collective.Collective)
		if err != nil {
			t.Fatalf("frame %d: %v", seq+1, err)
		}
		if f.Seq != uint64(seq+1) || !bytes.Equal(f.Payload, want) {
			t.Fatalf("frame %d: got seq %d with %d bytes", seq+1, f.Seq, len(f.Payload))
		}
		f.Release()
	}
	if err := ts[1].Failure(); err != nil {
		t.Fatalf("the receiver saw a failure: %v", err)
	}
}

// TestSmallStreamWindow: a link's reader holds a collective frame back
// (its payload unread, in the stream window) until the executor offers
// its destination. With a window smaller than the frame the peer's send
// of it could not finish meanwhile, and an exchange in which each rank's
// next offer waits for its own send would wait out the timeout; readers
// hold back only frames that fit (Transport.holdMax). Every collective,
// with 1 MiB chunks over yamux's smallest window (256 KiB), must finish.
func TestSmallStreamWindow(t *testing.T) {
	const n, window, chunk = 3, 256 << 10, 1 << 20
	peers := freeAddrs(t, n, false)
	comms, ts := startWith(t, n, collective.Options{}, func(r int) (*Transport, error) {
		return New(context.Background(), Config{Rank: r, Peers: peers, Security: SecurityPlaintext, ClusterSecret: testSecret, Timeout: 20 * time.Second, StreamWindow: window})
	})
	const floats = 4 * chunk / 4
	for _, algo := range []collective.Algo{collective.Ring, collective.Tree, collective.Star} {
		for r := range comms {
			var err error
			if comms[r], err = collective.New(ts[r], collective.Options{Timeout: 10 * time.Second, Algo: algo, ChunkBytes: chunk}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
			buf := make([]float32, floats)
			for i := range buf {
				buf[i] = float32(c.Rank() + 1)
			}
			if err := c.AllReduceFloat32(context.Background(), buf, collective.Sum); err != nil {
				return err
			}
			if buf[0] != 6 || buf[floats-1] != 6 {
				return fmt.Errorf("rank %d: got %v…%v, want 6", c.Rank(), buf[0], buf[floats-1])
			}
			if algo != collective.Ring {
				return nil
			}
			if err := c.BroadcastFloat32(context.Background(), buf, 1); err != nil {
				return fmt.Errorf("broadcast: %w", err)
			}
			all, err := c.AllGatherV(context.Background(), make([]byte, 4*chunk))
			if err != nil || len(all) != n || len(all[n-1]) != 4*chunk {
				return fmt.Errorf("all-gather: %d parts, %w", len(all), err)
			}
			return nil
		})...); err != nil {
			t.Fatalf("%s: %v", algo, err)
		}
		t.Logf("%s: %v", algo, time.Since(start))
	}
}

// BenchmarkAllReduce64MiB4Ranks: four in-process ranks, plaintext, the
// default multiplexer (for profiles of the ring at N=4, where every rank
// sends and receives at once on this machine's two cores).
func BenchmarkAllReduce64MiB4Ranks(b *testing.B) {
	comms, _ := startCluster(b, 4, SecurityPlaintext, zap.NewNop(), collective.Options{})
	bufs := make([][]float32, 4)
	for r := range bufs {
		bufs[r] = make([]float32, 16<<20)
	}
	b.SetBytes(64 << 20)
	b.ResetTimer()
	allReduceN(b, comms, bufs)
}
