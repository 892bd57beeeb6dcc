package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
)

// Host is one peer of a cluster whose membership changes (elastic
// training): the libp2p host, listening, with the cluster's identities,
// gater and limits, on which each generation of the run forms its own
// Transport over the peers it keeps (Form). Connections outlive the
// generations; streams do not. A peer the cluster lists may dial in at
// any time (a restarted worker); nobody else gets a connection.
type Host struct {
	base *Transport // the whole cluster's: identities, gater, addresses
	// mu guards addrs and gens: a slot listed without an address ("" in
	// Config.Peers: a cluster that may grow) gets one with SetAddr.
	mu    sync.Mutex
	addrs []ma.Multiaddr
	gens  []*Transport // formed, for Close to cut their same-host links
}

// Listen starts this peer's host for cfg's cluster (cfg.Rank is its index
// in cfg.Peers) without linking to anyone.
func Listen(cfg Config) (*Host, error) {
	t, addrs, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	t.ctx, t.stop = context.WithCancel(context.Background())
	for r, id := range t.ids {
		if r != t.cfg.Rank {
			t.host.ConnManager().Protect(id, protectTag)
			if addrs[r] != nil {
				t.host.Peerstore().AddAddr(id, addrs[r], peerAddrTTL)
			}
		}
	}
	return &Host{base: t, addrs: addrs}, nil
}

// SetAddr gives slot i, listed without an address, the address addr
// (host:port or a multiaddr, as Config.Peers): a worker discovered while
// the run goes on. Its identity is the slot's, derived from the cluster
// secret, so only a worker holding the secret can answer there.
func (h *Host) SetAddr(i int, addr string) error {
	if i < 0 || i >= len(h.base.ids) || i == h.base.cfg.Rank {
		return fmt.Errorf("p2p: no slot %d for %s in a cluster of %d (this peer is %d)", i, addr, len(h.base.ids), h.base.cfg.Rank)
	}
	addrs, _, err := resolvePeers(Config{Peers: []string{addr}, Security: h.base.cfg.Security, ClusterSecret: h.base.cfg.ClusterSecret})
	if err != nil {
		return fmt.Errorf("p2p: slot %d: %w", i, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.addrs[i]; old != nil {
		if old.Equal(addrs[0]) {
			return nil
		}
		return fmt.Errorf("p2p: slot %d is at %s already, not %s", i, old, addrs[0])
	}
	h.addrs[i] = addrs[0]
	h.base.host.Peerstore().AddAddr(h.base.ids[i], addrs[0], peerAddrTTL)
	return nil
}

// Known says whether slot i has an address.
func (h *Host) Known(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return i >= 0 && i < len(h.addrs) && h.addrs[i] != nil
}

// peerAddrTTL keeps the cluster's addresses for the life of the host.
const peerAddrTTL = 365 * 24 * time.Hour

// Self is this peer's index in the cluster list.
func (h *Host) Self() int { return h.base.cfg.Rank }

// Size is the number of peers the cluster lists.
func (h *Host) Size() int { return len(h.base.ids) }

// Libp2p is the host, for the protocols of the membership itself.
func (h *Host) Libp2p() host.Host { return h.base.host }

// PeerID is the identity of the cluster's peer i.
func (h *Host) PeerID(i int) peer.ID { return h.base.ids[i] }

// Index is the cluster index of peer p, if the cluster lists it.
func (h *Host) Index(p peer.ID) (int, bool) {
	i, ok := h.base.ranks[p]
	return i, ok
}

// Timeout is the configured bound on connecting and every Send.
func (h *Host) Timeout() time.Duration { return h.base.cfg.Timeout }

// Form returns generation gen's Transport over the cluster peers members
// (indices into the cluster list, in their rank order; this peer must be
// one): rank r of the Transport is cluster peer members[r]. Like New, it
// returns once a stream to every member is up and every member has the
// same list, or fails after the timeout naming who did not come. Its
// streams speak generation gen's protocol, so frames of another
// generation never reach it. Close ends the generation, not the host.
func (h *Host) Form(ctx context.Context, gen uint64, members []int) (*Transport, error) {
	b := h.base
	me := slices.Index(members, b.cfg.Rank)
	if me < 0 {
		return nil, fmt.Errorf("p2p: generation %d's members %v do not include this peer (%d)", gen, members, b.cfg.Rank)
	}
	cfg := b.cfg
	cfg.Rank = me
	t := &Transport{
		cfg: cfg, ids: make([]peer.ID, len(members)), ranks: map[peer.ID]int{}, inbox: collective.NewInbox(len(members)),
		log: b.log.With(zap.Uint64("generation", gen)), inbound: map[int]network.Stream{}, holdMax: b.holdMax, auth: b.auth,
		proto:     protocol.ID(string(ProtocolID) + "/gen/" + strconv.FormatUint(gen, 10)),
		viewProto: protocol.ID(string(ClusterProtocolID) + "/gen/" + strconv.FormatUint(gen, 10)),
		protect:   protectTag + "-gen-" + strconv.FormatUint(gen, 10),
	}
	addrs, err := h.memberAddrs(gen, members, t)
	if err != nil {
		return nil, err
	}
	if _, err := t.start(ctx, b.host, addrs); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.gens = append(slices.DeleteFunc(h.gens, (*Transport).isClosed), t)
	h.mu.Unlock()
	return t, nil
}

// memberAddrs fills in t's identities and returns the addresses of
// members, in rank order.
func (h *Host) memberAddrs(gen uint64, members []int, t *Transport) ([]ma.Multiaddr, error) {
	b := h.base
	addrs := make([]ma.Multiaddr, len(members))
	h.mu.Lock()
	defer h.mu.Unlock()
	for r, i := range members {
		if i < 0 || i >= len(b.ids) {
			return nil, fmt.Errorf("p2p: generation %d lists peer %d, outside the cluster's %d", gen, i, len(b.ids))
		}
		if _, dup := t.ranks[b.ids[i]]; dup {
			return nil, fmt.Errorf("p2p: generation %d lists peer %d twice", gen, i)
		}
		if h.addrs[i] == nil {
			return nil, fmt.Errorf("p2p: generation %d lists peer %d, whose address nobody gave (no discovery listed it)", gen, i)
		}
		t.ids[r], addrs[r] = b.ids[i], h.addrs[i]
		t.ranks[b.ids[i]] = r
	}
	return addrs, nil
}

// Close closes the host (after the generations' Transports): a
// generation still open loses its links with no goodbye, the same-host
// ones too, as in a crash.
func (h *Host) Close() error {
	// The host first: a peer that sees the same-host links go asks this
	// one who is left, and a host that still answers "running" would be
	// counted alive while it dies (an injected kill).
	h.base.stop()
	err := h.base.host.Close()
	h.mu.Lock()
	for _, t := range h.gens {
		t.closeLocal()
	}
	h.gens = nil
	h.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
