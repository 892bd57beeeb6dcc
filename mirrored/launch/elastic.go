package launch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
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

	mu     sync.Mutex
	member *collective.Member // the current generation's
}

var _ mirrored.Membership = (*elasticNet)(nil)

func (n *elasticNet) Self() int { return n.h.Self() }
func (n *elasticNet) Size() int { return n.h.Size() }

// Form implements mirrored.Membership.
func (n *elasticNet) Form(ctx context.Context, gen uint64, members []int) (mirrored.Group, func(bool) error, error) {
	t, err := n.h.Form(ctx, gen, members)
	if err != nil {
		return nil, nil, err
	}
	m, err := collective.Join(t, n.opts)
	if err != nil {
		return nil, nil, err
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
		if err := writeMessage(s, answer(from, msg)); err != nil {
			_ = s.Reset()
		}
	})
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
	h, err := p2p.Listen(p2p.Config{
		Rank: self, Peers: cfg.Cluster.Peers, Security: cfg.Security, IntraHost: cfg.IntraHost,
		ClusterSecret: cfg.Secret, Identity: cfg.Identity, PSK: cfg.PSK, Timeout: cfg.Timeout, Logger: log.Named("p2p"),
		OnListening: cfg.OnListening, ListenHint: cfg.Cluster.ListenHint,
	})
	if err != nil {
		return nil, fmt.Errorf("peer %d: %w", self, err)
	}
	defer h.Close()
	n := &elasticNet{h: h, log: log.Named("elastic"),
		opts: collective.Options{Timeout: cfg.Timeout, Algo: cfg.Algo, LinkFaults: cfg.LinkFaults, Logger: log.Named("collective")}}
	job := cfg.Job
	el := *job.Strategy.(*mirrored.Elastic) // RunWorker's caller made it elastic
	el.Membership, el.Timeout, el.Logger = n, cfg.Timeout, log.Named("elastic")
	if el.Timeout <= 0 {
		el.Timeout = collective.DefaultTimeout
	}
	if f := &job.Faults; f.KillAfter > 0 && f.KillRank == self {
		f.Kill = func() { _ = h.Close() } // the peers see the links reset, not a goodbye
	}
	if cfg.Timeline != "" {
		job.Timeline = timeline.NewRecorder(cfg.TimelineSteps)
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
