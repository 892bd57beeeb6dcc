package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
)

// ChildEnv carries a child peer's role (JSON of childRole) from the parent.
const ChildEnv = "MESHTRAIN_BENCH_CHILD"

type childRole struct {
	Rank   int      `json:"rank"`
	Peers  []string `json:"peers"`
	Secret string   `json:"secret"` // hex
}

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

// run starts the cluster and calls body on every rank with its Comm. In the
// parent (rank 0, or every rank when InProcess) it returns rank 0's error
// joined with the children's.
func (cl Cluster) run(ctx context.Context, opts collective.Options, body func(ctx context.Context, c *collective.Comm) error) error {
	if cl.Timeout <= 0 {
		cl.Timeout = 60 * time.Second
	}
	if cl.Logger == nil {
		cl.Logger = zap.NewNop()
	}
	opts.Timeout = cl.Timeout
	opts.Logger = cl.Logger
	if raw := os.Getenv(ChildEnv); raw != "" {
		var role childRole
		if err := json.Unmarshal([]byte(raw), &role); err != nil {
			return fmt.Errorf("bench: bad %s: %w", ChildEnv, err)
		}
		secret, err := hex.DecodeString(role.Secret)
		if err != nil {
			return fmt.Errorf("bench: bad secret in %s: %w", ChildEnv, err)
		}
		return cl.runRank(ctx, role.Rank, role.Peers, secret, opts, body)
	}
	if cl.N < 1 {
		return fmt.Errorf("bench: -n %d: want at least 1 peer", cl.N)
	}
	peers, err := p2p.LocalAddrs(cl.N, cl.Security == p2p.SecurityQUIC)
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	errs := make([]error, cl.N)
	var wg sync.WaitGroup
	if cl.InProcess {
		for r := 1; r < cl.N; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = cl.runRank(ctx, r, peers, secret, opts, body)
			}()
		}
	} else {
		procs := cl.GoMaxProcs
		if procs <= 0 {
			procs = max(1, runtime.NumCPU()/cl.N)
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		role := func(r int) any { return childRole{Rank: r, Peers: peers, Secret: hex.EncodeToString(secret)} }
		if err := StartPeers(ctx, &wg, errs, cl.N, procs, ChildEnv, role, nil); err != nil {
			return err
		}
	}
	errs[0] = cl.runRank(ctx, 0, peers, secret, opts, body)
	wg.Wait()
	return errors.Join(errs...)
}

func (cl Cluster) runRank(ctx context.Context, rank int, peers []string, secret []byte, opts collective.Options, body func(context.Context, *collective.Comm) error) error {
	m, _, err := p2p.Join(ctx, p2p.Config{Rank: rank, Peers: peers, Security: cl.Security, ClusterSecret: secret, Timeout: cl.Timeout, Logger: cl.Logger}, opts)
	if err != nil {
		return err
	}
	// Leave together, so nobody closes while a peer still reads.
	return m.Leave(ctx, body(ctx, m.Comm), true)
}
