package launch

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
)

// ElasticProtocolID carries the membership protocol of elastic runs
// (mirrored.Elastic): small questions and answers between the cluster's
// peers, on the host that outlives the generations.
const ElasticProtocolID protocol.ID = "/meshtrain/elastic/1.0.0"

// maxElasticMessage bounds a message of the membership protocol (a few
// hundred bytes in practice): a peer cannot make another hold more.
const maxElasticMessage = 64 << 10

// elasticTimeout bounds reading a question and writing its answer.
const elasticTimeout = 5 * time.Second

// elasticNet is a mirrored.Membership over one libp2p host: each
// generation a collective.Member over the generation's Transport.
type elasticNet struct {
	h    *p2p.Host
	opts collective.Options
	log  *zap.Logger
	host string // --host-id: every generation learns its members' hosts (the hierarchical all-reduce's choice)

	mu     sync.Mutex
	member *collective.Member // the current generation's
	// disc, if set, gives new workers their slots (Grow): a generation
	// with a member whose address this peer has not seen yet asks it
	// again before it fails.
	disc *discovery
}

var _ mirrored.Membership = (*elasticNet)(nil)

func (n *elasticNet) Self() int { return n.h.Self() }
func (n *elasticNet) Size() int { return n.h.Size() }

// Form implements mirrored.Membership.
func (n *elasticNet) Form(ctx context.Context, gen uint64, members []int) (mirrored.Group, func(bool) error, error) {
	if n.disc != nil && slices.ContainsFunc(members, func(p int) bool { return p != n.h.Self() && !n.h.Known(p) }) {
		n.disc.once(ctx) // the others saw a new worker that this peer has not yet
	}
	t, err := n.h.Form(ctx, gen, members)
	if err != nil {
		return nil, nil, err
	}
	m, err := collective.Join(t, n.opts)
	if err != nil {
		return nil, nil, err
	}
	if err := learnHosts(ctx, m.Comm, n.host); err != nil {
		t.SkipLinger()
		lctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
		defer cancel()
		return nil, nil, m.Leave(lctx, err, false) // err, joined with any error closing
	}
	n.mu.Lock()
	n.member = m
	n.mu.Unlock()
	end := func(failed bool) error {
		if failed {
			t.SkipLinger() // nobody waits for a failed generation's frames
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.Timeout)
		defer cancel()
		return m.Leave(ctx, nil, false)
	}
	return mirrored.NewGroup(m.Comm), end, nil
}

// current is the current generation's member.
func (n *elasticNet) current() *collective.Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.member
}

// Ask implements mirrored.Membership: one stream per question.
func (n *elasticNet) Ask(ctx context.Context, to int, msg []byte) ([]byte, error) {
	if to < 0 || to >= n.h.Size() {
		return nil, fmt.Errorf("no peer %d in a cluster of %d", to, n.h.Size())
	}
	s, err := n.h.Libp2p().NewStream(network.WithAllowLimitedConn(ctx, "meshtrain"), n.h.PeerID(to), ElasticProtocolID)
	if err != nil {
		return nil, fmt.Errorf("peer %d: %w", to, err)
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := writeMessage(s, msg); err != nil {
		return nil, fmt.Errorf("asking peer %d: %w", to, err)
	}
	_ = s.CloseWrite()
	b, err := readMessage(s)
	if err != nil {
		return nil, fmt.Errorf("peer %d's answer: %w", to, err)
	}
	return b, nil
}

// Serve implements mirrored.Membership.
func (n *elasticNet) Serve(answer func(from int, msg []byte) []byte) {
	n.h.Libp2p().SetStreamHandler(ElasticProtocolID, func(s network.Stream) {
		defer s.Close()
		from, ok := n.h.Index(s.Conn().RemotePeer())
		if !ok { // the gater admits the cluster's peers only; in case
			n.log.Warn("refused a membership question from a peer outside the cluster", zap.Stringer("peer", s.Conn().RemotePeer()))
			_ = s.Reset()
			return
		}
		_ = s.SetDeadline(time.Now().Add(elasticTimeout))
		msg, err := readMessage(s)
		if err != nil {
			_ = s.Reset()
			return
		}
		if !n.h.Known(from) && !statusQuestion(msg) {
			// A new worker, with the secret, that --discover-cmd has not
			// listed yet: it learns that a run is on, and is admitted
			// once listed (every member must be able to reach it).
			n.log.Debug("a worker asks to join before --discover-cmd listed it", zap.Int("slot", from))
			_ = s.Reset()
			return
		}
		if err := writeMessage(s, answer(from, msg)); err != nil {
			_ = s.Reset()
		}
	})
}

// statusQuestion says whether msg asks for this peer's status only.
func statusQuestion(msg []byte) bool {
	var m struct {
		Kind membership.Kind `json:"kind"`
	}
	return json.Unmarshal(msg, &m) == nil && m.Kind == membership.Status
}

// writeMessage writes b with its length.
func writeMessage(w io.Writer, b []byte) error {
	if len(b) > maxElasticMessage {
		return fmt.Errorf("a %d-byte membership message: the limit is %d", len(b), maxElasticMessage)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	_, err := w.Write(append(hdr[:], b...))
	return err
}

// readMessage reads a message writeMessage wrote, refusing one over the
// limit before reading it.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxElasticMessage {
		return nil, errors.New("membership message over the limit")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// runElastic is RunWorker for an elastic job: one host for the run, a
// generation's Member at a time (mirrored.Elastic). The chief of the last
// generation writes the cluster's summary, with every peer of it at its
// cluster index.
func (cfg *WorkerConfig) runElastic(ctx context.Context, start time.Time, log *zap.Logger) (*mirrored.Summary, error) {
	self := cfg.Cluster.Rank
	if err := cfg.Grow.Check(len(cfg.Cluster.Peers)); err != nil {
		return nil, err
	}
	peers := slices.Concat(cfg.Cluster.Peers, cfg.Grow.Slots)
	if cfg.Grow.Max > len(peers) { // the slots of the workers to come, without an address yet
		peers = append(peers, make([]string, cfg.Grow.Max-len(peers))...)
	}
	h, err := p2p.Listen(p2p.Config{
		Rank: self, Peers: peers, Security: cfg.Security, IntraHost: cfg.IntraHost,
		ClusterSecret: cfg.Secret, Identity: cfg.Identity, PSK: cfg.PSK, Timeout: cfg.Timeout, Logger: log.Named("p2p"),
		OnListening: cfg.OnListening, ListenHint: cfg.Cluster.ListenHint,
	})
	if err != nil {
		return nil, fmt.Errorf("peer %d: %w", self, err)
	}
	defer h.Close()
	n := &elasticNet{h: h, log: log.Named("elastic"), host: cfg.Host,
		opts: collective.Options{Timeout: cfg.Timeout, Algo: cfg.Algo, LinkFaults: cfg.LinkFaults,
			// A generation's collective names ranks of the generation, and
			// its failure is the elastic driver's to log, once, with the
			// cluster's indices: only its errors are logged here.
			Logger: log.Named("collective").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))}}
	job := cfg.Job
	el := *job.Strategy.(*mirrored.Elastic) // RunWorker's caller made it elastic
	el.Membership, el.Timeout, el.Logger = n, cfg.Timeout, log.Named("elastic")
	if cfg.Grow.Max > 0 {
		// The listed workers start the run; a newcomer's list is longer
		// (itself at the end), so the cluster is compared by its size.
		el.Initial = len(cfg.Cluster.Peers)
		if cfg.Grow.Join { // the slots before its own may start the run; it joins
			el.Initial = self
		}
		job.Cluster = fmt.Sprintf("elastic, up to %d workers (--max-workers)", cfg.Grow.Max)
		if cfg.Grow.Every <= 0 {
			cfg.Grow.Every = DefaultDiscoverEvery
		}
		if cfg.Grow.Cmd != "" {
			n.disc = newDiscovery(cfg.Grow, h, peers, log.Named("discover"))
			dctx, stop := context.WithCancel(ctx)
			defer stop()
			go n.disc.run(dctx)
		}
	}
	if el.Timeout <= 0 {
		el.Timeout = collective.DefaultTimeout
	}
	if f := &job.Faults; f.KillAfter > 0 && f.KillRank == self {
		f.Kill = func() { _ = h.Close() } // the peers see the links reset, not a goodbye
	}
	if cfg.Timeline != "" {
		job.Timeline = timeline.NewRecorder(cfg.TimelineSteps)
		n.opts.Phases = job.Timeline.Phase // every generation's all-reduce phases, nested in its combines
	}
	el.Final = func(ctx context.Context, sum *mirrored.Summary, members []int) error {
		m := n.current()
		// The last generation's traffic, by cluster index (its ranks are
		// positions in members).
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links = m.Links()
		for i := range sum.Peer.Links {
			sum.Peer.Links[i].Peer = members[sum.Peer.Links[i].Peer]
		}
		sum.Peer.Rank = self
		gathered, err := gatherSummaries(ctx, m.Comm, sum)
		if err != nil {
			return err
		}
		if cfg.Timeline != "" {
			if err := writeTimeline(ctx, m.Comm, job.Timeline, cfg.Timeline, true); err != nil {
				return err
			}
		}
		if m.Comm.Rank() != 0 {
			return nil
		}
		all := make([]*mirrored.Summary, h.Size())
		for r, p := range members {
			all[p] = gathered[r]
		}
		return cfg.writeClusterSummary(all, start, false)
	}
	job.Strategy = &el
	sum, err := mirrored.Run(ctx, job, nil)
	if err != nil {
		return nil, err
	}
	if err := cfg.writeReport(sum, self); err != nil {
		return nil, err
	}
	return sum, nil
}
