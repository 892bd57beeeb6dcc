package p2p

import (
	"fmt"
	"net"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// resolvePeers turns every entry of cfg.Peers into a dialable multiaddr and
// a peer ID.
func resolvePeers(cfg Config) ([]ma.Multiaddr, []peer.ID, error) {
	addrs := make([]ma.Multiaddr, len(cfg.Peers))
	ids := make([]peer.ID, len(cfg.Peers))
	for r, s := range cfg.Peers {
		var a ma.Multiaddr
		var err error
		if s == "" && r != cfg.Rank { // a slot of a cluster that may grow (Host.SetAddr): its identity, no address yet
			if ids[r], err = DerivePeerID(cfg.ClusterSecret, r); err != nil {
				return nil, nil, fmt.Errorf("p2p: peer %d has no address yet, and %w", r, err)
			}
			continue
		}
		if strings.HasPrefix(s, "/") {
			a, err = ma.NewMultiaddr(s)
		} else {
			a, err = hostPortAddr(s, cfg.Security)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("p2p: peer %d address %q: %w", r, s, err)
		}
		transport, id := ma.SplitFunc(a, func(c ma.Component) bool { return c.Protocol().Code == ma.P_P2P })
		if len(id) > 0 {
			pid, err := peer.IDFromP2PAddr(a)
			if err != nil {
				return nil, nil, fmt.Errorf("p2p: peer %d address %q: %w", r, s, err)
			}
			ids[r] = pid
		} else {
			if ids[r], err = DerivePeerID(cfg.ClusterSecret, r); err != nil {
				return nil, nil, fmt.Errorf("p2p: peer %d address %q has no /p2p/ peer ID and %w", r, s, err)
			}
		}
		isQUIC := false
		ma.ForEach(transport, func(c ma.Component) bool {
			isQUIC = isQUIC || c.Protocol().Code == ma.P_QUIC_V1
			return true
		})
		if isQUIC != (cfg.Security == SecurityQUIC) {
			return nil, nil, fmt.Errorf("p2p: peer %d address %q does not match security %q (QUIC needs /udp/…/quic-v1 addresses, the others /tcp/)", r, s, cfg.Security)
		}
		addrs[r] = transport
	}
	return addrs, ids, nil
}

func hostPortAddr(s string, sec Security) (ma.Multiaddr, error) {
	h, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("want host:port or a multiaddr: %w", err)
	}
	proto := "/ip4/" + h
	if ip := net.ParseIP(h); ip == nil {
		proto = "/dns/" + h
	} else if ip.To4() == nil {
		proto = "/ip6/" + h
	}
	if sec == SecurityQUIC {
		return ma.NewMultiaddr(proto + "/udp/" + port + "/quic-v1")
	}
	return ma.NewMultiaddr(proto + "/tcp/" + port)
}
