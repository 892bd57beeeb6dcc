package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/rusage"
)

// AllReduceConfig configures `meshtrain bench allreduce`.
type AllReduceConfig struct {
	Cluster
	Sizes      []int64
	Algo       collective.Algo
	ChunkBytes int           // 0: collective.DefaultChunkBytes
	SmallBytes int           // 0: collective.DefaultSmallBytes
	MinTime    time.Duration // per size; iterations are chosen to last about this long
	JSON       bool
}

// DefaultMinTime is how long each size is timed.
const DefaultMinTime = 500 * time.Millisecond

// Reps is how many timed repetitions each size gets; the row reports the
// median repetition's time per all-reduce.
const Reps = 5

// Row is one line of the all-reduce table.
type Row struct {
	N       int     `json:"n"`
	Bytes   int64   `json:"bytes"`
	Count   int     `json:"count"`
	Algo    string  `json:"algo"`
	Iters   int     `json:"iters"`   // Reps repetitions of Iters/Reps
	TimeUS  float64 `json:"time_us"` // median repetition, per all-reduce
	CPUUS   float64 `json:"cpu_us"`  // CPU time of all peers per all-reduce
	AlgBW   float64 `json:"algbw_gbps"`
	BusBW   float64 `json:"busbw_gbps"`
	Correct bool    `json:"correct"`
}

// AllReduce runs the benchmark and writes the table (or JSON) to w: the
// table's header at once and each row as its size is measured. In a child
// peer process it only takes part and writes nothing.
func AllReduce(ctx context.Context, cfg AllReduceConfig, w io.Writer) error {
	if cfg.MinTime <= 0 {
		cfg.MinTime = DefaultMinTime
	}
	var out *table // nil: JSON, or a child peer process
	if ro, err := childRole(); err == nil && ro == nil && !cfg.JSON {
		fmt.Fprintf(w, "# meshtrain all-reduce: float32 sum, N=%d, security %s, algo %s, %s; time = median of %d reps\n", cfg.N, cfg.Security, cfg.Algo, cfg.mode(), Reps)
		var err error
		if out, err = newTable(w, allReduceColumns...); err != nil {
			return err
		}
	}
	var rows []Row
	opts := collective.Options{Algo: cfg.Algo, ChunkBytes: cfg.ChunkBytes, SmallBytes: cfg.SmallBytes}
	err := cfg.run(ctx, opts, func(ctx context.Context, c *collective.Comm) error {
		for _, size := range cfg.Sizes {
			row, err := measure(ctx, c, size, cfg.MinTime, cfg.InProcess)
			if err != nil {
				return fmt.Errorf("all-reduce of %d bytes: %w", size, err)
			}
			if c.Rank() != 0 {
				continue // every rank measured the same row
			}
			rows = append(rows, row)
			if out != nil {
				ok := "yes"
				if !row.Correct {
					ok = "NO"
				}
				if err := out.row(row.Bytes, row.Count, row.Algo, row.Iters, row.TimeUS, row.AlgBW, row.BusBW, ok, row.CPUUS); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil // a child peer process: rank 0 reports
	}
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range rows {
		if !r.Correct {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("bench: %d of %d sizes gave a wrong result", bad, len(rows))
	}
	return nil
}

// allReduceColumns are the all-reduce table's, nccl-tests' with the CPU
// time added.
var allReduceColumns = []column{
	{"size(B)", "%d", 10}, {"count", "%d", 9}, {"algo", "%s", 4}, {"iters", "%d", 4}, {"time(us)", "%.1f", 9},
	{"algbw(GB/s)", "%.3f", 6}, {"busbw(GB/s)", "%.3f", 6}, {"correct", "%s", 3}, {"cpu(us)", "%.0f", 8},
}

func (cl Cluster) mode() string {
	if cl.InProcess {
		return fmt.Sprintf("all peers in one process (GOMAXPROCS %d)", runtime.GOMAXPROCS(0))
	}
	return fmt.Sprintf("one process per peer (GOMAXPROCS %d each)", peerProcs(cl.GoMaxProcs, cl.N))
}

// measure times one size on every rank; all ranks return the same row.
func measure(ctx context.Context, c *collective.Comm, size int64, minTime time.Duration, inProcess bool) (Row, error) {
	n := c.Size()
	count := int(size / 4)
	buf := make([]float32, count)
	fill := func() {
		for i := range buf {
			buf[i] = float32((c.Rank() + 1) * (i % 13))
		}
	}
	// Correctness: small integers sum exactly, so the check is exact.
	fill()
	if err := c.AllReduceFloat32(ctx, buf, collective.Sum); err != nil {
		return Row{}, err
	}
	correct := 1.0
	for i, v := range buf {
		if v != float32(n*(n+1)/2*(i%13)) {
			correct = 0
			break
		}
	}
	// Every rank must agree that every rank was correct.
	ok := []float64{correct}
	if err := c.AllReduceFloat64(ctx, ok, collective.Min); err != nil {
		return Row{}, err
	}
	// Warm up, then pick an iteration count every rank agrees on.
	fill()
	start := time.Now()
	for range 2 {
		if err := c.AllReduceFloat32(ctx, buf, collective.Sum); err != nil {
			return Row{}, err
		}
	}
	one := []float64{time.Since(start).Seconds() / 2}
	if err := c.AllReduceFloat64(ctx, one, collective.Max); err != nil {
		return Row{}, err
	}
	// Reps of k back-to-back all-reduces after a barrier, reported as the
	// median rep (the anchors' method): on a shared machine one slow rep
	// then moves the figure no more than one fast one.
	k := int(minTime.Seconds() / Reps / max(one[0], 1e-7))
	k = min(max(k, 1), 1000)
	iters := Reps * k
	reps := make([]float64, Reps)
	var cpuUsed time.Duration
	fill()
	for i := range reps {
		if err := c.Barrier(ctx); err != nil {
			return Row{}, err
		}
		cpu0 := rusage.CPUTime()
		start = time.Now()
		for range k {
			if err := c.AllReduceFloat32(ctx, buf, collective.Sum); err != nil {
				return Row{}, err
			}
		}
		reps[i] = time.Since(start).Seconds() / float64(k)
		cpuUsed += rusage.CPUTime() - cpu0
	}
	// A rep lasts as long as its slowest rank.
	if err := c.AllReduceFloat64(ctx, reps, collective.Max); err != nil {
		return Row{}, err
	}
	// CPU time of all peers together: a figure that, unlike wall time,
	// hardly moves when other processes share the cores. In-process, one
	// process's rusage already covers every peer.
	cpu := []float64{cpuUsed.Seconds() / float64(iters)}
	cpuOp := collective.Sum
	if inProcess {
		cpuOp = collective.Max
	}
	if err := c.AllReduceFloat64(ctx, cpu, cpuOp); err != nil {
		return Row{}, err
	}
	slices.Sort(reps)
	t := reps[len(reps)/2]
	algbw := float64(size) / t / 1e9
	busbw := 0.0
	if n > 1 {
		busbw = algbw * 2 * float64(n-1) / float64(n)
	}
	return Row{N: n, Bytes: size, Count: count, Algo: c.AlgoFor(int(size)).String(), Iters: iters, TimeUS: t * 1e6, CPUUS: cpu[0] * 1e6, AlgBW: algbw, BusBW: busbw, Correct: ok[0] == 1}, nil
}
