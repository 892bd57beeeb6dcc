package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
)

// Cluster is how the peers of a benchmark are run: N local peers, or this
// process as one peer of a cluster across hosts (Remote).
type Cluster struct {
	N        int
	Security p2p.Security
	Muxer    p2p.Muxer // "" is p2p's default
	// IntraHost is how peers on one host link (p2p.Config.IntraHost;
	// "" is tls).
	IntraHost p2p.IntraHost
	InProcess bool          // goroutines in this process instead of child processes
	Timeout   time.Duration // collective timeout and connection deadline
	// GoMaxProcs is each peer process's GOMAXPROCS; 0 means NumCPU/N (at
	// least 1), so N peers on one machine do not oversubscribe its cores
	// (fewer spinning threads and cross-core wake-ups). In-process mode
	// leaves GOMAXPROCS alone.
	GoMaxProcs int
	// Remote, if set, makes this process one peer of a cluster across
	// hosts (one `meshtrain bench` per host, as `meshtrain worker` runs):
	// its Rank, Peers and credentials (ClusterSecret or Identity, PSK);
	// Security, Timeout and Logger are taken from the Cluster. N is then
	// len(Remote.Peers), and only rank 0 writes the results.
	Remote *p2p.Config
	// LinkFaults delays and paces this process's peers' outgoing frames
	// (fault injection, see collective.DelayLinks).
	LinkFaults collective.LinkFaults
	Logger     *zap.Logger
}

// Header is what every benchmark's JSON starts with: what ran, where and
// when.
type Header struct {
	// Format names the JSON's layout and its version.
	Format  string `json:"format"`
	Version string `json:"meshtrain_version"`
	Started string `json:"started"` // RFC 3339
	// Peers is the number of peers, Addrs their addresses in rank order.
	Peers      int      `json:"peers"`
	Addrs      []string `json:"addrs,omitempty"`
	Security   string   `json:"security"`
	IntraHost  string   `json:"intra_host,omitempty"`
	Muxer      string   `json:"muxer,omitempty"`
	Mode       string   `json:"mode"`
	LinkFaults string   `json:"link_faults"`
}

// header fills a Header for format; addrs are the cluster's addresses.
func (cl Cluster) header(format string, start time.Time, addrs []string) Header {
	return Header{Format: format, Version: mirrored.Version(), Started: start.UTC().Format(time.RFC3339),
		Peers: cl.size(), Addrs: addrs, Security: string(cl.Security), IntraHost: string(cl.IntraHost), Muxer: string(cl.Muxer), Mode: cl.mode(), LinkFaults: cl.LinkFaults.String()}
}

// size is the number of peers.
func (cl Cluster) size() int {
	if cl.Remote != nil {
		return len(cl.Remote.Peers)
	}
	return cl.N
}

// reports says whether this process writes the results: rank 0 across
// hosts; of N local peers the parent, not a child peer process.
func (cl Cluster) reports() bool {
	if cl.Remote != nil {
		return cl.Remote.Rank == 0
	}
	ro, err := childRole()
	return err == nil && ro == nil
}

// ParseSizes parses a comma-separated list like "4K,64K,1M,16M,64M"
// (K, M, G are powers of 1024; a plain number is bytes).
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "K"):
			mult, f = 1<<10, strings.TrimSuffix(f, "K")
		case strings.HasSuffix(f, "M"):
			mult, f = 1<<20, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "G"):
			mult, f = 1<<30, strings.TrimSuffix(f, "G")
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 || v > math.MaxInt64/mult {
			return nil, fmt.Errorf("bench: size %q: want a byte count like 4096, 4K, 16M", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

func (cl *Cluster) fill() {
	if cl.Timeout <= 0 {
		cl.Timeout = collective.DefaultTimeout
	}
	if cl.Logger == nil {
		cl.Logger = zap.NewNop()
	}
}

// join connects rank ro.Rank to the others and makes it a member with a
// Comm of opts.
func (cl Cluster) join(ctx context.Context, ro role, opts collective.Options) (*collective.Member, error) {
	pc := p2p.Config{Rank: ro.Rank, Peers: ro.Peers, ClusterSecret: ro.Secret}
	if cl.Remote != nil {
		pc = *cl.Remote
	}
	pc.Security, pc.Muxer, pc.Timeout, pc.Logger = cl.Security, cl.Muxer, cl.Timeout, cl.Logger.Named("p2p")
	pc.IntraHost = cl.IntraHost
	opts.Timeout, opts.LinkFaults = cl.Timeout, cl.LinkFaults
	if opts.Logger == nil {
		opts.Logger = cl.Logger.Named("collective")
	}
	m, _, err := p2p.Join(ctx, pc, opts)
	return m, err
}

// run starts the cluster and calls body on every rank of this process with
// its Comm and the cluster's addresses (in a child peer process or across
// hosts, on its rank only). It returns every peer's error joined.
func (cl Cluster) run(ctx context.Context, opts collective.Options, body func(ctx context.Context, c *collective.Comm, addrs []string) error) error {
	cl.fill()
	return cl.runRanks(ctx, nil, func(ctx context.Context, ro role) error {
		m, err := cl.join(ctx, ro, opts)
		if err != nil {
			return err
		}
		// Leave together, so nobody closes while a peer still reads.
		return m.Leave(ctx, body(ctx, m.Comm, ro.Peers), true)
	})
}

// runRanks runs runRank for this process's rank(s): across hosts its own;
// in a child peer process the one its parent gave it; else every rank of
// N local peers (runPeers), extend adding the run's part to each role.
func (cl Cluster) runRanks(ctx context.Context, extend func(*role), runRank func(context.Context, role) error) error {
	if cl.Remote != nil {
		ro := role{Rank: cl.Remote.Rank, Peers: cl.Remote.Peers}
		if extend != nil {
			extend(&ro)
		}
		return runRank(ctx, ro)
	}
	if ro, err := childRole(); err != nil || ro != nil {
		if err != nil {
			return err
		}
		return runRank(ctx, *ro)
	}
	if cl.N < 1 {
		return fmt.Errorf("bench: -n %d: want at least 1 peer", cl.N)
	}
	return runPeers(ctx, cl.N, cl.Security, cl.InProcess, peerProcs(cl.GoMaxProcs, cl.N), extend, runRank)
}

func (cl Cluster) mode() string {
	switch {
	case cl.Remote != nil:
		return fmt.Sprintf("one process per host, %d hosts", len(cl.Remote.Peers))
	case cl.InProcess:
		return fmt.Sprintf("all peers in one process (GOMAXPROCS %d)", runtime.GOMAXPROCS(0))
	}
	return fmt.Sprintf("one process per peer (GOMAXPROCS %d each)", peerProcs(cl.GoMaxProcs, cl.N))
}
