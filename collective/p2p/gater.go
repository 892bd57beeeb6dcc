package p2p

import (
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"
)

// gater admits connections only to and from the cluster's peer IDs.
type gater struct{ t *Transport }

func (g *gater) member(p peer.ID) bool {
	r, ok := g.t.ranks[p]
	return ok && r != g.t.cfg.Rank
}

func (g *gater) InterceptPeerDial(p peer.ID) bool { return g.member(p) }

func (g *gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.member(p) }

func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool { return true }

func (g *gater) InterceptSecured(dir network.Direction, p peer.ID, addrs network.ConnMultiaddrs) bool {
	if g.member(p) {
		return true
	}
	g.t.log.Warn("refused a connection from a peer outside the cluster",
		zap.Stringer("peer", p), zap.Stringer("addr", addrs.RemoteMultiaddr()), zap.Stringer("direction", dir))
	return false
}

func (g *gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
