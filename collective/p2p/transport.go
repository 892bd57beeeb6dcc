package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/quicreuse"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p/intrahost"
	"github.com/meshtrain/meshtrain/collective/p2p/mux"
)

// ProtocolID names the collective stream protocol.
const ProtocolID protocol.ID = "/meshtrain/collective/1.0.0"

const (
	// DefaultTimeout bounds New (connecting to every peer) and each Send.
	DefaultTimeout = 60 * time.Second
	protectTag     = "meshtrain-cluster"
	dialRetry      = 100 * time.Millisecond
	// closeLinger bounds how long Close waits for peers to close their side.
	closeLinger = 2 * time.Second
)

// Security is the channel security of the cluster's links.
type Security string

// Securities. Plaintext must be chosen explicitly.
const (
	SecurityTLS       Security = "tls"
	SecurityNoise     Security = "noise"
	SecurityQUIC      Security = "quic"
	SecurityPlaintext Security = "plaintext"
)

// Muxer names a stream multiplexer.
type Muxer string

// Multiplexers.
const (
	MuxerMesh  Muxer = "mesh"
	MuxerYamux Muxer = "yamux"
)

// ParseMuxer parses mesh or yamux ("" means mesh).
func ParseMuxer(s string) (Muxer, error) {
	switch Muxer(s) {
	case "":
		return MuxerMesh, nil
	case MuxerMesh, MuxerYamux:
		return Muxer(s), nil
	}
	return "", fmt.Errorf("p2p: unknown stream multiplexer %q: want mesh or yamux", s)
}

// ParseSecurity parses tls, noise, quic or plaintext ("" means tls).
func ParseSecurity(s string) (Security, error) {
	switch Security(s) {
	case "":
		return SecurityTLS, nil
	case SecurityTLS, SecurityNoise, SecurityQUIC, SecurityPlaintext:
		return Security(s), nil
	}
	return "", fmt.Errorf("p2p: unknown security %q: want tls, noise, quic or plaintext", s)
}

// Config describes this rank and its cluster.
type Config struct {
	// Rank is this process's index into Peers.
	Rank int
	// Peers has one address per rank: "host:port", or a multiaddr such as
	// /ip4/10.0.0.1/tcp/7000/p2p/12D3Koo… (QUIC: /ip4/…/udp/…/quic-v1/…).
	Peers []string
	// Security of the links (default TLS).
	Security Security
	// ClusterSecret derives the identity of every rank whose address has no
	// /p2p/ part, and this rank's own key when Identity is nil.
	ClusterSecret []byte
	// Identity is this rank's key; nil derives it from ClusterSecret.
	Identity crypto.PrivKey
	// PSK, when set, is a 32-byte libp2p private-network key (TCP only).
	// Plaintext links need it or ClusterSecret: plaintext proves no peer
	// ID, so without a PSK every connection's handshake ends with a
	// challenge keyed by the secret (see auth.go).
	PSK []byte
	// Timeout bounds connecting in New and every Send.
	Timeout time.Duration
	// StreamWindow is the stream window in bytes, the same on every rank
	// (0: the default, see streamWindow); for experiments.
	StreamWindow uint32
	// Muxer is the stream multiplexer of TCP links: MuxerMesh (the
	// default, package mux) or MuxerYamux (go-yamux, for comparison).
	Muxer Muxer
	// MaxFrame bounds an inbound frame's payload (default
	// collective.DefaultMaxFrame).
	MaxFrame int
	// IntraHost says how links to peers on this host go: IntraHostTLS
	// (the zero value: over Security, as to any peer) or IntraHostAuto (a
	// shared-memory link, samehost.go). Compared between peers.
	IntraHost IntraHost
	// Logger receives refusals and link failures.
	Logger *zap.Logger
	// OnListening, if set, is called once this rank's host listens, before
	// it connects to the others (New only): a pod is then reachable, and
	// ready for the Service that publishes its name.
	OnListening func()
	// ListenHint, if set, replaces the guess in the error of an address
	// in use (that a second process was started as this rank) with what
	// the caller knows: where the port came from and how to choose
	// another (under Slurm, several jobs share a node's ports).
	ListenHint string
}

// Transport is a collective.Transport over libp2p streams.
type Transport struct {
	cfg   Config
	host  host.Host
	ids   []peer.ID
	ranks map[peer.ID]int
	inbox *collective.Inbox
	log   *zap.Logger
	out   []*outLink
	ctx   context.Context // ends on Close; bounds the readers
	stop  context.CancelFunc
	// ownHost says that New made the host, so Close closes it.
	ownHost bool
	// auth, if set, is the key of the plaintext challenge every
	// connection's handshake ends with (see DeriveAuthKey).
	auth []byte
	// holdMax is the largest payload a link's reader holds back, unread,
	// for the executor's next offer (Inbox.Claim's wait): the smallest
	// receive window a stream starts with, so that the peer's send of a
	// held frame always completes into the window. A held frame that did
	// not fit would leave that send unfinished, and an exchange in which
	// each rank's next offer waits for its own send would wait out the
	// timeout.
	holdMax uint32
	// writeHook, if set (by tests), wraps the writer of every Send.
	writeHook func(to int, w io.Writer) io.Writer
	// proto and viewProto are the collective and cluster-view protocols,
	// and protect the connection manager's tag: a generation's own
	// (Host.Form), so that a peer still in an earlier one never reaches
	// this one's streams.
	proto, viewProto protocol.ID
	protect          string
	// noLinger: Close does not wait for the peers' goodbyes (SkipLinger).
	noLinger atomic.Bool
	// local is the same-host side (samehost.go); nil: every link is libp2p's.
	local *localSide

	mu      sync.Mutex
	inbound map[int]network.Stream
	closed  bool // Close began: a second Close returns at once
	stopped bool // Close is tearing down: inbound streams are refused
	readers sync.WaitGroup
}

var (
	_ collective.Transport      = (*Transport)(nil)
	_ collective.DirectReceiver = (*Transport)(nil)
)

type outLink struct {
	sem   chan struct{} // one writer at a time, ctx-aware
	s     network.Stream
	local *intrahost.Sender // instead of s, to a peer on this host
}

// New starts this rank's host, connects to every other rank and opens the
// outbound streams. It returns once every outbound link is up, or fails
// after cfg.Timeout naming the ranks it could not reach.
func New(ctx context.Context, cfg Config) (*Transport, error) {
	t, addrs, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	return t.start(ctx, t.host, addrs)
}

// listen starts this rank's host for cfg's cluster: its identity, the
// gater that admits the cluster's peers only, the resource limits.
func listen(cfg Config) (*Transport, []ma.Multiaddr, error) {
	t, addrs, err := newTransport(cfg)
	if err != nil {
		return nil, nil, err
	}
	key := t.cfg.Identity
	if key == nil {
		if key, err = DeriveIdentity(t.cfg.ClusterSecret, t.cfg.Rank); err != nil {
			return nil, nil, fmt.Errorf("p2p: no identity for rank %d: %w", t.cfg.Rank, err)
		}
	}
	self, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("p2p: rank %d's key: %w", t.cfg.Rank, err)
	}
	if err := t.checkSelf(self); err != nil {
		return nil, nil, err
	}
	if err := t.plaintextAuth(); err != nil {
		return nil, nil, err
	}
	opts, err := t.hostOptions(key, addrs)
	if err != nil {
		return nil, nil, err
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, nil, t.listenError(addrs[t.cfg.Rank], err)
	}
	t.host, t.ownHost = h, true
	if cfg.OnListening != nil {
		cfg.OnListening()
	}
	return t, addrs, nil
}

// NewOnHost is New on a host the caller already has, such as one of
// go-libp2p's mocknet hosts in tests. The host's peer ID must be rank
// cfg.Rank's; its transports, security, listen addresses, connection gater
// and resource limits are the caller's (cfg.Security only says which kind
// of address cfg.Peers holds), so only the stream handler refuses
// strangers. Close leaves the host open.
func NewOnHost(ctx context.Context, h host.Host, cfg Config) (*Transport, error) {
	if cfg.Identity != nil || len(cfg.PSK) > 0 {
		return nil, errors.New("p2p: NewOnHost: the identity and the private-network key are the host's: leave Config.Identity and Config.PSK unset")
	}
	t, addrs, err := newTransport(cfg)
	if err != nil {
		return nil, err
	}
	if err := t.checkSelf(h.ID()); err != nil {
		return nil, err
	}
	return t.start(ctx, h, addrs)
}

// newTransport checks cfg (filling in defaults) and resolves the peers'
// addresses and IDs.
func newTransport(cfg Config) (*Transport, []ma.Multiaddr, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = collective.DefaultMaxFrame
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	sec, err := ParseSecurity(string(cfg.Security))
	if err != nil {
		return nil, nil, err
	}
	cfg.Security = sec
	if cfg.Muxer, err = ParseMuxer(string(cfg.Muxer)); err != nil {
		return nil, nil, err
	}
	if cfg.IntraHost, err = ParseIntraHost(string(cfg.IntraHost)); err != nil {
		return nil, nil, err
	}
	if cfg.StreamWindow > 0 && cfg.StreamWindow < minStreamWindow {
		return nil, nil, fmt.Errorf("p2p: StreamWindow of %d bytes is below the %d-byte minimum: raise it, or leave it 0 for the default", cfg.StreamWindow, minStreamWindow)
	}
	n := len(cfg.Peers)
	if err := CheckPeerCount(n); err != nil {
		return nil, nil, err
	}
	if n == 0 || cfg.Rank < 0 || cfg.Rank >= n {
		return nil, nil, fmt.Errorf("p2p: rank %d out of range for %d peers", cfg.Rank, n)
	}
	addrs, ids, err := resolvePeers(cfg)
	if err != nil {
		return nil, nil, err
	}
	t := &Transport{
		cfg: cfg, ids: ids, ranks: map[peer.ID]int{}, inbox: collective.NewInbox(n),
		log: cfg.Logger.With(zap.Int("rank", cfg.Rank)), inbound: map[int]network.Stream{},
		holdMax: initialWindow(cfg), proto: ProtocolID, viewProto: ClusterProtocolID, protect: protectTag,
	}
	for r, id := range ids {
		if prev, dup := t.ranks[id]; dup {
			return nil, nil, fmt.Errorf("p2p: ranks %d and %d have the same peer ID %s", prev, r, id)
		}
		t.ranks[id] = r
	}
	return t, addrs, nil
}

// checkSelf checks that this rank's peer ID is the one the cluster lists.
func (t *Transport) checkSelf(self peer.ID) error {
	if want := t.ids[t.cfg.Rank]; self != want {
		return fmt.Errorf("p2p: this rank's key has peer ID %s but the cluster spec lists %s for rank %d", self, want, t.cfg.Rank)
	}
	return nil
}

// plaintextAuth makes plaintext links prove membership: a peer ID over
// plaintext is claimed, not proven (anyone knowing a member's public key
// could take its place, and inject frames, which carry no MAC). A
// private-network key, if given, proves it; otherwise every connection's
// handshake ends with a challenge keyed by the cluster secret, before
// anything else is set up for the peer. It warns that the links are not
// authenticated.
func (t *Transport) plaintextAuth() error {
	if t.cfg.Security != SecurityPlaintext {
		return nil
	}
	proof := "the private-network key (PSK)"
	if len(t.cfg.PSK) == 0 {
		if len(t.cfg.ClusterSecret) == 0 {
			return errors.New("p2p: plaintext links with /p2p/ peer IDs and no cluster secret prove nobody's identity: any process that claims a listed peer ID would be admitted; give every peer the same cluster secret or private-network key (PSK), or choose tls or noise")
		}
		k, err := DeriveAuthKey(t.cfg.ClusterSecret)
		if err != nil {
			return err
		}
		t.auth, proof = k, "a challenge keyed by the cluster secret in every connection's handshake"
	}
	t.log.Warn("plaintext links: the data is not encrypted and frames are not authenticated (anyone on the network path can read or alter them); membership is proven by " + proof + ". Use tls or noise on networks you do not trust")
	return nil
}

// start takes the links to the other ranks up on h.
func (t *Transport) start(ctx context.Context, h host.Host, addrs []ma.Multiaddr) (*Transport, error) {
	t.host = h
	// From here on Close releases everything, t.ctx included.
	t.ctx, t.stop = context.WithCancel(context.Background())
	for r, id := range t.ids {
		if r != t.cfg.Rank {
			t.host.ConnManager().Protect(id, t.protect)
			t.host.Peerstore().AddAddr(id, addrs[r], time.Hour*24*365)
		}
	}
	t.listenLocal() // before anyone can ask for its name in the view
	t.host.SetStreamHandler(t.viewProto, t.handleClusterView)
	t.host.SetStreamHandler(t.proto, t.handleStream)
	if err := t.connectAll(ctx, addrs); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// listenAddr is where this rank listens: its own address, or all interfaces
// with its port when the address is a DNS name.
func listenAddr(a ma.Multiaddr) ma.Multiaddr {
	first, rest := ma.SplitFirst(a)
	if first != nil && (first.Protocol().Code == ma.P_DNS || first.Protocol().Code == ma.P_DNS4 || first.Protocol().Code == ma.P_DNS6) {
		any, _ := ma.NewMultiaddr("/ip4/0.0.0.0")
		return any.Encapsulate(rest)
	}
	return a
}

func (t *Transport) hostOptions(key crypto.PrivKey, addrs []ma.Multiaddr) ([]libp2p.Option, error) {
	self := addrs[t.cfg.Rank]
	cm, err := connmgr.NewConnManager(len(t.ids)+16, len(t.ids)+64)
	if err != nil {
		return nil, fmt.Errorf("p2p: connection manager: %w", err)
	}
	rm, err := t.resourceManager(addrs)
	if err != nil {
		return nil, fmt.Errorf("p2p: resource manager: %w", err)
	}
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrs(listenAddr(self)),
		libp2p.ConnectionGater(&gater{t: t}),
		libp2p.ConnectionManager(cm),
		libp2p.ResourceManager(rm),
		libp2p.DisableRelay(),
		libp2p.Ping(false),
	}
	m, err := muxerOption(t.cfg, t.log)
	if err != nil {
		return nil, err
	}
	opts = append(opts, m)
	// No SO_REUSEPORT: a second process started as the same rank must
	// fail to listen, not share the port and take half the connections.
	tcpOnly := libp2p.Transport(tcp.NewTCPTransport, tcp.DisableReuseport())
	switch t.cfg.Security {
	case SecurityTLS, SecurityNoise, SecurityPlaintext:
		opts = append(opts, tcpOnly, t.securityOption())
	case SecurityQUIC:
		if len(t.cfg.PSK) > 0 {
			return nil, errors.New("p2p: a private-network key (pnet) works over TCP only; choose tls, noise or plaintext, or drop the key")
		}
		opts = append(opts, libp2p.Transport(quic.NewTransport), libp2p.QUICReuse(quicreuse.NewConnManager, quicreuse.DisableReuseport()))
	}
	if len(t.cfg.PSK) > 0 {
		if len(t.cfg.PSK) != 32 {
			return nil, fmt.Errorf("p2p: private-network key of %d bytes: want 32", len(t.cfg.PSK))
		}
		opts = append(opts, libp2p.PrivateNetwork(pnet.PSK(t.cfg.PSK)))
	}
	return opts, nil
}

// connectAll dials every other rank (retrying while it starts up) and opens
// the outbound stream to it.
func (t *Transport) connectAll(ctx context.Context, addrs []ma.Multiaddr) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	t.out = make([]*outLink, len(t.ids))
	errs := make([]error, len(t.ids))
	var wg sync.WaitGroup
	for r := range t.ids {
		if r == t.cfg.Rank {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := t.openStream(ctx, r, addrs[r])
			if err != nil {
				errs[r] = fmt.Errorf("rank %d (%s at %s): %w", r, t.ids[r], addrs[r], err)
				if firstPermanent(errs[r:r+1]) != nil {
					cancel() // no use waiting for the others
				}
				return
			}
			t.out[r] = l
		}()
	}
	wg.Wait()
	if err := firstPermanent(errs); err != nil {
		return fmt.Errorf("p2p: rank %d cannot start: %w", t.cfg.Rank, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("p2p: rank %d could not reach every peer within %v: %w%s", t.cfg.Rank, t.cfg.Timeout, err, t.timeoutHint(errs))
	}
	return nil
}

func (t *Transport) openStream(ctx context.Context, r int, addr ma.Multiaddr) (*outLink, error) {
	var last error
	for {
		var theirs clusterView
		err := t.host.Connect(ctx, peer.AddrInfo{ID: t.ids[r], Addrs: []ma.Multiaddr{addr}})
		if err == nil {
			theirs, err = t.checkView(ctx, r)
		} else {
			err = t.dialError(r, err)
		}
		if firstPermanent([]error{err}) != nil {
			return nil, err
		}
		if err == nil {
			if local := t.dialLocal(ctx, r, theirs); local != nil {
				return &outLink{local: local}, nil
			}
			s, err := t.host.NewStream(network.WithAllowLimitedConn(ctx, "meshtrain"), t.ids[r], t.proto)
			if err == nil {
				// Negotiate the protocol now, not lazily on the first frame:
				// the remote host gives an inbound stream 10 s to finish
				// negotiating, and a peer slow to send its first frame (a
				// large shard to count, a loaded host) would otherwise have
				// its streams reset whatever the collective timeout says.
				// An empty write sends the protocol header at once.
				if _, err = s.Write(nil); err == nil {
					return &outLink{sem: make(chan struct{}, 1), s: s}, nil
				}
				_ = s.Reset()
			}
			last = err
		} else {
			last = err
		}
		if sw, ok := t.host.Network().(*swarm.Swarm); ok {
			sw.Backoff().Clear(t.ids[r]) // the peer may just be starting: retry now, not in seconds
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last dial error: %v)", ctx.Err(), last)
		case <-time.After(dialRetry):
		}
	}
}

// handleStream accepts a cluster peer's outbound stream and reads frames
// from it until it ends.
func (t *Transport) handleStream(s network.Stream) {
	remote := s.Conn().RemotePeer()
	r, ok := t.ranks[remote]
	if !ok || r == t.cfg.Rank {
		t.log.Warn("refused a collective stream from a peer outside the cluster", zap.Stringer("peer", remote), zap.Stringer("addr", s.Conn().RemoteMultiaddr()))
		_ = s.Reset()
		return
	}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		_ = s.Reset()
		return
	}
	if old := t.inbound[r]; old != nil {
		t.mu.Unlock()
		t.log.Warn("refused a second collective stream from a rank", zap.Int("from", r))
		_ = s.Reset()
		return
	}
	t.inbound[r] = s
	t.readers.Add(1)
	t.mu.Unlock()
	// Only now, the protocol negotiated and the peer checked, does the
	// stream get its whole window (package mux; a no-op on yamux and
	// QUIC): a stream the peer opens and fills while libp2p negotiates it
	// holds at most mux.BaseWindow. Before the reader starts, so that the
	// frames it holds back (holdMax) always fit.
	if err := mux.Grant(s); err != nil {
		// The multiplexer closed the connection and logged why.
		t.log.Warn("refused a collective stream: its window would take the peer over its memory budget", zap.Int("from", r), zap.Error(err))
		_ = s.Reset()
	}
	go func() {
		defer t.readers.Done()
		t.readLoop(r, streamSource{s: s, holdMax: t.holdMax})
	}()
}

// readLoop reads rank r's frames from src into the inbox until the link
// ends.
func (t *Transport) readLoop(r int, src frameSource) {
	maxFrame := uint32(t.cfg.MaxFrame)
	for {
		h, payload, err := src.Next(maxFrame)
		var f collective.Frame
		deliver := true
		if err == nil {
			if l := t.inbox.Claim(r, h, src.Held(h)); l != nil {
				// The executor waits for this payload in its own buffer:
				// read it there, with no copy through a pooled buffer.
				f, deliver, err = l.Fill(payload, src.Reset)
			} else if err = t.inbox.Reserve(t.ctx, r, h); err == nil {
				// Read only once the queue has room for it: meanwhile the
				// peer's sends wait for the stream window.
				f, err = collective.ReadPayload(payload, h)
			}
		}
		if err != nil {
			t.inbox.LinkDown(r, err)
			if t.ctx.Err() == nil && !errors.Is(err, network.ErrReset) {
				t.log.Debug("collective link ended", zap.Int("from", r), zap.Error(err))
			}
			src.Reset()
			return
		}
		src.Done()
		if !deliver {
			continue // its collective ended while it arrived
		}
		if err := t.inbox.Deliver(t.ctx, r, f); err != nil {
			src.Reset()
			return
		}
	}
}

// Rank implements collective.Transport.
func (t *Transport) Rank() int { return t.cfg.Rank }

// Size implements collective.Transport.
func (t *Transport) Size() int { return len(t.ids) }

// MaxFrame implements collective.Transport.
func (t *Transport) MaxFrame() int { return t.cfg.MaxFrame }

// Host is the libp2p host (for tests and diagnostics).
func (t *Transport) Host() host.Host { return t.host }

// Send implements collective.Transport. A write that fails resets the
// stream, so the link is then down for good: a partly written frame must
// never be followed by another one, which the peer would read as garbage.
// A write that ctx ends mid-frame has collective.FrameGrace to finish
// before the stream is reset: a collective that failed for another rank's
// reason then leaves this link whole, for the abort that follows.
func (t *Transport) Send(ctx context.Context, to int, h collective.Header, payload []byte) error {
	if to < 0 || to >= len(t.out) || to == t.cfg.Rank || t.out[to] == nil {
		return fmt.Errorf("p2p: rank %d has no link to rank %d", t.cfg.Rank, to)
	}
	if len(payload) > t.cfg.MaxFrame {
		return fmt.Errorf("p2p: %d-byte payload exceeds the %d-byte frame limit", len(payload), t.cfg.MaxFrame)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("before writing to rank %d: %w", to, err)
	}
	l := t.out[to]
	if l.local != nil {
		return t.sendLocal(ctx, to, l.local, h, payload)
	}
	select {
	case l.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting to write to rank %d: %w", to, ctx.Err())
	}
	defer func() { <-l.sem }()
	var w io.Writer = l.s
	if t.writeHook != nil {
		w = t.writeHook(to, w)
	}
	finish := collective.AfterGrace(ctx, func() { _ = l.s.Reset() })
	err := collective.WriteFrame(w, h, payload)
	if finish() && err == nil {
		// The grace ran out just as the write finished and the reset
		// already ran: the frame may never arrive, and the link is gone.
		err = errors.New("stream reset as the write ended")
	}
	if err != nil {
		_ = l.s.Reset()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return &collective.PeerError{Rank: to, Reason: "link down", Err: err}
	}
	return nil
}

// Failed implements collective.Transport.
func (t *Transport) Failed() context.Context { return t.inbox.Failed() }

// Failure implements collective.Transport.
func (t *Transport) Failure() error { return t.inbox.Failure() }

// RecvInto implements collective.DirectReceiver: the link's reader lands
// the payload in the executor's buffer.
func (t *Transport) RecvInto(ctx context.Context, from int, l *collective.Landing) (collective.Frame, error) {
	return t.inbox.RecvInto(ctx, from, l)
}

// Recv implements collective.Transport.
func (t *Transport) Recv(ctx context.Context, from int, ch collective.Channel) (collective.Frame, error) {
	return t.inbox.Recv(ctx, from, ch)
}

// SkipLinger makes Close of a generation's Transport (Host.Form) leave
// without waiting for the peers' goodbyes: after a failure that this
// peer found first (a peer that hangs), waiting would only delay the next
// generation.
func (t *Transport) SkipLinger() { t.noLinger.Store(true) }

// Close says goodbye on every outbound stream, closes them and, if New
// made it, the host.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	var wg sync.WaitGroup
	for r, l := range t.out {
		if l == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := t.Send(ctx, r, collective.Header{Kind: collective.KindBye}, nil); err == nil {
				l.closeWrite()
			}
		}()
	}
	wg.Wait()
	// Wait (briefly) for every peer's goodbye, or its link's failure,
	// including peers whose stream has not reached us yet (it is still
	// accepted and read meanwhile): closing the connection while their
	// last frames are unread would make the kernel reset it and drop
	// frames a peer still needs.
	wait := closeLinger
	if !t.ownHost && (t.inbox.Failure() != nil || t.noLinger.Load()) {
		// A failed generation (Host.Form): nobody waits for its frames,
		// and the next one should not wait for a peer that hangs.
		wait = 0
	}
	linger, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for r := range t.ids {
		if r == t.cfg.Rank {
			continue
		}
		select {
		case <-t.inbox.Down(r):
		case <-linger.Done():
		}
	}
	t.mu.Lock()
	t.stopped = true
	inbound := slices.Collect(maps.Values(t.inbound))
	t.mu.Unlock()
	t.stop()
	t.inbox.Close()
	var err error
	if t.ownHost {
		err = t.host.Close()
	} else {
		// The caller's host lives on: end what this transport added.
		t.host.RemoveStreamHandler(t.proto)
		t.host.RemoveStreamHandler(t.viewProto)
		for _, s := range inbound {
			_ = s.Reset()
		}
		for r, id := range t.ids {
			if r != t.cfg.Rank {
				t.host.ConnManager().Unprotect(id, t.protect)
			}
		}
	}
	t.closeLocal()
	t.readers.Wait()
	return err
}
