package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
)

// Cluster is how the peers of a benchmark are run.
type Cluster struct {
	N         int
	Security  p2p.Security
	InProcess bool          // goroutines in this process instead of child processes
	Timeout   time.Duration // collective timeout and connection deadline
	// GoMaxProcs is each peer process's GOMAXPROCS; 0 means NumCPU/N (at
	// least 1), so N peers on one machine do not oversubscribe its cores
	// (fewer spinning threads and cross-core wake-ups). In-process mode
	// leaves GOMAXPROCS alone.
	GoMaxProcs int
	Logger     *zap.Logger
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
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bench: size %q: want a byte count like 4096, 4K, 16M", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// run starts the cluster and calls body on every rank of this process with
// its Comm (in a child peer process, on its rank only). It returns every
// peer's error joined.
func (cl Cluster) run(ctx context.Context, opts collective.Options, body func(ctx context.Context, c *collective.Comm) error) error {
	if cl.Timeout <= 0 {
		cl.Timeout = 60 * time.Second
	}
	if cl.Logger == nil {
		cl.Logger = zap.NewNop()
	}
	opts.Timeout = cl.Timeout
	opts.Logger = cl.Logger
	runRank := func(ctx context.Context, ro role) error {
		m, _, err := p2p.Join(ctx, p2p.Config{Rank: ro.Rank, Peers: ro.Peers, Security: cl.Security, ClusterSecret: ro.Secret, Timeout: cl.Timeout, Logger: cl.Logger}, opts)
		if err != nil {
			return err
		}
		// Leave together, so nobody closes while a peer still reads.
		return m.Leave(ctx, body(ctx, m.Comm), true)
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
	return runPeers(ctx, cl.N, cl.Security, cl.InProcess, peerProcs(cl.GoMaxProcs, cl.N), nil, runRank)
}
