package p2p

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	goyamux "github.com/libp2p/go-yamux/v5"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/x/rate"
	"github.com/meshtrain/meshtrain/collective/p2p/mux"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"go.uber.org/zap"
)

// Stream windows, identical on every rank. A collective stream carries a
// steady flow of chunks, so its window starts at the maximum: go-yamux
// grows a window only when it is used up within 4× an RTT measured on the
// idle link at connect (and every 30 s), which on real links it never is,
// and then each window update waits behind up to a window of the other
// direction's data, halving the link rate when traffic flows both ways.
// 64 MiB because on the emulated hosts large all-reduces still lost part
// of the link to window updates with 16 MiB windows, and not with 64 MiB
// (BENCHMARKS.md, "Figures behind the code": stream windows, and "Across
// emulated hosts", yamux windows). A window is a bound, not an
// allocation: memory is used only for data the reader has not taken yet.
// Package mux's windows are the same size for the same reasons; its
// frames are at most 1 MiB, as yamux's are here (fewer headers than
// yamux's default 64 KiB; the security layer still cuts TLS records at
// 16 KiB).
var (
	streamWindow      uint32 = 64 << 20
	yamuxMaxMessage   uint32 = 1 << 20
	meshMaxFrame      uint32 = 1 << 20
	minStreamWindow   uint32 = 256 << 10 // go-yamux's smallest, and package mux's
	quicInitialWindow uint32 = 512 << 10 // quic-go's default, which libp2p keeps; it grows only as data is read
)

// initialWindow is the receive window every collective stream of cfg
// starts with (package mux's streams have it from the grant handleStream
// gives once the stream is checked, before its reader starts).
func initialWindow(cfg Config) uint32 {
	switch {
	case cfg.Security == SecurityQUIC:
		return quicInitialWindow
	case cfg.StreamWindow > 0:
		return cfg.StreamWindow
	}
	return streamWindow
}

// Memory budgets (issue 24 item 2). What a peer can make this rank hold
// unread in package mux's streams is committed before it is buffered:
// every stream commits mux.BaseWindow (256 KiB) from its opening and the
// one stream p2p grants per peer, the collective stream, its whole window.
// Beyond that one window, which training needs (the link's reader may
// hold frames back for the executor), a connection commits at most
// connSpare streams' base windows, and a peer, over all its connections
// (at most maxPeerConns each way, in the resource manager), peerSpare:
// 64 + 4 = 68 MiB per connection and 64 + 8 = 72 MiB per peer with the
// default 64 MiB window. A cluster needs 5 streams on a connection at
// most (the collective stream each way, identify each way, a cluster
// view). A peer that goes over is disconnected and the reason logged.
const (
	connSpare    = 16
	peerSpare    = 32
	maxPeerConns = 2
)

// meshWindow is package mux's stream window under cfg.
func meshWindow(cfg Config) uint32 {
	if cfg.StreamWindow > 0 {
		return cfg.StreamWindow
	}
	return streamWindow
}

// connBudget is what a connection may commit to buffer for its peer.
func connBudget(cfg Config) uint64 { return uint64(meshWindow(cfg)) + connSpare*mux.BaseWindow }

// peerBudget is what a cluster peer's connections together may commit,
// its memory limit in the resource manager.
func peerBudget(cfg Config) uint64 { return uint64(meshWindow(cfg)) + peerSpare*mux.BaseWindow }

// muxerOption registers cfg's stream multiplexer with the host; log gets
// its reasons for closing a connection.
func muxerOption(cfg Config, log *zap.Logger) (libp2p.Option, error) {
	window := initialWindow(cfg)
	if cfg.Muxer == MuxerYamux {
		yc := *(*goyamux.Config)(yamux.DefaultTransport)
		yc.InitialStreamWindowSize, yc.MaxStreamWindowSize = window, window
		yc.MaxMessageSize = yamuxMaxMessage
		return libp2p.Muxer(yamux.ID, (*yamux.Transport)(&yc)), nil
	}
	// A connection whose peer does not take a frame within Timeout (a
	// Send's bound) is closed, so nothing waits on a stopped peer past it.
	tr, err := mux.New(mux.Config{Window: window, MaxFrame: meshMaxFrame, WriteTimeout: cfg.Timeout, Budget: connBudget(cfg), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("p2p: %w", err)
	}
	return libp2p.Muxer(mux.ID, budgeted{tr, peerBudget(cfg)}), nil
}

// budgeted is package mux with the peer's scope telling, when it refuses
// memory, what a cluster peer's limit is (the resource manager's error
// does not).
type budgeted struct {
	*mux.Transport
	limit uint64
}

func (b budgeted) NewConn(nc net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	if scope != nil {
		scope = limitedScope{scope, b.limit}
	}
	return b.Transport.NewConn(nc, isServer, scope)
}

type limitedScope struct {
	network.PeerScope
	limit uint64
}

func (s limitedScope) ReserveMemory(n int, prio uint8) error {
	if err := s.PeerScope.ReserveMemory(n, prio); err != nil {
		return fmt.Errorf("over the %d-byte memory budget of a cluster peer's connections (%w)", s.limit, err)
	}
	return nil
}

// resourceManager keeps libp2p's default limits for everyone but sets
// them for cluster peers: any number of streams (package mux bounds what
// they hold), maxPeerConns connections each way (one each way is what two
// ranks dialling each other make; one more for a peer that restarts
// before its old connection is found dead), and the memory of peerBudget
// (what package mux's connections of the peer commit; yamux's windows
// start at their maximum and never charge it; quic-go charges its
// connection windows, at most 15 MiB a connection). The system's memory
// is not limited: the peers' limits are the bound. It exempts the peers'
// addresses from the per-IP connection rate limit, as libp2p exempts
// localhost: a peer that starts late is dialled every dialRetry by every
// other rank, which spends the default budget (a burst of 16, then one
// per 5 s) long before it is up. A connection refused over a cluster
// peer's limits is logged (peerLimitLog).
func (t *Transport) resourceManager(addrs []ma.Multiaddr) (network.ResourceManager, error) {
	member := rcmgr.ResourceLimits{
		Streams: rcmgr.Unlimited, StreamsInbound: rcmgr.Unlimited, StreamsOutbound: rcmgr.Unlimited,
		Conns: 2 * maxPeerConns, ConnsInbound: maxPeerConns, ConnsOutbound: maxPeerConns,
		FD: 2 * maxPeerConns, Memory: rcmgr.LimitVal64(peerBudget(t.cfg)),
	}
	part := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{Memory: rcmgr.Unlimited64},
		Peer:   map[peer.ID]rcmgr.ResourceLimits{},
		Conn:   rcmgr.ResourceLimits{Memory: rcmgr.Unlimited64},
		Stream: rcmgr.ResourceLimits{Memory: rcmgr.Unlimited64},
	}
	for _, id := range t.ids {
		part.Peer[id] = member
	}
	def := rcmgr.DefaultLimits
	return rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(part.Build(def.AutoScale())),
		rcmgr.WithConnRateLimiters(connRateLimiter(addrs)), rcmgr.WithMetrics(peerLimitLog{t}))
}

// peerLimitLog logs the connections the resource manager refuses a peer
// (over maxPeerConns); its other reports are ignored.
type peerLimitLog struct{ t *Transport }

var _ rcmgr.MetricsReporter = peerLimitLog{}

func (l peerLimitLog) BlockPeer(p peer.ID) {
	fields := []zap.Field{zap.Stringer("peer", p), zap.Int("limit_each_way", maxPeerConns)}
	if r, ok := l.t.ranks[p]; ok {
		fields = append(fields, zap.Int("claimed_rank", r))
	}
	l.t.log.Warn("refused a connection: the peer already has as many connections as a cluster peer may", fields...)
}

func (peerLimitLog) AllowConn(network.Direction, bool)      {}
func (peerLimitLog) BlockConn(network.Direction, bool)      {}
func (peerLimitLog) AllowStream(peer.ID, network.Direction) {}
func (peerLimitLog) BlockStream(peer.ID, network.Direction) {}
func (peerLimitLog) AllowPeer(peer.ID)                      {}
func (peerLimitLog) AllowProtocol(protocol.ID)              {}
func (peerLimitLog) BlockProtocol(protocol.ID)              {}
func (peerLimitLog) BlockProtocolPeer(protocol.ID, peer.ID) {}
func (peerLimitLog) AllowService(string)                    {}
func (peerLimitLog) BlockService(string)                    {}
func (peerLimitLog) BlockServicePeer(string, peer.ID)       {}
func (peerLimitLog) AllowMemory(int)                        {}
func (peerLimitLog) BlockMemory(int)                        {}

// connRateLimiter is libp2p's default connection rate limiter with every
// cluster address exempt (a zero Limit is no limit).
func connRateLimiter(addrs []ma.Multiaddr) *rate.Limiter {
	exempt := []rate.PrefixLimit{
		{Prefix: netip.MustParsePrefix("127.0.0.0/8")},
		{Prefix: netip.MustParsePrefix("::1/128")},
	}
	for _, a := range addrs {
		if ip, err := manet.ToIP(a); err == nil {
			if addr, ok := netip.AddrFromSlice(ip); ok {
				addr = addr.Unmap()
				exempt = append(exempt, rate.PrefixLimit{Prefix: netip.PrefixFrom(addr, addr.BitLen())})
			}
		}
	}
	return &rate.Limiter{
		NetworkPrefixLimits: exempt,
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: rate.Limit{RPS: 0.2, Burst: 16}}},
			IPv6SubnetLimits: []rate.SubnetLimit{{PrefixLength: 56, Limit: rate.Limit{RPS: 0.2, Burst: 16}}, {PrefixLength: 48, Limit: rate.Limit{RPS: 0.5, Burst: 80}}},
			GracePeriod:      time.Minute,
		},
	}
}
