package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/sparse"
)

// SparseConfig configures the benchmark.
type SparseConfig struct {
	// Peers lists the cluster sizes to time (e.g. 2 and 4).
	Peers []int
	// Features is D; below criteo.Features the generated indices are
	// folded modulo D.
	Features int
	// Batch is the batch per peer per step.
	Batch int
	// Examples is the number of distinct generated examples per peer
	// (cycled over epochs).
	Examples int
	// Steps is the number of timed sparse steps per cluster; DenseSteps
	// of dense ones (0 skips the dense run); LocalSteps of the one-core
	// local run (0 skips it).
	Steps, DenseSteps, LocalSteps int
	// Optimizer (sgd, adagrad, ftrl) and its learning rate.
	Optimizer string
	LR        float64
	// Gather is mirrored.GatherDirect or mirrored.GatherRing.
	Gather string
	Seed   uint64
	// Cluster is how the peers run (its N is unused: Peers lists the
	// sizes). InProcess runs them as goroutines of this process (still
	// over libp2p on 127.0.0.1), for tests: a test binary cannot be
	// re-executed as a peer. With Cluster.Remote, this process is one peer
	// of a cluster across hosts: Peers is ignored, the cluster is timed at
	// its own size, and only rank 0 runs the local timing and reports.
	Cluster
	// CPUProfile, if set, is a file name prefix: the local run writes a
	// CPU profile to PREFIX-local.pprof, rank 0 of each cluster run to
	// PREFIX-n<N>.pprof (sparse exchange) or PREFIX-n<N>-dense.pprof.
	CPUProfile string
	JSON       bool
}

// SparseFormat names the layout of SparseResult's JSON.
const SparseFormat = "meshtrain-bench-sparse/2"

// SparseResult is what the benchmark reports.
type SparseResult struct {
	Header
	Features  int    `json:"features"`
	Batch     int    `json:"batch_per_peer"`
	Optimizer string `json:"optimizer"`
	// LocalExamplesPerSec is one replica on one core (GOMAXPROCS 1),
	// input pipeline included; LocalComputeExamplesPerSec counts only the
	// training step (gradient, mean, update), not the wait for input;
	// LocalCPUExamplesPerSec is examples per CPU-second of the whole
	// process, a figure that other load on the machine hardly moves.
	LocalExamplesPerSec        float64     `json:"local_examples_per_sec,omitempty"`
	LocalComputeExamplesPerSec float64     `json:"local_compute_examples_per_sec,omitempty"`
	LocalCPUExamplesPerSec     float64     `json:"local_cpu_examples_per_sec,omitempty"`
	Rows                       []SparseRow `json:"rows"`
}

// SparseRow is one timed cluster run.
type SparseRow struct {
	Peers      int     `json:"peers"`
	Exchange   string  `json:"exchange"`
	Gather     string  `json:"gather,omitempty"`
	GoMaxProcs int     `json:"gomaxprocs"`
	Steps      int     `json:"steps"`
	StepsPerS  float64 `json:"steps_per_sec"`
	// ExamplesPerS is over all peers.
	ExamplesPerS float64 `json:"global_examples_per_sec"`
	// SentPerStep is the bytes one peer sends per step (collective frames
	// with their headers; the start-up handshake and final hash check are
	// spread over the steps, negligible except for very short runs).
	SentPerStep float64 `json:"sent_bytes_per_step"`
	// CPUPerStep is the CPU time (user + system) of all peers together per
	// step, from the first step to the last: unlike the wall-clock rate it
	// hardly moves when other processes share the cores, and NumCPU over
	// it bounds the steps/s the machine could reach if nothing else ran.
	CPUPerStep   float64 `json:"cpu_seconds_per_step"`
	ComputeShare float64 `json:"compute_share"`
	CommShare    float64 `json:"comm_share"`
	WaitShare    float64 `json:"wait_share"`
	// Identical says the peers ended with bitwise-identical weights.
	Identical bool `json:"identical"`
}

func (cfg *SparseConfig) fill() error {
	if cfg.Features == 0 {
		cfg.Features = criteo.Features
	}
	if cfg.Batch == 0 {
		cfg.Batch = 100
	}
	if cfg.Examples == 0 {
		cfg.Examples = 50_000
	}
	if cfg.Optimizer == "" {
		cfg.Optimizer = "adagrad"
	}
	if cfg.LR == 0 {
		cfg.LR = 0.05
	}
	cfg.Cluster.fill()
	// The training loop's per-epoch lines would drown the table; its
	// warnings and errors still show.
	cfg.Logger = cfg.Logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	switch {
	case cfg.Features < 1 || cfg.Features > criteo.Features:
		return fmt.Errorf("bench sparse: --features %d: want 1..%d (the generator's width)", cfg.Features, criteo.Features)
	case cfg.Batch < 1 || cfg.Examples < cfg.Batch:
		return fmt.Errorf("bench sparse: batch %d with %d examples per peer: want 1 <= batch <= examples", cfg.Batch, cfg.Examples)
	case cfg.Steps < 0 || cfg.DenseSteps < 0 || cfg.LocalSteps < 0:
		return fmt.Errorf("bench sparse: step counts %d/%d/%d: want ≥ 0", cfg.Steps, cfg.DenseSteps, cfg.LocalSteps)
	}
	if cfg.Remote != nil {
		cfg.Peers = []int{len(cfg.Remote.Peers)}
	}
	for _, n := range cfg.Peers {
		if n < 2 {
			return fmt.Errorf("bench sparse: %d peers: want at least 2 (the local run covers one)", n)
		}
	}
	return nil
}

// Sparse runs the benchmark and writes a table (or JSON) to w: the header
// at once, then each result as soon as it is measured. In a child peer
// process, or on a rank other than 0 across hosts, it only takes part.
func Sparse(ctx context.Context, cfg SparseConfig, w io.Writer) error {
	if err := cfg.fill(); err != nil {
		return err
	}
	if ro, err := childRole(); err != nil || ro != nil {
		if err != nil {
			return err
		}
		_, err = cfg.runRank(ctx, *ro)
		return err
	}
	start := time.Now()
	res := &SparseResult{Features: cfg.Features, Batch: cfg.Batch, Optimizer: cfg.Optimizer}
	chief := cfg.reports()
	cl := cfg.Cluster
	cl.N = slices.Max(append(cfg.Peers, 1))
	out := sparseOutput{cfg: &cfg, w: w, text: chief && !cfg.JSON}
	if err := out.header(cl); err != nil {
		return err
	}
	if cfg.LocalSteps > 0 && chief {
		if err := cfg.local(ctx, res); err != nil {
			return err
		}
		if err := out.local(res); err != nil {
			return err
		}
	}
	var addrs []string
	for _, n := range cfg.Peers {
		for _, mode := range []struct {
			exchange string
			steps    int
		}{{"sparse", cfg.Steps}, {"dense", cfg.DenseSteps}} {
			if mode.steps == 0 {
				continue
			}
			row, peers, err := cfg.cluster(ctx, n, mode.exchange, mode.steps)
			if err != nil {
				return fmt.Errorf("bench sparse: %d peers, %s exchange: %w", n, mode.exchange, err)
			}
			res.Rows, addrs = append(res.Rows, row), peers
			if err := out.row(row); err != nil {
				return err
			}
		}
	}
	if !chief {
		return nil
	}
	res.Header = cl.header(SparseFormat, start, addrs)
	return out.end(res)
}

// dataset generates n Criteo-like examples (27 one-hot features each),
// folding indices modulo D when D is below the generator's width.
func (cfg *SparseConfig) dataset(n int) (*data.SparseSet, error) {
	g, err := criteo.NewGenerator(cfg.Seed, 0, 0)
	if err != nil {
		return nil, err
	}
	s := g.Stream(0)
	rowPtr := make([]int, 1, n+1)
	idx := make([]int32, 0, 27*n)
	val := make([]float32, 0, 27*n)
	labels := make([]float32, 0, n)
	var ex data.Example
	for range n {
		s.Next(&ex)
		start := len(idx)
		for _, i := range ex.Indices {
			idx = append(idx, i%int32(cfg.Features))
		}
		if cfg.Features < criteo.Features {
			row := idx[start:]
			slices.Sort(row)
			idx = idx[:start+len(slices.Compact(row))]
		}
		for range len(idx) - start {
			val = append(val, 1)
		}
		labels = append(labels, ex.Label)
		rowPtr = append(rowPtr, len(idx))
	}
	return data.NewSparseSet(rowPtr, idx, val, labels)
}

// job is the sparse job every rank of a run executes.
func (cfg *SparseConfig) job(train data.Dataset, n int, exchange string, steps int, log *zap.Logger) (mirrored.Job, error) {
	exch, err := sparse.ParseExchange(exchange)
	if err != nil {
		return mirrored.Job{}, err
	}
	perEpoch := train.Len() / n / cfg.Batch
	return mirrored.Job{
		Config: mirrored.Config{
			Model: mirrored.SparseModel, Epochs: (steps + perEpoch - 1) / perEpoch, BatchSize: cfg.Batch,
			LR: cfg.LR, Seed: int64(cfg.Seed), Logger: log,
		},
		Sparse: &mirrored.SparseConfig{Features: cfg.Features, Train: train, Optimizer: cfg.Optimizer,
			Exchange: exch, Gather: cfg.Gather, MaxSteps: steps},
	}, nil
}

// local times one replica on one core.
func (cfg *SparseConfig) local(ctx context.Context, res *SparseResult) error {
	train, err := cfg.dataset(cfg.Examples)
	if err != nil {
		return err
	}
	job, err := cfg.job(train, 1, "sparse", cfg.LocalSteps, cfg.Logger.Named("local"))
	if err != nil {
		return err
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if cfg.CPUProfile != "" {
		stop, err := startProfile(cfg.CPUProfile + "-local.pprof")
		if err != nil {
			return err
		}
		defer stop()
	}
	var cpu0, cpu1 time.Duration
	job.Observers = append(job.Observers, cpuSpan(&cpu0, &cpu1))
	sum, err := mirrored.Train(ctx, job)
	if err != nil {
		return fmt.Errorf("bench sparse: local run: %w", err)
	}
	p := sum.Peer
	res.LocalExamplesPerSec = p.ExamplesPerSec
	if s := p.ComputeSeconds + p.CommSeconds; s > 0 {
		res.LocalComputeExamplesPerSec = float64(p.Examples) / s
	}
	if cpu1 > cpu0 {
		res.LocalCPUExamplesPerSec = float64(p.Examples) / (cpu1 - cpu0).Seconds()
	}
	return nil
}

// cluster runs one timed run of n peers and returns its row and the
// peers' addresses (on a rank other than 0 across hosts, a zero row).
func (cfg *SparseConfig) cluster(ctx context.Context, n int, exchange string, steps int) (SparseRow, []string, error) {
	cl := cfg.Cluster
	cl.N = n
	procs := peerProcs(cfg.GoMaxProcs, n)
	if cfg.InProcess {
		procs = runtime.GOMAXPROCS(0)
	}
	var reps []report
	var addrs []string
	err := cl.runRanks(ctx, func(ro *role) { ro.Exchange, ro.Steps = exchange, steps }, func(ctx context.Context, ro role) error {
		all, err := cfg.runRank(ctx, ro)
		if ro.Rank == 0 {
			reps, addrs = all, ro.Peers
		}
		return err
	})
	if err != nil || reps == nil {
		return SparseRow{}, addrs, err
	}
	p := reps[0].Summary.Peer
	cpu := reps[0].CPUSeconds
	total := p.ComputeSeconds + p.CommSeconds + p.WaitSeconds
	row := SparseRow{
		Peers: n, Exchange: exchange, GoMaxProcs: procs, Steps: p.Steps,
		StepsPerS: float64(p.Steps) / total, ExamplesPerS: float64(n*p.Examples) / total,
		SentPerStep:  float64(p.BytesSent) / float64(p.Steps),
		ComputeShare: p.ComputeShare, CommShare: p.CommShare, WaitShare: p.WaitShare, Identical: true,
	}
	if exchange == "sparse" {
		row.Gather = cfg.Gather
		if row.Gather == "" {
			row.Gather = mirrored.GatherDirect
		}
	}
	for _, theirs := range reps[1:] {
		if theirs.Summary.Peer.ParamsSHA256 != p.ParamsSHA256 {
			row.Identical = false
		}
		if !cfg.InProcess { // in one process, rank 0's figure covers all
			cpu += theirs.CPUSeconds
		}
	}
	row.CPUPerStep = cpu / float64(p.Steps)
	return row, addrs, nil
}

// report is what each peer measured.
type report struct {
	Summary *mirrored.Summary `json:"summary"`
	// CPUSeconds is the process's CPU time over the training steps.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// runRank connects rank ro.Rank to the others, runs the job, and gathers
// every rank's report over the cluster's own links (so that peers on other
// hosts need no shared files). It returns the reports in rank order.
func (cfg *SparseConfig) runRank(ctx context.Context, ro role) ([]report, error) {
	n := len(ro.Peers)
	log := cfg.Logger
	// Generate before connecting, so the peers' start-up costs overlap
	// instead of counting against the connection timeout.
	train, err := cfg.dataset(cfg.Examples * n)
	if err != nil {
		return nil, err
	}
	job, err := cfg.job(train, n, ro.Exchange, ro.Steps, log)
	if err != nil {
		return nil, err
	}
	m, err := cfg.join(ctx, ro, collective.Options{})
	if err != nil {
		return nil, err
	}
	if cfg.CPUProfile != "" && ro.Rank == 0 {
		stop, err := startProfile(profilePath(cfg.CPUProfile, n, ro.Exchange))
		if err != nil {
			return nil, m.Leave(ctx, err, false)
		}
		defer stop()
	}
	var cpu0, cpu1 time.Duration
	job.Observers = append(job.Observers, cpuSpan(&cpu0, &cpu1))
	sum, err := mirrored.Run(ctx, job, mirrored.NewGroup(m.Comm))
	var all []report
	if err == nil {
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links = m.Links()
		all, err = gatherReports(ctx, m.Comm, report{Summary: sum, CPUSeconds: (cpu1 - cpu0).Seconds()})
	}
	// Leave together, so nobody closes while a peer still reads.
	if err := m.Leave(ctx, err, true); err != nil {
		return nil, err
	}
	return all, nil
}

// gatherReports gives every rank every rank's report.
func gatherReports(ctx context.Context, c *collective.Comm, mine report) ([]report, error) {
	all, err := collective.AllGatherJSON(ctx, c, mine)
	if err != nil {
		return nil, fmt.Errorf("gathering the peers' reports: %w", err)
	}
	for r := range all {
		if all[r].Summary == nil {
			return nil, fmt.Errorf("rank %d's report has no summary", r)
		}
	}
	return all, nil
}

// profilePath names rank 0's CPU profile of an n-peer run:
// PREFIX-n<N>.pprof for the sparse exchange, PREFIX-n<N>-dense.pprof for
// the dense one.
func profilePath(prefix string, n int, exchange string) string {
	if exchange == "sparse" {
		return fmt.Sprintf("%s-n%d.pprof", prefix, n)
	}
	return fmt.Sprintf("%s-n%d-%s.pprof", prefix, n, exchange)
}

// startProfile starts a CPU profile into path and returns what stops it.
func startProfile(path string) (func(), error) {
	f, err := atomicfile.Create(path, 0o644) // a device or FIFO is written into, never renamed over
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Commit(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: the CPU profile:", err)
		}
	}, nil
}

// sparseOutput writes the benchmark's results as they come: a table
// (text), or JSON at the end.
type sparseOutput struct {
	cfg   *SparseConfig
	w     io.Writer
	text  bool
	table *table // after the first row
}

// header writes what runs; cl is the cluster at its largest size.
func (o *sparseOutput) header(cl Cluster) error {
	if !o.text {
		return nil
	}
	c := o.cfg
	_, err := fmt.Fprintf(o.w, "# meshtrain sparse logistic regression: D=%d, batch %d per peer, %s lr %g, generated Criteo-like data (%d examples per peer), security %s, %s, link faults %s\n",
		c.Features, c.Batch, c.Optimizer, c.LR, c.Examples, c.Security, cl.mode(), cl.LinkFaults)
	return err
}

func (o *sparseOutput) local(res *SparseResult) error {
	if !o.text {
		return nil
	}
	_, err := fmt.Fprintf(o.w, "local, one core: %.0f examples/s (input pipeline included), %.0f examples/s (training step only), %.0f examples per CPU-second\n",
		res.LocalExamplesPerSec, res.LocalComputeExamplesPerSec, res.LocalCPUExamplesPerSec)
	return err
}

// sparseColumns are the columns of the cluster runs' table.
var sparseColumns = []column{
	{"peers", "%d", 2}, {"exchange", "%s", 6}, {"gather", "%s", 6}, {"gomaxprocs", "%d", 2}, {"steps", "%d", 6},
	{"steps/s", "%.1f", 7}, {"examples/s", "%.0f", 8}, {"sent B/step/peer", "%.0f", 10}, {"cpu us/step (all)", "%.0f", 8},
	{"compute", "%.0f%%", 4}, {"comm", "%.0f%%", 4}, {"wait", "%.0f%%", 4}, {"identical", "%s", 3},
}

func (o *sparseOutput) row(r SparseRow) error {
	if !o.text {
		return nil
	}
	if o.table == nil {
		var err error
		if o.table, err = newTable(o.w, sparseColumns); err != nil {
			return err
		}
	}
	ok := "yes"
	if !r.Identical {
		ok = "NO"
	}
	return o.table.row(r.Peers, r.Exchange, r.Gather, r.GoMaxProcs, r.Steps, r.StepsPerS, r.ExamplesPerS, r.SentPerStep,
		1e6*r.CPUPerStep, 100*r.ComputeShare, 100*r.CommShare, 100*r.WaitShare, ok)
}

// end writes the JSON, and fails if any run ended with different weights
// on different peers.
func (o *sparseOutput) end(res *SparseResult) error {
	if o.cfg.JSON {
		if err := writeJSON(o.w, res); err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range res.Rows {
		if !r.Identical {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("bench sparse: %d runs ended with different weights on different peers", bad)
	}
	return nil
}

// cpuSpan returns an observer recording the process's CPU time at
// the start of the first step (the "start" event) and after the last step
// (the last "epoch" event, which follows the epoch's loss all-reduce).
func cpuSpan(start, end *time.Duration) mirrored.ObserverFunc {
	return func(e mirrored.Event) error {
		switch {
		case e.Kind == "start":
			*start = rusage.CPUTime()
		case e.Kind == "epoch" && e.Step == e.Steps:
			*end = rusage.CPUTime()
		}
		return nil
	}
}
