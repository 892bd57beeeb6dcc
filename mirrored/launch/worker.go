package launch

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/hostid"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/mirrored/observe"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/mirrored/report"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
)

// Environment variables shared by the launcher and its workers.
const (
	// SecretEnv holds the cluster secret (hex, at least 16 bytes) from which
	// the peers' libp2p identities are derived; the same on every peer.
	SecretEnv = "MESHTRAIN_CLUSTER_SECRET"
	// PSKEnv optionally holds a 32-byte libp2p private-network key (hex).
	PSKEnv = "MESHTRAIN_PSK"
)

// EventPrefix marks the lines of a worker's stdout that carry a JSON
// message for the launcher (an Event, or the worker's failure).
const EventPrefix = "@meshtrain "

// Message is one marked line of a worker's stdout.
type Message struct {
	mirrored.Event
	Error string `json:"error,omitempty"` // Kind "error": why the worker failed
	// Injected (Kind "error") says the fault injection killed the worker
	// (mirrored.ErrInjectedKill): the launcher then names it, not the
	// peers that failed because they lost it.
	Injected bool `json:"injected,omitempty"`
	// Stopped (Kind "error") says an elastic run stopped on purpose
	// (mirrored.ErrElasticStopped): launch does not restart the worker.
	Stopped bool `json:"stopped,omitempty"`
}

// WorkerConfig is one peer of a cluster.
type WorkerConfig struct {
	// Job is what this peer trains (mirrored.Run): the model, the
	// strategy and the faults. A rank killed by Job.Faults closes its
	// libp2p host without a goodbye, as a crash would, and fails.
	Job     mirrored.Job
	Cluster *cluster.Cluster
	// Security of the links: tls (default), noise, quic or plaintext.
	Security p2p.Security
	// IntraHost is how this peer links to peers on its host
	// (p2p.Config.IntraHost; the same on every peer).
	IntraHost p2p.IntraHost
	// Secret derives the peers' identities; PSK (optional) is a libp2p
	// private-network key.
	Secret, PSK []byte
	// Identity, if set, is this peer's key (instead of the one derived
	// from Secret), for clusters listed with /p2p/<peer-id> multiaddrs.
	Identity crypto.PrivKey
	// Timeout bounds connecting to the peers and every collective.
	Timeout time.Duration
	// Algo is the all-reduce algorithm (collective.Auto chooses by size
	// and, from the peers' hosts, collective.Hierarchical where some host
	// runs several peers); every peer must use the same.
	Algo collective.Algo
	// Host is the host this peer counts as for the hierarchical
	// all-reduce; "" is hostid.Self (machine, boot and network
	// namespace). Tests give peers of one machine different hosts.
	Host string
	// LinkFaults delays and paces this peer's outgoing frames (fault
	// injection, see collective.DelayLinks); peers may differ.
	LinkFaults collective.LinkFaults
	// Timeline, if set, is where the chief writes the run's trace (package
	// timeline): every peer records its last TimelineSteps steps (0:
	// timeline.DefaultSteps) and, under the ring, sends them to the chief
	// at the end with its clock offset; a gossip chief has only its own.
	Timeline      string
	TimelineSteps int
	// Cost, if set, is the cost model's calibration: the chief's verdict
	// puts its predicted step beside the measured one.
	Cost *cost.Params
	// Report, if set, receives the worker's Summary as JSON at the end.
	Report string
	// Summary and Table, if set, receive on the chief the cluster's
	// summary as launch writes it (report.WriteSummary, report.WriteTable), from every
	// peer's figures gathered over the cluster's links at the end of a
	// ring run (a gossip run's chief has only its own).
	Summary string
	Table   io.Writer
	// Events, if set, receives the job's events as marked lines
	// (EventPrefix + JSON), for a launcher reading the worker's stdout:
	// the steps every LogEvery (the worker's --log-every; 0:
	// observe.DefaultLogEvery) and at a bounded rate (observe.Sampled).
	Events   io.Writer
	LogEvery int
	Logger   *zap.Logger
	// OnListening, if set, is called once this peer listens, before it
	// connects to the others (a pod's readiness, see Health).
	OnListening func()
	// Grow lets workers outside Cluster join an elastic run (--max-workers,
	// --discover-cmd).
	Grow Grow
}

// learnHosts tells c every peer's host (host, or hostid.Self), so that
// Auto can choose the hierarchical all-reduce.
func learnHosts(ctx context.Context, c *collective.Comm, host string) error {
	if host == "" {
		host = hostid.Self()
	}
	return c.LearnHosts(ctx, host)
}

// SecretFromEnv reads the cluster secret and the optional PSK from the
// environment. The secret may be missing only if optional is true (every
// peer is listed with its /p2p/ ID and this one has its own key).
func SecretFromEnv(optional bool) (secret, psk []byte, err error) {
	switch s := strings.TrimSpace(os.Getenv(SecretEnv)); {
	case s == "" && optional:
	case s == "":
		return nil, nil, fmt.Errorf("%s is not set: every peer needs the same cluster secret (e.g. %s=$(openssl rand -hex 32) on every host, or in a private file given with --secret-file), from which the peers' identities are derived; or give every peer's /p2p/ ID in TF_CONFIG and this peer's key with --identity", SecretEnv, SecretEnv)
	default:
		if secret, err = parseSecret(s, SecretEnv); err != nil {
			return nil, nil, err
		}
	}
	if psk, err = pskFromEnv(); err != nil {
		return nil, nil, err
	}
	return secret, psk, nil
}

// parseSecret decodes a cluster secret read from source.
func parseSecret(s, source string) ([]byte, error) {
	secret, err := hex.DecodeString(s)
	if err != nil || len(secret) < 16 {
		return nil, fmt.Errorf("%s: want at least 32 hex digits (16 bytes), e.g. from openssl rand -hex 32", source)
	}
	return secret, nil
}

// pskFromEnv reads the optional private-network key.
func pskFromEnv() (psk []byte, err error) {
	if p := strings.TrimSpace(os.Getenv(PSKEnv)); p != "" {
		if psk, err = hex.DecodeString(p); err != nil || len(psk) != 32 {
			return nil, fmt.Errorf("%s: want exactly 64 hex digits (a 32-byte private-network key)", PSKEnv)
		}
	}
	return psk, nil
}

// RunWorker connects to the cluster over libp2p and runs the job as this
// peer's replica.
func RunWorker(ctx context.Context, cfg WorkerConfig) (sum *mirrored.Summary, err error) {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	rank := cfg.Cluster.Rank
	start := time.Now()
	var emitMu sync.Mutex
	emit := func(m Message) {
		if cfg.Events == nil {
			return
		}
		b, _ := json.Marshal(m) // plain data: cannot fail
		emitMu.Lock()
		fmt.Fprintf(cfg.Events, "%s%s\n", EventPrefix, b)
		emitMu.Unlock()
	}
	defer func() {
		if err != nil {
			emit(Message{Event: mirrored.Event{Kind: "error", Rank: rank}, Error: err.Error(), Injected: errors.Is(err, mirrored.ErrInjectedKill), Stopped: errors.Is(err, mirrored.ErrElasticStopped)})
		}
	}()
	if cfg.Job.Config.Progress == nil {
		cfg.Job.Config.Progress = io.Discard
	}
	// Compared in the start-up handshake: found at once, by every peer.
	cfg.Job.Cluster, cfg.Job.AllReduceAlgo = cfg.Cluster.Digest(), cfg.Algo.String()
	if cfg.Events != nil {
		// A copy: the caller's slice is not appended to.
		cfg.Job.Observers = append(cfg.Job.Observers[:len(cfg.Job.Observers):len(cfg.Job.Observers)],
			observe.Sampled(cfg.LogEvery, func(e mirrored.Event) { emit(Message{Event: e}) }))
	}
	if cfg.Job.Resources == nil { // every worker's summary has its resource history
		cfg.Job.Resources = observe.Resources(0)
	}

	if _, ok := cfg.Job.Strategy.(*mirrored.Elastic); ok {
		return cfg.runElastic(ctx, start, log)
	}
	job := cfg.Job
	opts := collective.Options{Timeout: cfg.Timeout, Algo: cfg.Algo, LinkFaults: cfg.LinkFaults, Logger: log.Named("collective")}
	if cfg.Timeline != "" {
		job.Timeline = timeline.NewRecorder(cfg.TimelineSteps)
		opts.Phases = job.Timeline.Phase // each combine's all-reduce phases, nested in it
	}
	m, t, err := p2p.Join(ctx, p2p.Config{
		Rank: rank, Peers: cfg.Cluster.Peers, Security: cfg.Security, IntraHost: cfg.IntraHost,
		ClusterSecret: cfg.Secret, Identity: cfg.Identity, PSK: cfg.PSK, Timeout: cfg.Timeout, Logger: log.Named("p2p"),
		OnListening: cfg.OnListening, ListenHint: cfg.Cluster.ListenHint,
	}, opts)
	if err != nil {
		return nil, err
	}
	if f := &job.Faults; f.KillAfter > 0 && f.KillRank == rank {
		f.Kill = func() { _ = t.Crash() } // the peers see the links reset, not a goodbye
	}
	gossip := mirrored.IsGossip(job.Strategy)
	if !gossip { // gossip runs no all-reduce
		if err := learnHosts(ctx, m.Comm, cfg.Host); err != nil {
			return nil, m.Leave(ctx, err, false)
		}
	}
	sum, err = mirrored.Run(ctx, job, mirrored.NewGroup(m.Comm))
	var all []*mirrored.Summary
	if err == nil && !gossip {
		sum.Run.Topology = m.Comm.Describe(4 * sum.Run.Params)
		if replica.WireOf(job.Combiner).Half() {
			sum.Run.Topology = m.Comm.DescribeHalf()
		}
	}
	if err == nil {
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links, sum.Peer.SameHostLinks = m.Links(), t.SameHostLinks()
		if !gossip { // a lost gossip replica could not take part
			all, err = gatherSummaries(ctx, m.Comm, sum)
		}
	}
	if err == nil && cfg.Timeline != "" {
		err = writeTimeline(ctx, m.Comm, job.Timeline, cfg.Timeline, !gossip)
	}
	// Gossip replicas already left together (their final swap), and a
	// barrier would fail over a peer that died.
	if err := m.Leave(ctx, err, !gossip); err != nil {
		return nil, err
	}
	if gossip {
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links, sum.Peer.SameHostLinks = m.Links(), t.SameHostLinks()
		all = []*mirrored.Summary{sum}
	}
	if rank == 0 {
		if err := cfg.writeClusterSummary(all, start, gossip); err != nil {
			return nil, err
		}
	}
	if err := cfg.writeReport(sum, rank); err != nil {
		return nil, err
	}
	return sum, nil
}

// writeReport writes this peer's Summary to --report, if given.
func (cfg *WorkerConfig) writeReport(sum *mirrored.Summary, rank int) error {
	if cfg.Report == "" {
		return nil
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return fmt.Errorf("rank %d: encoding the report: %w", rank, err)
	}
	if err := atomicfile.WriteFile(cfg.Report, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("rank %d: writing the report: %w", rank, err)
	}
	return nil
}

// writeTimeline writes, on the chief, the trace of the run's last steps
// to path: every peer's spans on the chief's clock when gather is set
// (each peer's offset measured now, at the end of the ring run, when
// every peer is still there), else the chief's own.
func writeTimeline(ctx context.Context, c *collective.Comm, rec *timeline.Recorder, path string, gather bool) error {
	peers := []timeline.Peer{{Rank: c.Rank(), Spans: rec.Spans()}}
	if gather {
		off, err := timeline.MeasureOffset(ctx, c, 8)
		if err != nil {
			return err
		}
		peers[0].Offset = off.Nanoseconds()
		if peers, err = collective.AllGatherJSON(ctx, c, peers[0]); err != nil {
			return fmt.Errorf("gathering the peers' timelines: %w", err)
		}
	}
	if c.Rank() != 0 {
		return nil
	}
	return timeline.WriteFile(path, peers)
}

// gatherSummaries gives every rank every rank's summary, over the
// cluster's own links.
func gatherSummaries(ctx context.Context, c *collective.Comm, mine *mirrored.Summary) ([]*mirrored.Summary, error) {
	all, err := collective.AllGatherJSON(ctx, c, mine)
	if err != nil {
		return nil, fmt.Errorf("gathering the peers' summaries: %w", err)
	}
	for r := range all {
		if all[r] == nil || all[r].Run == nil {
			return nil, fmt.Errorf("rank %d's summary has no run", r)
		}
	}
	return all, nil
}

// writeClusterSummary writes, on the chief, the cluster's table and
// summary from the summaries of ranks 0..len(all)-1 (the others are
// shown without figures).
func (cfg *WorkerConfig) writeClusterSummary(all []*mirrored.Summary, start time.Time, gossip bool) error {
	if cfg.Summary == "" && cfg.Table == nil {
		return nil
	}
	info := report.RunInfo{Strategy: mirrored.StrategyRing, Security: string(cfg.Security), AllReduceAlgo: cfg.Algo.String(), LinkFaults: cfg.LinkFaults.String()}
	if st := cfg.Job.Strategy; st != nil {
		info.Strategy = st.Name()
	}
	if f := replica.WireOf(cfg.Job.Combiner); f.Half() {
		info.Wire = f.String()
	}
	if info.Security == "" {
		info.Security = string(p2p.SecurityTLS)
	}
	rep := &report.Report{WallSeconds: time.Since(start).Seconds(), Started: start, Gossip: gossip, Info: info, Cost: cfg.Cost}
	for r, addr := range cfg.Cluster.Peers {
		p := report.Peer{Rank: r, Addr: addr}
		switch {
		case r < len(all) && all[r] != nil:
			p.Summary = all[r]
		case gossip:
			p.Err = "gossip: its figures are not gathered (see its own --report)"
		default:
			p.Err = "not in the elastic run's last generation (see the summary's membership)"
		}
		rep.Peers = append(rep.Peers, p)
	}
	rep.Identical = report.Identical(rep.Peers)
	if cfg.Table != nil {
		report.WriteTable(cfg.Table, rep)
	}
	if cfg.Summary != "" {
		return report.WriteSummary(cfg.Summary, rep)
	}
	return nil
}
